package cluster

import (
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
)

// allowWrite refuses a write outside the namespaces the host watches
// (allowNamespace) or of a kind the sidecar's description does not name
// (allowKind).
func (s *Server) allowWrite(verb string, m *meta.RESTMapping, namespace, name string) error {
	if err := s.allowNamespace(verb, m, namespace, name); err != nil {
		return err
	}
	return s.allowKind(verb, m, name)
}

// allowNamespace refuses a write of a namespaced object outside
// Options.WriteNamespaces with PERMISSION_DENIED, reason Forbidden, as the API
// server refuses what RBAC does not grant: the sidecar writes with the host's
// credentials, and the host's authority reaches no further than the
// namespaces it watches. Cluster-scoped objects are left to allowKind. verb and
// name describe the write in the error.
func (s *Server) allowNamespace(verb string, m *meta.RESTMapping, namespace, name string) error {
	if len(s.opts.WriteNamespaces) == 0 || m.Scope.Name() != meta.RESTScopeNameNamespace || slices.Contains(s.opts.WriteNamespaces, namespace) {
		return nil
	}
	err := apierrors.NewForbidden(m.Resource.GroupResource(), name, fmt.Errorf(
		"the sidecar may %s through the Cluster service only in the namespaces the host watches (%s), not in %q; "+
			"to allow it, a controller must watch %q: declare it in the controller's namespaces, and in the host's --namespace flag when that is set",
		verb, strings.Join(s.opts.WriteNamespaces, ", "), namespace, namespace))
	return apiError(err.ErrStatus)
}
