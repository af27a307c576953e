package host

import (
	"crypto/tls"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/polyop/polyop/internal/description"
	"github.com/polyop/polyop/internal/metricsauth"
	"github.com/polyop/polyop/internal/sharding/replica"
	"github.com/polyop/polyop/internal/sidecar"
)

// plan is the host's Options resolved once: every value derived from them
// is computed here, in one place, and Run wires the host from the plan.
// newPlan derives what the options alone decide, before the host connects
// to its sidecar; resolve what the sidecar's description decides as well.
type plan struct {
	// opts are the options as given.
	opts Options
	// clusterAddress is where the cluster service is served, "" for
	// nowhere (clusterAddress).
	clusterAddress string
	// clusterTLS is the cluster service's TLS, nil for plain text
	// (clusterServiceTLS).
	clusterTLS *tls.Config
	// resolveOptions narrow the sidecar's description by --namespace and
	// --label-selector, and name the webhook Service.
	resolveOptions description.ResolveOptions

	// What the sidecar's description decides (resolve).

	// res is the sidecar's description, resolved against the API server.
	res *description.Resolved
	// leaderElectionID names the leader election's Lease.
	leaderElectionID string
	// shards is the sharding plan, nil when sharding is off.
	shards *replica.Plan
	// webhook are the webhook server's options, with the defaults the
	// sidecar's name gives.
	webhook WebhookOptions
}

// newPlan checks opts and derives what they alone decide.
func newPlan(opts Options) (*plan, error) {
	p := &plan{opts: opts, clusterAddress: clusterAddress(opts)}
	var err error
	if p.clusterTLS, err = clusterServiceTLS(opts, p.clusterAddress); err != nil {
		return nil, err
	}
	var selector labels.Selector
	if opts.LabelSelector != "" {
		if selector, err = labels.Parse(opts.LabelSelector); err != nil {
			return nil, fmt.Errorf("--label-selector: %w", err)
		}
	}
	// Namespaces narrow namespaced kinds only. With the webhook server off
	// (--webhook-port 0), the kinds of webhooks and conversions are not
	// looked up: nothing serves them.
	p.resolveOptions = description.ResolveOptions{
		Namespaces:       opts.Namespaces,
		LabelSelector:    selector,
		ServiceName:      opts.Webhook.ServiceName,
		ServiceNamespace: opts.Webhook.ServiceNamespace,
		WebhooksOff:      opts.Webhook.Port == 0,
	}
	return p, nil
}

// resolve resolves desc against the API server through mapper, and derives
// what the description decides: the leader election's Lease, the sharding
// plan, the webhook server's defaults.
func (p *plan) resolve(mapper meta.RESTMapper, desc *description.Description) (*description.Resolved, error) {
	res, err := description.Resolve(mapper, desc, p.resolveOptions)
	if err != nil {
		return nil, err
	}
	p.res = res
	p.leaderElectionID = p.opts.LeaderElectionID
	if p.leaderElectionID == "" {
		p.leaderElectionID = desc.Name + ".polyop.dev"
	}
	p.shards, err = replica.NewPlan(res, replica.PlanOptions{
		Mode:           p.opts.Sharding,
		LeaderElection: p.opts.LeaderElection,
		ReplicaID:      p.opts.ShardReplicaID,
		Namespace:      p.opts.LeaderElectionNamespace,
	})
	if err != nil {
		return nil, err
	}
	p.webhook = p.opts.Webhook.withDefaults(res)
	return res, nil
}

// sidecarOptions configure the connection to the sidecar.
func (p *plan) sidecarOptions(tp trace.TracerProvider) sidecar.Options {
	return sidecar.Options{
		Address:          p.opts.SidecarAddress,
		ClusterAddress:   p.clusterAddress,
		MaxMessageSize:   p.opts.MaxMessageSize,
		MaxObjectSize:    p.opts.MaxObjectSize,
		DescribeTimeout:  p.opts.DescribeTimeout,
		ReconcileTimeout: p.opts.ReconcileTimeout,
		// The connection is back at most about this long after the sidecar.
		MaxReconnectDelay: p.opts.SidecarDownMaxBackoff,
		TracerProvider:    tp,
		DisableStreams:    !p.opts.SidecarStreams,
	}
}

// shardOptions configure the replica's sharding runtime: a stopping
// replica releases its Lease once its reconciles have ended, or after a
// Reconcile call's deadline.
func (p *plan) shardOptions() replica.Options {
	return replica.Options{
		LeaseDuration: p.opts.ShardLeaseDuration,
		RenewInterval: p.opts.ShardRenewInterval,
		ReleaseAfter:  p.opts.ReconcileTimeout,
	}
}

// shardedKinds are the kinds whose cache holds only the replica's share,
// none when sharding is off.
func (p *plan) shardedKinds() map[schema.GroupVersionKind]bool {
	if p.shards == nil {
		return nil
	}
	return p.shards.Sharded
}

// managerOptions are the manager's options but for its scheme, mapper and
// cache, which come from the resolved description.
func (p *plan) managerOptions() ctrl.Options {
	metricsOpts := metricsserver.Options{
		BindAddress:   p.opts.MetricsBindAddress,
		SecureServing: p.opts.SecureMetrics,
	}
	if p.opts.SecureMetrics {
		metricsOpts.FilterProvider = metricsauth.WithAuthenticationAndAuthorization
	}
	return ctrl.Options{
		Metrics: metricsOpts,
		// The host serves its own probes (see probes), on this address.
		HealthProbeBindAddress:        "0",
		PprofBindAddress:              p.opts.PprofBindAddress,
		LeaderElection:                p.opts.LeaderElection,
		LeaderElectionID:              p.leaderElectionID,
		LeaderElectionNamespace:       p.opts.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 durationPtr(p.opts.LeaseDuration),
		RenewDeadline:                 durationPtr(p.opts.RenewDeadline),
		RetryPeriod:                   durationPtr(p.opts.RetryPeriod),
	}
}

func durationPtr(d time.Duration) *time.Duration { return &d }

// jsonConfig is cfg asking for JSON: the cache holds object.Object, which
// decodes JSON, and the client would otherwise ask for built-in kinds as
// protobuf.
func jsonConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.ContentType = runtime.ContentTypeJSON
	return c
}
