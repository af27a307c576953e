// Package v1 holds the admission webhooks of MaintenanceWindow, at version v1
// (the API server converts objects written at v1beta1 before calling them):
//
//   - the defaulter sets spec.duration to 1h when it is left out and labels
//     every window with a team, "unassigned" until someone says otherwise;
//   - the validator refuses a start that is not an RFC 3339 time, a duration
//     outside 1m to 24h, an every shorter than the duration, a change of
//     spec.start (it anchors every future window: make a new window instead),
//     and the deletion of a window annotated examples.polyop.dev/protected:
//     "true"; it warns about a paused window.
//
// Field errors are built with k8s.io/apimachinery's field package and
// returned through apierrors.NewInvalid, exactly as in a kubebuilder project:
// kubectl reports them as it reports the API server's own validation.
package v1
