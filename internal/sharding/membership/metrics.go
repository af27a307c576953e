package membership

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	membersGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "polyop_shard_members",
		Help: "Live members of the ring: the holders of its Leases whose renew time plus duration lies ahead.",
	}, []string{"ring"})
	ringChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "polyop_shard_ring_changes_total",
		Help: "Changes of the ring's live members this replica has seen.",
	}, []string{"ring"})
	shareGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "polyop_shard_hash_space_share",
		Help: "The fraction (0 to 1) of the ring's hash space this replica owns; 0 while it is not a live member.",
	}, []string{"ring"})
)

func init() {
	metrics.Registry.MustRegister(membersGauge, ringChanges, shareGauge)
}
