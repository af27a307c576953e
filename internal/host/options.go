package host

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/polyop/polyop/internal/sharding/replica"
	"github.com/polyop/polyop/internal/sidecar"
	sdkaddress "github.com/polyop/polyop/sdk/go/address"
)

// Options configure the host. The zero value is not useful: start from
// NewOptions, which holds every default, then override.
type Options struct {
	// SidecarAddress is the sidecar's gRPC endpoint. Defaults to
	// the SDK's address.Default, a unix socket in the pod's shared volume.
	SidecarAddress string
	// ClusterAddress is where the host serves the ClusterService to its
	// sidecar, in the same forms as SidecarAddress; "0" serves none. Defaults
	// to "": cluster.sock beside a unix SidecarAddress, else
	// cluster.DefaultAddress (unix:///var/run/polyop/cluster.sock).
	ClusterAddress string
	// ClusterTLSCertFile and ClusterTLSKeyFile are the certificate and key the
	// cluster service serves TLS with, and ClusterTLSClientCAFile the CA that
	// must have signed the sidecar's client certificate: all three or none. A
	// TCP ClusterAddress other than loopback needs them. Default to "": plain
	// text, for a unix socket or a loopback address.
	ClusterTLSCertFile, ClusterTLSKeyFile, ClusterTLSClientCAFile string
	// SidecarWaitTimeout bounds how long the host waits at start for the
	// sidecar's health service to report SERVING. Defaults to 2m.
	SidecarWaitTimeout time.Duration
	// DescribeTimeout is the deadline of the Describe call. Defaults to 10s.
	DescribeTimeout time.Duration
	// ReconcileTimeout is the deadline of each Reconcile call. Defaults to 30s.
	ReconcileTimeout time.Duration
	// SidecarDownMaxBackoff bounds how long recovery takes once an
	// unreachable sidecar is back: it caps gRPC's backoff between attempts to
	// reconnect (otherwise up to 2m), and every object's retry backoff while
	// the sidecar is unreachable. The host is ready again about this long
	// after the sidecar is (give or take gRPC's 20% jitter), and calls it for
	// every waiting object within about twice this long. Zero keeps gRPC's
	// and controller-runtime's own backoffs. Defaults to 5s.
	SidecarDownMaxBackoff time.Duration
	// SidecarStreams sends the Reconcile and Finalize calls on streams, one
	// per worker, to a sidecar that announces ReconcileStream; false makes
	// them unary calls whatever the sidecar announces. Defaults to true.
	SidecarStreams bool
	// MaxMessageSize bounds gRPC messages in both directions, in bytes.
	// Defaults to 64 MiB.
	MaxMessageSize int
	// MaxObjectSize bounds the status and each desired child in a sidecar's
	// Reconcile answer, in bytes; a larger one is refused before it is
	// decoded. Defaults to sidecar.DefaultMaxObjectSize (3 MiB, the API
	// server's request body limit).
	MaxObjectSize int
	// MaxConcurrentChildWrites bounds how many child applies (or deletes of
	// pruned children) of one reconcile are in flight at once; 1 writes them
	// one after the other. Defaults to 4.
	MaxConcurrentChildWrites int

	// MetricsBindAddress is where the metrics endpoint listens; "0" turns it
	// off. Defaults to "0".
	MetricsBindAddress string
	// SecureMetrics serves metrics over HTTPS with authentication and
	// authorization through the API server. Defaults to true.
	SecureMetrics bool
	// HealthProbeBindAddress is where /healthz and /readyz listen. Defaults to
	// ":8081".
	HealthProbeBindAddress string

	// PprofBindAddress is where net/http/pprof listens; empty turns it off.
	// Defaults to "".
	PprofBindAddress string

	// LeaderElection makes only one replica run the controllers. Defaults to
	// false.
	LeaderElection bool
	// LeaderElectionID names the lease. Defaults to "<sidecar name>.polyop.dev".
	LeaderElectionID string
	// LeaderElectionNamespace is where the lease lives. Defaults to the pod's
	// namespace (in a cluster) as controller-runtime decides.
	LeaderElectionNamespace string
	// LeaseDuration is how long followers wait after the leader's last
	// renewal before they take over: a leader that dies without releasing the
	// lease is replaced after about LeaseDuration + RetryPeriod. Defaults to
	// 15s, as controller-runtime's.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps trying to renew the lease
	// before it gives up leadership (and the host exits). It must be below
	// LeaseDuration. Defaults to 10s, as controller-runtime's.
	RenewDeadline time.Duration
	// RetryPeriod is how often the leader renews the lease and followers
	// try to acquire it. Defaults to 2s, as controller-runtime's.
	RetryPeriod time.Duration

	// Namespaces narrows the namespaces every controller watches. Defaults to
	// none, leaving each controller's declared namespaces.
	Namespaces []string
	// LabelSelector is added to every controller's label selector. Defaults to
	// none.
	LabelSelector string
	// KeepManagedFields keeps metadata.managedFields in the cache and in the
	// objects sent to the sidecar. Defaults to false: they are stripped, which
	// saves 20–30% of the memory of each cached object.
	KeepManagedFields bool

	// Sharding shards the objects among the host's replicas: "off";
	// "labels" (the elected replica labels each object of the reconciled
	// kind with the replica that owns it, and each replica caches and
	// reconciles the objects labelled with it; needs LeaderElection); or
	// "server" (each replica lists and watches its share of the reconciled
	// kind through the API server's sharded list and watch, which needs its
	// ShardedListAndWatch feature gate). Defaults to "off".
	Sharding string
	// ShardReplicaID names this replica in the ring: its Lease's holder and
	// the value of the shard label on the objects it owns. Defaults to "":
	// $POD_NAME, else the hostname and a random suffix.
	ShardReplicaID string
	// ShardLeaseDuration is how long a replica's Lease in the ring stays
	// live after each renewal: how long a replica that died keeps its share.
	// Defaults to 15s.
	ShardLeaseDuration time.Duration
	// ShardRenewInterval is how often a replica renews its Lease in the
	// ring. Defaults to 0: a third of ShardLeaseDuration.
	ShardRenewInterval time.Duration

	// Webhook configures the webhook server that serves the sidecar's
	// admission webhooks and conversions. Defaults to DefaultWebhookOptions().
	Webhook WebhookOptions
}

