// Package conversion serves a sidecar's CRD conversions from the host's
// webhook server.
//
// controller-runtime's conversion handler converts Go types registered in a
// scheme (hubs and spokes); the host has none, so it serves its own
// ConversionReview handler (apiextensions.k8s.io/v1) at Path. It checks that
// every object to convert is of a kind and version the sidecar declared, sends
// the objects, as the API server's JSON, to the sidecar's Convert in one call
// with a deadline below the API server's timeout, and checks the answer before
// passing it on: as many objects as were sent, each a JSON object of the
// desired apiVersion, of the same kind, with the same namespace, name and UID.
//
// A review over Options.MaxRequestBytes is answered 413 without being read in
// full, and one without a request 400, both in plain text; the host's webhook
// server checks the content type and holds every review within its budget of
// bytes in flight before the handler reads it (see internal/webhookserver).
//
// A failure (the sidecar unreachable, too slow, or wrong) fails the review
// with a message naming the sidecar and the reason; the API server then fails
// the request that needed the conversion with that message.
package conversion
