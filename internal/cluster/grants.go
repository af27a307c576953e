package cluster

import (
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/polyop/polyop/internal/description"
)

// secrets is the resource whose reads the description must grant: a Secret
// holds credentials, and a sidecar that reads one the host may read but the
// description does not name would read it with the host's authority, not
// its own.
var secrets = schema.GroupResource{Resource: "secrets"}

// howToDeclare says where a description names a kind, in the contract's terms.
const howToDeclare = "as a kind a controller owns or watches (ControllerDescription.owns or .watches), " +
	"or as a cached kind (DescribeResponse.cached_kinds)"

// allowKind refuses a write of a kind the sidecar's description names in no
// grant (Options.Grants) with PERMISSION_DENIED, reason Forbidden, as the API
// server refuses what RBAC does not grant, so that a host running with more
// authority than its RBAC (polyop run, with a developer's credentials) refuses
// what the deployed host would. verb and name describe the write in the
// error.
func (s *Server) allowKind(verb string, m *meta.RESTMapping, name string) error {
	gr := m.Resource.GroupResource()
	if s.opts.Grants == nil || s.opts.Grants.Names(gr) {
		return nil
	}
	kind := m.GroupVersionKind.Kind
	err := apierrors.NewForbidden(gr, name, fmt.Errorf(
		"the sidecar may not %s %s through the Cluster service: its description does not declare %s. "+
			"The Cluster service writes only the kinds the description reconciles, owns, watches or caches, the kinds the host's RBAC (host rbac) names; "+
			"to write %s, declare it in the description, %s",
		verb, description.GVKString(m.GroupVersionKind), kind, kind, howToDeclare))
	return apiError(err.ErrStatus)
}

// allowRead refuses a read (verb: get, list or watch) of Secrets in namespace
// ("" for every namespace, or a cluster-scoped kind) where no grant of the
// description allows it, with PERMISSION_DENIED, reason Forbidden (see
// allowKind). Reads of other kinds are left to the host's RBAC.
func (s *Server) allowRead(verb string, m *meta.RESTMapping, namespace, name string) error {
	gr := m.Resource.GroupResource()
	if s.opts.Grants == nil || gr != secrets || s.opts.Grants.Allows(gr, "", verb, namespace) {
		return nil
	}
	where := "across every namespace"
	if namespace != "" {
		where = fmt.Sprintf("in namespace %q", namespace)
	}
	declared := "it declares them nowhere"
	if ns := s.opts.Grants.Namespaces(gr, verb); len(ns) > 0 {
		declared = "it declares them in namespaces " + strings.Join(ns, ", ") + " only"
	}
	err := apierrors.NewForbidden(gr, name, fmt.Errorf(
		"the sidecar may not %s %s %s through the Cluster service: its description does not declare %s there (%s). "+
			"The Cluster service reads Secrets only where the description declares them, where the host's RBAC (host rbac) grants reading them; "+
			"to read them, declare %s in the description, in a controller that watches that namespace or with that namespace, %s",
		verb, description.GVKString(m.GroupVersionKind), where, m.GroupVersionKind.Kind, declared, m.GroupVersionKind.Kind, howToDeclare))
	return apiError(err.ErrStatus)
}