// NewOptions returns Options holding every default.
func NewOptions() Options {
	return Options{
		SidecarAddress:         sdkaddress.Default,
		SidecarWaitTimeout:     2 * time.Minute,
		DescribeTimeout:        10 * time.Second,
		ReconcileTimeout:       30 * time.Second,
		SidecarDownMaxBackoff:  5 * time.Second,
		SidecarStreams:         true,
		LeaseDuration:          15 * time.Second,
		RenewDeadline:          10 * time.Second,
		RetryPeriod:            2 * time.Second,
		MaxMessageSize:         sidecar.DefaultMaxMessageSize,
		MaxObjectSize:          sidecar.DefaultMaxObjectSize,
		MetricsBindAddress:     "0",
		SecureMetrics:          true,
		HealthProbeBindAddress: ":8081",
		Webhook:                DefaultWebhookOptions(),
		Sharding:               replica.ModeOff,
		ShardLeaseDuration:     15 * time.Second,

		MaxConcurrentChildWrites: 4,
	}
}

// BindFlags registers a flag for every option on fs, with o's values as the
// defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.SidecarAddress, "sidecar-address", o.SidecarAddress,
		"The sidecar's gRPC endpoint: unix:///path/to.sock, unix:relative.sock, tcp://host:port or host:port.")
	fs.StringVar(&o.ClusterAddress, "cluster-address", o.ClusterAddress,
		"Where to serve the cluster service the sidecar reads and writes the cluster through, in the forms of --sidecar-address; 0 serves none. "+
			"Default: cluster.sock beside a unix --sidecar-address (unix:///var/run/polyop/cluster.sock for the default), else unix:///var/run/polyop/cluster.sock.")
	fs.StringVar(&o.ClusterTLSCertFile, "cluster-tls-cert-file", o.ClusterTLSCertFile,
		"The certificate the cluster service serves TLS with; with --cluster-tls-key-file and --cluster-tls-client-ca-file, required for a TCP --cluster-address other than loopback.")
	fs.StringVar(&o.ClusterTLSKeyFile, "cluster-tls-key-file", o.ClusterTLSKeyFile, "The key of --cluster-tls-cert-file.")
	fs.StringVar(&o.ClusterTLSClientCAFile, "cluster-tls-client-ca-file", o.ClusterTLSClientCAFile,
		"The CA that must have signed the client certificate of whoever calls the cluster service (mutual TLS).")
	fs.DurationVar(&o.SidecarWaitTimeout, "sidecar-wait-timeout", o.SidecarWaitTimeout,
		"How long to wait at start for the sidecar to report SERVING on its health service.")
	fs.DurationVar(&o.DescribeTimeout, "describe-timeout", o.DescribeTimeout, "The deadline of the Describe call.")
	fs.DurationVar(&o.ReconcileTimeout, "reconcile-timeout", o.ReconcileTimeout, "The deadline of each Reconcile call.")
	fs.DurationVar(&o.SidecarDownMaxBackoff, "sidecar-down-max-backoff", o.SidecarDownMaxBackoff,
		"Caps the backoff while the sidecar is unreachable, both between attempts to reconnect and between each object's retries, "+
			"so that the host is ready about this long after the sidecar is back and retries each object waiting for it within about twice this long "+
			"(0: gRPC's and controller-runtime's own backoffs, up to minutes).")
	fs.BoolVar(&o.SidecarStreams, "sidecar-streams", o.SidecarStreams,
		"Send the Reconcile and Finalize calls on streams, one per worker, to a sidecar that announces ReconcileStream (one message each way per call "+
			"instead of a new gRPC call); false: unary calls, whatever the sidecar announces.")
	fs.IntVar(&o.MaxMessageSize, "max-message-size", o.MaxMessageSize,
		"The largest gRPC message sent to or accepted from the sidecar, in bytes.")
	fs.IntVar(&o.MaxObjectSize, "max-object-size", o.MaxObjectSize,
		"The largest status, and the largest desired child, accepted in a sidecar's Reconcile answer, in bytes; a larger one is refused "+
			"with a Warning event on the object, before it is decoded. The default is the API server's request body limit (3 MiB), above which it refuses the write anyway.")
	fs.IntVar(&o.MaxConcurrentChildWrites, "max-concurrent-child-writes", o.MaxConcurrentChildWrites,
		"How many of one reconcile's child applies (or deletes of pruned children) are in flight at once; Namespaces and CustomResourceDefinitions "+
			"are written before the other children. 1 writes them one after the other.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress,
		"The address the metrics endpoint binds to, e.g. :8443 for HTTPS or :8080 for HTTP; 0 disables it.")
	fs.BoolVar(&o.SecureMetrics, "metrics-secure", o.SecureMetrics,
		"Serve metrics over HTTPS, authenticated and authorized through the API server.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress,
		"The address the /healthz and /readyz endpoints bind to; 0 disables them.")
	fs.StringVar(&o.PprofBindAddress, "pprof-bind-address", o.PprofBindAddress,
		"The address the pprof endpoints bind to; empty disables them.")
	fs.BoolVar(&o.LeaderElection, "leader-elect", o.LeaderElection,
		"Enable leader election, so that only one replica runs the controllers.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID,
		`The name of the leader election lease (default "<sidecar name>.polyop.dev").`)
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace,
		"The namespace of the leader election lease (default: the pod's namespace).")
	fs.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", o.LeaseDuration,
		"How long followers wait after the leader's last renewal before taking over; a leader that dies is replaced after about this plus the retry period.")
	fs.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", o.RenewDeadline,
		"How long the leader keeps trying to renew the lease before it gives up leadership and exits; below the lease duration.")
	fs.DurationVar(&o.RetryPeriod, "leader-election-retry-period", o.RetryPeriod,
		"How often the leader renews the lease and followers try to acquire it.")
	fs.Var((*stringList)(&o.Namespaces), "namespace",
		"Watch only this namespace; repeat the flag or separate with commas for several. Narrows what the sidecar declares.")
	fs.StringVar(&o.LabelSelector, "label-selector", o.LabelSelector,
		"A label selector every watched object must also match, added to what the sidecar declares.")
	fs.BoolVar(&o.KeepManagedFields, "keep-managed-fields", o.KeepManagedFields,
		"Keep metadata.managedFields in the cache and in the objects sent to the sidecar.")
	fs.StringVar(&o.Sharding, "sharding", o.Sharding,
		"Share the objects among the host's replicas: off; labels (the elected replica labels each object of the reconciled kind with the replica "+
			"that owns it, each replica caches and reconciles only the objects labelled with it; needs --leader-elect); or server (each replica lists and "+
			"watches only its share of the reconciled kind through the API server's sharded list and watch, which needs the API server's "+
			"ShardedListAndWatch feature gate; no labels on the objects, no leader election). See docs/sharding.md.")
	fs.StringVar(&o.ShardReplicaID, "shard-replica-id", o.ShardReplicaID,
		"This replica's name in the ring, unique among the replicas: its Lease's holder and the shard label's value on the objects (and children) it owns (default: $POD_NAME, else the hostname and a random suffix).")
	fs.DurationVar(&o.ShardLeaseDuration, "shard-lease-duration", o.ShardLeaseDuration,
		"How long a replica's Lease in the ring stays live after each renewal: a replica that dies keeps its share this long.")
	fs.DurationVar(&o.ShardRenewInterval, "shard-renew-interval", o.ShardRenewInterval,
		"How often a replica renews its Lease in the ring (default: a third of --shard-lease-duration).")
	o.Webhook.BindFlags(fs)
}

// stringList is a flag.Value collecting repeated and comma-separated values.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }

func (s *stringList) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return fmt.Errorf("empty value in %q", v)
		}
		*s = append(*s, part)
	}
	return nil
}
