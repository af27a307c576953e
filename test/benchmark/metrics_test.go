package benchmark

import (
	"math"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

func classicHistogram(bounds []float64, cumulative []uint64) *dto.Histogram {
	h := &dto.Histogram{SampleCount: proto.Uint64(cumulative[len(cumulative)-1])}
	for i, b := range bounds {
		h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: proto.Float64(b), CumulativeCount: proto.Uint64(cumulative[i])})
	}
	return h
}

// nativeHistogram builds a schema-0 native histogram (buckets (2^(i-1), 2^i])
// from counts by bucket index, the indexes consecutive from first.
func nativeHistogram(schema int32, first int32, counts []int64, zero uint64) *dto.Histogram {
	h := &dto.Histogram{
		Schema:        proto.Int32(schema),
		ZeroThreshold: proto.Float64(1e-9),
		ZeroCount:     proto.Uint64(zero),
		PositiveSpan:  []*dto.BucketSpan{{Offset: proto.Int32(first), Length: proto.Uint32(uint32(len(counts)))}},
	}
	total := zero
	prev := int64(0)
	for _, c := range counts {
		h.PositiveDelta = append(h.PositiveDelta, c-prev)
		prev = c
		total += uint64(c)
	}
	h.SampleCount = proto.Uint64(total)
	return h
}

func near(got, want float64) bool {
	return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want))
}

func TestQuantiles(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		dist distribution
		q    float64
		want float64
	}{
		"if the rank falls in a classic bucket, then interpolate linearly within it": {
			dist: classicOf(classicHistogram([]float64{1, 2, 4}, []uint64{0, 10, 10})),
			q:    0.5, want: 1.5,
		},
		"if the rank falls in the +Inf bucket, then return the highest finite bound": {
			dist: classicOf(&dto.Histogram{SampleCount: proto.Uint64(10), Bucket: classicHistogram([]float64{1, 2}, []uint64{1, 1}).Bucket}),
			q:    0.99, want: 2,
		},
		"if two classic snapshots are subtracted, then only the later observations count": {
			dist: classicOf(classicHistogram([]float64{1, 2, 4}, []uint64{10, 10, 20})).
				minus(classicOf(classicHistogram([]float64{1, 2, 4}, []uint64{10, 10, 10}))),
			q: 0.5, want: 3,
		},
		"if the rank falls in a native bucket, then interpolate exponentially within it": {
			// Bucket 2 of schema 0 is (2, 4]: its middle rank is at 2·√2.
			dist: nativeOf(nativeHistogram(0, 2, []int64{10}, 0)),
			q:    0.5, want: 2 * math.Sqrt2,
		},
		"if the rank falls in the zero bucket, then return the zero threshold": {
			dist: nativeOf(nativeHistogram(0, 2, []int64{1}, 9)),
			q:    0.5, want: 1e-9,
		},
		"if two native snapshots are subtracted, then only the later observations count": {
			dist: nativeOf(nativeHistogram(0, 1, []int64{5, 10}, 0)).minus(nativeOf(nativeHistogram(0, 1, []int64{5, 0}, 0))),
			q:    1, want: 4,
		},
		"if the schema shrank between snapshots, then the earlier one is merged into the coarser buckets": {
			// Schema 1 buckets 3 and 4 ((2^1, 2^1.5] and (2^1.5, 2^2]) make
			// schema 0 bucket 2, (2, 4].
			dist: nativeOf(nativeHistogram(0, 2, []int64{10}, 0)).minus(nativeOf(nativeHistogram(1, 3, []int64{2, 3}, 0))),
			q:    0.5, want: 2 * math.Sqrt2,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := tc.dist.quantile(tc.q); !near(got, tc.want) {
				t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}

func TestQuantileOfNothingIsNaN(t *testing.T) {
	t.Parallel()
	for name, d := range map[string]distribution{
		"classic": classic{},
		"native":  native{buckets: map[int32]float64{}},
	} {
		if got := d.quantile(0.5); !math.IsNaN(got) {
			t.Errorf("%s: quantile of no observation = %v, want NaN", name, got)
		}
	}
}

func TestThousands(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]string{5: "5", 500: "500", 2000: "2,000", 10000: "10,000", 1234567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
