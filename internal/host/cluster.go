package host

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/address"
	clusterservice "github.com/polyop/polyop/internal/cluster"
	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/object"
)

// resolveRelatedKinds checks that the API server serves every kind a
// controller owns or watches, records whether each is namespaced, and refuses
// declarations whose scopes cannot work: a namespaced object cannot own a
// cluster-scoped child, and a label or annotation cannot name a namespaced
// object from a cluster-scoped one (it names the object in the watched
// object's own namespace).
func resolveRelatedKinds(mapper meta.RESTMapper, desc *description.Description, namespaced map[schema.GroupVersionKind]bool) error {
	var errs []error
	resolve := func(c description.Controller, verb string, gvk schema.GroupVersionKind) bool {
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			errs = append(errs, fmt.Errorf("controller %q %s %s, which the API server does not serve: %w", c.Name, verb, gvkString(gvk), err))
			return false
		}
		namespaced[gvk] = mapping.Scope.Name() == meta.RESTScopeNameNamespace
		return true
	}
	for _, c := range desc.Controllers {
		for _, o := range c.Owns {
			if resolve(c, "owns", o.GVK) && namespaced[c.GVK] && !namespaced[o.GVK] {
				errs = append(errs, fmt.Errorf("controller %q owns %s, which is cluster-scoped, but reconciles %s, which is namespaced: a cluster-scoped object cannot have a namespaced owner",
					c.Name, gvkString(o.GVK), gvkString(c.GVK)))
			}
		}
		for _, w := range c.Watches {
			if resolve(c, "watches", w.GVK) && len(w.FieldPath) == 0 && namespaced[c.GVK] && !namespaced[w.GVK] {
				errs = append(errs, fmt.Errorf("controller %q watches %s, which is cluster-scoped, by a label or annotation naming a namespaced %s: it cannot say which namespace; watch it by field_path instead",
					c.Name, gvkString(w.GVK), gvkString(c.GVK)))
			}
		}
	}
	return errors.Join(errs...)
}

// addRelatedCacheViews gives every owned and watched kind a view in the cache:
// the namespaces of the controllers that own or watch it (every namespace when
// one of them watches every namespace), without their label selectors, which
// select reconciled objects only. A kind that a controller also reconciles
// keeps its reconciled view.
func addRelatedCacheViews(o *cache.Options, desc *description.Description, namespaced map[schema.GroupVersionKind]bool, keepManagedFields bool) {
	reconciled := map[schema.GroupVersionKind]bool{}
	for obj := range o.ByObject {
		reconciled[obj.GetObjectKind().GroupVersionKind()] = true
	}
	// A nil Namespaces is every namespace; once there, a view stays there.
	related := map[schema.GroupVersionKind]*cache.ByObject{}
	add := func(c description.Controller, gvk schema.GroupVersionKind) {
		if reconciled[gvk] {
			return
		}
		by, seen := related[gvk]
		switch {
		case !seen:
			by = &cache.ByObject{Transform: object.Transform(gvk, keepManagedFields)}
			related[gvk] = by
			if !namespaced[gvk] || len(c.Namespaces) == 0 {
				return
			}
			by.Namespaces = map[string]cache.Config{}
		case by.Namespaces == nil:
			return
		case len(c.Namespaces) == 0:
			by.Namespaces = nil
			return
		}
		for _, ns := range c.Namespaces {
			by.Namespaces[ns] = cache.Config{}
		}
	}
	for _, c := range desc.Controllers {
		for _, own := range c.Owns {
			add(c, own.GVK)
		}
		for _, w := range c.Watches {
			add(c, w.GVK)
		}
	}
	for gvk, by := range related {
		o.ByObject[object.New(gvk)] = *by
	}
}

