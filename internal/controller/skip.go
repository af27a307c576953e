package controller

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash"
	"hash/fnv"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/polyop/polyop/internal/object"
	"github.com/polyop/polyop/internal/rawjson"
)

// callsSkipped counts the Reconcile calls the host did not make because
// their inputs were those of the last successful answer (see
// description.Controller.SkipUnchangedInputs), in controller-runtime's
// metrics registry.
var callsSkipped = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "polyop_sidecar_calls_skipped_total",
	Help: "Reconcile calls not made to the sidecar because the object and the observed children sent were those " +
		"of the last successful answer, by controller (only for controllers declaring skip_unchanged_inputs).",
}, []string{"controller"})

func init() {
	metrics.Registry.MustRegister(callsSkipped)
}

// answeredInputs holds, per reconciled object, the hash of the inputs of the
// last successful Reconcile answer: one uint64 per object, dropped when the
// object is gone or a reconcile of it does not end in success.
type answeredInputs = keyed[uint64]

func newAnsweredInputs() *answeredInputs { return newKeyed[uint64]() }

// childrenAsLeft reports whether the observed children of owner of the kinds
// not sent to the sidecar are exactly those the host last applied, each at
// the resourceVersion its apply returned: none deleted, changed or added
// since. The sidecar's answer does not depend on them, but what the host
// does with it does (it applies a child again that was deleted or changed).
func (r *Reconciler) childrenAsLeft(key types.NamespacedName, owner *object.Object, observed []*object.Object) bool {
	sent := map[schema.GroupVersionKind]bool{}
	for _, k := range r.Children {
		sent[k.GVK] = k.SendObserved
	}
	applied := r.applied.children(key, owner.GetUID())
	seen := 0
	for _, o := range observed {
		if sent[o.GroupVersionKind()] {
			continue
		}
		prev, ok := findApplied(applied, idOf(o))
		if !ok || prev.resourceVersion == "" || prev.resourceVersion != o.GetResourceVersion() {
			return false
		}
		seen++
	}
	want := 0
	for _, c := range applied {
		if !sent[c.id.gvk] {
			want++
		}
	}
	return seen == want
}

// inputsHash hashes the inputs of a Reconcile call: obj without its status
// and without metadata.resourceVersion and metadata.managedFields, then each
// observed child sent (whole, without those two metadata fields), in the
// order sent. Two calls whose inputs hash the same are, to a controller that
// is a function of its inputs, the same call.
func inputsHash(obj *object.Object, sent []*object.Object) (uint64, error) {
	h := fnv.New64a()
	if err := hashObject(h, obj, false); err != nil {
		return 0, err
	}
	for _, c := range sent {
		if err := hashObject(h, c, true); err != nil {
			return 0, err
		}
	}
	return h.Sum64(), nil
}

// hashObject writes o to h, leaving out its status unless withStatus,
// metadata.resourceVersion and metadata.managedFields. Every part is
// written with its length, so that no two different objects write the same
// bytes.
func hashObject(h hash.Hash64, o *object.Object, withStatus bool) error {
	meta := o.ObjectMeta
	meta.ResourceVersion = ""
	meta.ManagedFields = nil
	// encoding/json writes struct fields in order and map keys sorted.
	raw, err := json.Marshal(&meta)
	if err != nil {
		return fmt.Errorf("encoding the metadata of %s %s/%s: %w", o.Kind, o.GetNamespace(), o.GetName(), err)
	}
	writePart(h, []byte(o.APIVersion))
	writePart(h, []byte(o.Kind))
	writePart(h, raw)
	body, err := o.MarshalJSON()
	if err != nil {
		return err
	}
	return rawjson.Each(body, func(key string, value json.RawMessage) error {
		switch {
		case key == "apiVersion", key == "kind", key == "metadata", key == "status" && !withStatus:
			return nil
		}
		writePart(h, []byte(key))
		writePart(h, value)
		return nil
	})
}

func writePart(h hash.Hash64, b []byte) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
	_, _ = h.Write(n[:])
	_, _ = h.Write(b)
}
