package host

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/polyop/polyop/internal/address"
	clusterservice "github.com/polyop/polyop/internal/cluster"
	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/fencing"
)

// cachedKindList lists the kinds the cache holds, sorted.
func cachedKindList(o cache.Options) []schema.GroupVersionKind {
	kinds := make([]schema.GroupVersionKind, 0, len(o.ByObject))
	for obj := range o.ByObject {
		kinds = append(kinds, obj.GetObjectKind().GroupVersionKind())
	}
	slices.SortFunc(kinds, func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	return kinds
}

// cachedKinds lists the kinds the cache holds, each with its namespaces (none:
// every namespace, or a cluster-scoped kind), for the cluster service.
func cachedKinds(res *description.Resolved) map[schema.GroupVersionKind][]string {
	out := make(map[schema.GroupVersionKind][]string, len(res.Views))
	for gvk, view := range res.Views {
		out[gvk] = view.Namespaces
	}
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
// --cluster-tls-* flags, nil for none, for the service served at a
// (clusterAddress). It refuses some of the flags without the others, and a
// TCP --cluster-address other than loopback without them: the service acts
// with the host's credentials, for anyone who reaches it.
func clusterServiceTLS(opts Options, a string) (*tls.Config, error) {
	files := []string{opts.ClusterTLSCertFile, opts.ClusterTLSKeyFile, opts.ClusterTLSClientCAFile}
	const flags = "--cluster-tls-cert-file, --cluster-tls-key-file and --cluster-tls-client-ca-file"
	switch n := len(slices.DeleteFunc(slices.Clone(files), func(f string) bool { return f == "" })); {
	case n == len(files):
		return clusterservice.MutualTLS(opts.ClusterTLSCertFile, opts.ClusterTLSKeyFile, opts.ClusterTLSClientCAFile)
	case n > 0:
		return nil, fmt.Errorf("the cluster service's TLS needs all of %s, or none", flags)
	}
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
// server (the sharded kinds too: the cache holds only the replica's share),
// and writing through a dynamic client, only what the sidecar's description
// grants (description.Resolved.Grants): the host's credentials may reach
// further, as a developer's do in polyop run. Its writes are fenced by fence.
func addClusterService(mgr ctrl.Manager, cfg *rest.Config, httpClient *http.Client, p *plan,
	tp trace.TracerProvider, progress *clusterservice.CacheProgress, fence fencing.Fence) error {
	if p.clusterAddress == "" {
		return nil
	}
	res := p.res
	dyn, err := dynamic.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return fmt.Errorf("building the cluster service's client: %w", err)
	}
	var cacheReader client.Reader = mgr.GetCache()
	srv := clusterservice.New(clusterservice.Clients{
		Cache:     cacheReader,
		Informers: mgr.GetCache(),
		APIReader: mgr.GetAPIReader(),
		Dynamic:   dyn,
		Mapper:    mgr.GetRESTMapper(),
		Recorder:  mgr.GetEventRecorder(res.Name),
	}, clusterservice.Options{
		CachedKinds:     cachedKinds(res),
		DeclaredKinds:   res.Declared,
		ShardedKinds:    p.shardedKinds(),
		Indexes:         indexNames(res),
		WriteNamespaces: res.WatchedNamespaces(),
		Grants:          res.Grants(),
		Fence:           fence,
		TLS:             p.clusterTLS,
		FieldManager:    "polyop-" + res.Name,
		MaxMessageSize:  p.opts.MaxMessageSize,
		TracerProvider:  tp,
		Progress:        progress,
		Log:             ctrl.Log.WithName("cluster"),
	})
	if err := srv.Listen(p.clusterAddress); err != nil {
		return fmt.Errorf("%w (set --cluster-address, or --cluster-address=0 to serve no cluster service)", err)
	}
	return mgr.Add(srv)
}
