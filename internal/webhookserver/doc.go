// Package webhookserver is the host's webhook server: the HTTPS server that
// serves the sidecar's admission webhooks and conversions to the API server.
//
// It is controller-runtime's webhook server (its TLS set-up, its certificate
// watcher that reloads a renewed certificate, its mux and metrics) with the
// bounds a server open to anyone who reaches its port needs, which
// controller-runtime's webhook.Options do not expose:
//
//   - a read-header timeout and a read timeout, so that a client that sends
//     its headers or its body slowly is cut off instead of holding a
//     connection (and the memory behind it) for as long as it likes;
//   - on every path, the content type the API server sends (application/json),
//     else 415 Unsupported Media Type;
//   - on every path, a limit on the request body, given when the path is
//     registered: a body that declares a larger Content-Length is refused with
//     413 Request Entity Too Large before any of it is read, and one that turns
//     out larger while it is read is cut off at the limit;
//   - across all paths, a budget of request bytes in flight: each request
//     holds its declared length (or its path's limit, when it declares none)
//     from before its body is read until its answer is written. A request that
//     does not fit waits a moment, then is answered 429 Too Many Requests with
//     Retry-After: the API server's client retries such an answer by itself.
//     Once a request of 1 MiB or more is answered, the server has the garbage
//     collector run, so that the host's memory follows the requests in flight
//     rather than what they left behind.
package webhookserver