// cachedKindList lists the kinds the cache holds, sorted.
func cachedKindList(o cache.Options) []schema.GroupVersionKind {
	kinds := make([]schema.GroupVersionKind, 0, len(o.ByObject))
	for gvk := range cachedKinds(o) {
		kinds = append(kinds, gvk)
	}
	slices.SortFunc(kinds, func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	return kinds
}

// cachedKinds lists the kinds the cache holds, each with its namespaces (none:
// every namespace, or a cluster-scoped kind), for the cluster service.
func cachedKinds(o cache.Options) map[schema.GroupVersionKind][]string {
	out := map[schema.GroupVersionKind][]string{}
	for obj, by := range o.ByObject {
		var namespaces []string
		for ns := range by.Namespaces {
			namespaces = append(namespaces, ns)
		}
		out[obj.GetObjectKind().GroupVersionKind()] = namespaces
	}
	return out
}

// watchedNamespaces are the namespaces the host watches, which the sidecar may
// write in through the cluster service: those of every controller, as
// narrowed by --namespace. None (every namespace) when a controller watches
// every namespace, or, without controllers, when --namespace is not set.
func watchedNamespaces(desc *description.Description, opts Options) []string {
	if len(desc.Controllers) == 0 {
		return opts.Namespaces
	}
	var out []string
	for _, c := range desc.Controllers {
		if len(c.Namespaces) == 0 {
			return nil
		}
		for _, ns := range c.Namespaces {
			if !slices.Contains(out, ns) {
				out = append(out, ns)
			}
		}
	}
	slices.Sort(out)
	return out
}

// clusterAddress is where the cluster service is served, "" for nowhere: the
// flag's value ("0" is nowhere), or by default a cluster.sock beside a unix
// sidecar socket (so that one shared directory holds both), else
// clusterservice.DefaultAddress. A relative unix socket is made absolute,
// since the address is announced to the sidecar, which may run in another
// directory; an address that does not parse is returned as it is, for Listen
// to refuse with the flag's name.
func clusterAddress(opts Options) string {
	a := opts.ClusterAddress
	switch a {
	case "0":
		return ""
	case "":
		a = clusterservice.DefaultAddress
		for _, prefix := range []string{"unix://", "unix:"} {
			if path, ok := strings.CutPrefix(opts.SidecarAddress, prefix); ok && path != "" {
				a = prefix + filepath.Join(filepath.Dir(path), "cluster.sock")
				break
			}
		}
	}
	if abs, err := address.Absolute(a); err == nil {
		return abs
	}
	return a
}

// clusterServiceTLS is the cluster service's TLS configuration from the
// --cluster-tls-* flags, nil for none. It refuses some of the flags without
// the others, and a TCP --cluster-address other than loopback without them:
// the service acts with the host's credentials, for anyone who reaches it.
func clusterServiceTLS(opts Options) (*tls.Config, error) {
	files := []string{opts.ClusterTLSCertFile, opts.ClusterTLSKeyFile, opts.ClusterTLSClientCAFile}
	const flags = "--cluster-tls-cert-file, --cluster-tls-key-file and --cluster-tls-client-ca-file"
	switch n := len(slices.DeleteFunc(slices.Clone(files), func(f string) bool { return f == "" })); {
	case n == len(files):
		return clusterservice.MutualTLS(opts.ClusterTLSCertFile, opts.ClusterTLSKeyFile, opts.ClusterTLSClientCAFile)
	case n > 0:
		return nil, fmt.Errorf("the cluster service's TLS needs all of %s, or none", flags)
	}
	a := clusterAddress(opts)
	if a == "" {
		return nil, nil
	}
	if network, addr, err := address.Parse(a); err == nil && network == "tcp" && !address.IsLoopback(addr) {
		return nil, fmt.Errorf("--cluster-address=%s serves the cluster service, which acts with the host's credentials, on the network: "+
			"set %s to serve it with mutual TLS, or serve it on a unix socket or a loopback address", opts.ClusterAddress, flags)
	}
	return nil, nil
}

// addClusterService binds the cluster service's address and adds the service
// to mgr, reading the cached kinds from the cache and the others from the API
// server, and writing through a dynamic client.
func addClusterService(mgr ctrl.Manager, cfg *rest.Config, httpClient *http.Client, desc *description.Description, cacheOpts cache.Options, tlsConfig *tls.Config, opts Options) error {
	address := clusterAddress(opts)
	if address == "" {
		return nil
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return fmt.Errorf("building the cluster service's client: %w", err)
	}
	var cacheReader client.Reader = mgr.GetCache()
	srv := clusterservice.New(clusterservice.Clients{
		Cache:     cacheReader,
		APIReader: mgr.GetAPIReader(),
		Dynamic:   dyn,
		Mapper:    mgr.GetRESTMapper(),
		Recorder:  mgr.GetEventRecorder(desc.Name),
	}, clusterservice.Options{
		CachedKinds:     cachedKinds(cacheOpts),
		WriteNamespaces: watchedNamespaces(desc, opts),
		TLS:             tlsConfig,
		FieldManager:    "polyop-" + desc.Name,
		MaxMessageSize:  opts.MaxMessageSize,
		Log:             ctrl.Log.WithName("cluster"),
	})
	if err := srv.Listen(address); err != nil {
		return fmt.Errorf("%w (set --cluster-address, or --cluster-address=0 to serve no cluster service)", err)
	}
	return mgr.Add(srv)
}
