package sharder

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// collectTimeout bounds the listing of a sharder's cache at a scrape.
const collectTimeout = 5 * time.Second

var (
	handoffsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "polyop_shard_handoffs_total",
		Help: "Objects the sharder asked their live former owner to drain (hand off) after a ring change.",
	}, []string{"ring"})
	deadMovesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "polyop_shard_dead_member_moves_total",
		Help: "Objects the sharder moved straight to their new owner because the member they were labelled with had left the ring (its Lease expired).",
	}, []string{"ring"})
	assignmentsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "polyop_shard_assignments_total",
		Help: "Unlabelled objects the sharder labelled with their owner: new objects, and objects their former owner let go of.",
	}, []string{"ring"})

	assignedDesc = prometheus.NewDesc("polyop_shard_assigned_objects",
		"Objects labelled with each live member of the ring, as the sharder's cache holds them at the scrape.",
		[]string{"ring", "member"}, nil)
	unassignedDesc = prometheus.NewDesc("polyop_shard_unassigned_objects",
		"Objects with no shard label or the label of a member no longer in the ring, as the sharder's cache holds them at the scrape. Above zero for longer than a handoff means objects nobody reconciles.",
		[]string{"ring"}, nil)
)

func init() {
	metrics.Registry.MustRegister(handoffsTotal, deadMovesTotal, assignmentsTotal, running)
}

// running holds the sharders leading in this process; the gauges are
// counted from their caches at each scrape, so they are never stale.
var running = &sharders{set: map[*sharder]struct{}{}}

type sharders struct {
	mu  sync.Mutex
	set map[*sharder]struct{}
}

func register(s *sharder) {
	running.mu.Lock()
	defer running.mu.Unlock()
	running.set[s] = struct{}{}
}

func unregister(s *sharder) {
	running.mu.Lock()
	defer running.mu.Unlock()
	delete(running.set, s)
}

// Describe implements prometheus.Collector.
func (*sharders) Describe(ch chan<- *prometheus.Desc) {
	ch <- assignedDesc
	ch <- unassignedDesc
}

// Collect implements prometheus.Collector.
func (ss *sharders) Collect(ch chan<- prometheus.Metric) {
	ss.mu.Lock()
	list := make([]*sharder, 0, len(ss.set))
	for s := range ss.set {
		list = append(list, s)
	}
	ss.mu.Unlock()
	for _, s := range list {
		assigned, unassigned, err := s.count()
		if err != nil {
			// Left out of this scrape rather than failing it whole.
			log.Log.WithName("sharder").Error(err, "Counting the objects of the ring for its metrics failed", "ring", s.ringName, "kind", s.gvk.Kind)
			continue
		}
		for member, n := range assigned {
			ch <- prometheus.MustNewConstMetric(assignedDesc, prometheus.GaugeValue, float64(n), s.ringName, member)
		}
		ch <- prometheus.MustNewConstMetric(unassignedDesc, prometheus.GaugeValue, float64(unassigned), s.ringName)
	}
}

// count returns how many objects of the cache each live member is labelled
// on (every live member present, with 0 when none), and how many carry no
// label or a dead member's.
func (s *sharder) count() (assigned map[string]int, unassigned int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	list := s.newList()
	if err := s.reader.List(ctx, list); err != nil {
		return nil, 0, err
	}
	assigned = map[string]int{}
	for _, m := range s.source.Current().Members() {
		assigned[m] = 0
	}
	for i := range list.Items {
		m := list.Items[i].Labels[s.shard]
		if _, live := assigned[m]; live {
			assigned[m]++
		} else {
			unassigned++
		}
	}
	return assigned, unassigned, nil
}
