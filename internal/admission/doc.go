// Package admission serves a sidecar's admission webhooks from the host's
// webhook server.
//
// controller-runtime's webhook builder wants Go types in a scheme; the host has
// none, so it registers its own admission.Handler per declared kind instead,
// wrapped in controller-runtime's admission.Webhook for panic recovery,
// logging and metrics:
//
//   - a mutating handler at the webhook's MutatePath calls the sidecar's Default,
//     checks that the defaulted object is still the same object (apiVersion,
//     kind, namespace and name) and answers with the JSON patch from the object
//     the API server sent to the one the sidecar returned;
//   - a validating handler at the webhook's ValidatePath calls the sidecar's Validate.
//
// A denial with field errors becomes a 422 Invalid status with one cause per
// field error, built by apierrors.NewInvalid as the API server's own
// validation builds it, with the message NewInvalid builds from the field
// errors, so kubectl prints it the familiar way (the denial's own message goes
// to the host's log); a denial without field errors is a 403 Forbidden with
// the sidecar's message. Warnings pass through in both cases.
//
// Every call carries a deadline below the API server's timeout for the webhook
// (see Deadline). A sidecar that cannot answer in time, cannot be reached, or
// answers with something the host cannot use is a failure: the request is
// denied with a message naming the sidecar and the reason, or, for a webhook
// that declared failurePolicy Ignore, allowed with a warning saying why.
package admission
