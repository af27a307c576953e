package controller

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The reasons of the Warning events the host records on an owner whose
// desired child it does not apply.
const (
	// reasonChildOwnedByAnother: the desired child names an object that
	// another object controls.
	reasonChildOwnedByAnother = "ChildOwnedByAnother"
	// reasonChildNotOwned: the desired child names an object with no
	// controller, and the kind does not declare adoption.
	reasonChildNotOwned = "ChildNotOwned"
	// reasonChildFieldImmutable: the API server refuses the apply because it
	// changes an immutable field, and the kind does not declare replacement.
	reasonChildFieldImmutable = "ChildFieldImmutable"
	// reasonChildrenNotApplied: any other failure to apply or prune.
	reasonChildrenNotApplied = "ChildrenNotApplied"
	// reasonChildReplaced (a Normal event): a child was deleted and created
	// again because an immutable field changed.
	reasonChildReplaced = "ChildReplaced"
)

// childProblem is why one desired child was not applied (or one child not
// pruned): the reconcile fails with err, and a Warning event with reason
// tells the owner's users.
type childProblem struct {
	reason string
	err    error
}

// claim decides whether the host may apply a desired child of kind over
// existing, the object of the child's name the cache holds (nil: none), on
// behalf of owner (by UID), as controllerutil.SetControllerReference decides:
// an object another object controls is never taken over, and one nobody
// controls only when the kind declares adoption. An object an earlier owner
// of the same kind and name controls (deleted, then created again) is
// another object's child too: the refusal says that owner is gone and how
// the child goes with it. It returns nil when the apply may go ahead.
func claim(id childID, existing client.Object, owner client.Object, kind ChildKind) *childProblem {
	if existing == nil {
		return nil
	}
	ownerKind := owner.GetObjectKind().GroupVersionKind().Kind
	ref := metav1.GetControllerOfNoCopy(existing)
	switch {
	case ref == nil && kind.Adopt:
		return nil
	case ref == nil:
		return &childProblem{reason: reasonChildNotOwned, err: fmt.Errorf(
			"desired child %s already exists and no object controls it: the host adopts such an object only for an owned kind that declares adopt, "+
				"so nothing was written to it; rename the child, delete the object, or declare adopt for %s in the controller's Owns",
			id, id.gvk.Kind)}
	case ref.UID == owner.GetUID():
		return nil
	case sameKindAndName(ref, owner):
		return &childProblem{reason: reasonChildOwnedByAnother, err: fmt.Errorf(
			"desired child %s is controlled by an earlier %s/%s (uid %s), not by this one (uid %s): "+
				"that object was deleted and this one created with its name, so the child's owner no longer exists; "+
				"the host never takes over another object's child, so nothing was written to it. "+
				"On a cluster the garbage collector deletes such a child and the next retry creates it again; "+
				"where none runs (the local API server of polyop run has no garbage collector), delete it: %s",
			id, ref.Kind, ref.Name, ref.UID, owner.GetUID(), kubectlDelete(id))}
	}
	return &childProblem{reason: reasonChildOwnedByAnother, err: fmt.Errorf(
		"desired child %s is controlled by %s/%s (uid %s), not by %s/%s: the host never takes over another object's child, "+
			"so nothing was written to it; give the child another name",
		id, ref.Kind, ref.Name, ref.UID, ownerKind, owner.GetName())}
}

// sameKindAndName reports whether ref names an object of owner's group, kind
// and name: with another UID, an earlier object of owner's name, since
// deleted (an owner reference names an object in the child's namespace).
func sameKindAndName(ref *metav1.OwnerReference, owner client.Object) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	gvk := owner.GetObjectKind().GroupVersionKind()
	return err == nil && gv.Group == gvk.Group && ref.Kind == gvk.Kind && ref.Name == owner.GetName()
}

// kubectlDelete is the kubectl command that deletes the child id: its kind
// lowercased (kubectl resolves it as it does a singular resource name),
// qualified by its group unless it is a core kind.
func kubectlDelete(id childID) string {
	resource := strings.ToLower(id.gvk.Kind)
	if id.gvk.Group != "" {
		resource += "." + id.gvk.Group
	}
	cmd := "kubectl delete " + resource + " " + id.name
	if id.namespace != "" {
		cmd += " -n " + id.namespace
	}
	return cmd
}

// immutableMarkers are what the API server's validation says of a field an
// update may not change: apimachinery's FieldImmutableErrorMsg ("field is
// immutable", a Job's spec.template, a Service's clusterIP, a Deployment's
// selector), the words of admission policies and CRD validation rules
// ("Value is immutable"), and those of Pods ("pod updates may not change
// fields other than ...") and StatefulSets ("updates to statefulset spec for
// fields other than ... are forbidden").
var immutableMarkers = []string{"immutable", "may not change fields other than", "for fields other than"}

// immutableFields returns the fields an error of the API server refuses to
// change because they are immutable: the causes of a 422 Invalid that say so.
// It returns none for any other error.
func immutableFields(err error) []string {
	if !apierrors.IsInvalid(err) {
		return nil
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	var fields []string
	for _, c := range status.Status().Details.Causes {
		msg := strings.ToLower(c.Message)
		for _, m := range immutableMarkers {
			if strings.Contains(msg, m) {
				field := c.Field
				if field == "" {
					field = "<object>"
				}
				fields = append(fields, field)
				break
			}
		}
	}
	return fields
}

// appliedByHost reports whether the host applied obj, a child the owner
// controls, as the controller named controller: it carries ControllerLabel
// with the controller's name, or (for children applied before the host set
// the label) managedFields shows the controller's field manager applied it.
// Only such a child may be pruned: an object that someone made a child by
// hand is never deleted.
func appliedByHost(obj client.Object, controller, fieldManager string) bool {
	if obj.GetLabels()[ControllerLabel] == controller {
		return true
	}
	for _, f := range obj.GetManagedFields() {
		if f.Manager == fieldManager && f.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}
