package benchmark

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/encoding/protodelim"

	"github.com/polyop/polyop/test/benchmark/widget"
)

// The protobuf exposition format carries native histograms, which
// controller-runtime's controller_runtime_reconcile_time_seconds has (buckets
// about 10% wide), while the text format only has its classic buckets, the
// smallest of which is 5ms.
const protobufAccept = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"

// Metric names the harness reads.
const (
	metricReconcileTotal = "controller_runtime_reconcile_total"
	metricReconcileTime  = "controller_runtime_reconcile_time_seconds"
	metricRequests       = "rest_client_requests_total"
	metricWorkqueueDepth = "workqueue_depth"
	metricMaxConcurrent  = "controller_runtime_max_concurrent_reconciles"
	metricSidecarCall    = "polyop_sidecar_call_duration_seconds"
	metricSidecarCalls   = "polyop_sidecar_calls_total"
	metricHeapInuse      = "go_memstats_heap_inuse_bytes"
)

// metrics is one scrape of a process's metrics endpoint, by metric name.
type metrics map[string]*dto.MetricFamily

// scrape reads the metrics served at url (http://host:port/metrics).
func scrape(ctx context.Context, url string) (metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", protobufAccept)
	// Uncompressed: gzip would make every scraped process keep a compressor
	// around, in the memory the benchmark measures.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("scraping %s: %s: %s", url, resp.Status, body)
	}
	m := metrics{}
	r := bufio.NewReader(resp.Body)
	for {
		mf := &dto.MetricFamily{}
		err := protodelim.UnmarshalFrom(r, mf)
		if errors.Is(err, io.EOF) {
			return m, nil
		}
		if err != nil {
			return nil, fmt.Errorf("decoding the metrics of %s (is it the protobuf format?): %w", url, err)
		}
		m[mf.GetName()] = mf
	}
}

// labels selects the series whose labels include every pair.
type labels map[string]string

func (l labels) match(m *dto.Metric) bool {
	for k, v := range l {
		found := false
		for _, p := range m.GetLabel() {
			if p.GetName() == k {
				found = p.GetValue() == v
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// widgetReconciles is the Widget controller's reconciles.
func (m metrics) widgetReconciles() float64 {
	return m.sum(metricReconcileTotal, labels{"controller": widget.ControllerName})
}

// sum adds the values of the counters, gauges or untyped series of name that
// match sel. A missing metric sums to 0.
func (m metrics) sum(name string, sel labels) float64 {
	var total float64
	for _, s := range m[name].GetMetric() {
		if !sel.match(s) {
			continue
		}
		switch {
		case s.Counter != nil:
			total += s.GetCounter().GetValue()
		case s.Gauge != nil:
			total += s.GetGauge().GetValue()
		case s.Untyped != nil:
			total += s.GetUntyped().GetValue()
		}
	}
	return total
}

// byLabel sums name over sel, grouped by the value of label.
func (m metrics) byLabel(name, label string, sel labels) map[string]float64 {
	out := map[string]float64{}
	for _, s := range m[name].GetMetric() {
		if !sel.match(s) {
			continue
		}
		key := ""
		for _, p := range s.GetLabel() {
			if p.GetName() == label {
				key = p.GetValue()
			}
		}
		out[key] += s.GetCounter().GetValue() + s.GetGauge().GetValue() + s.GetUntyped().GetValue()
	}
	return out
}

// histogram returns the first histogram series of name matching sel, or nil.
func (m metrics) histogram(name string, sel labels) *dto.Histogram {
	for _, s := range m[name].GetMetric() {
		if s.Histogram != nil && sel.match(s) {
			return s.GetHistogram()
		}
	}
	return nil
}

// distribution is the observations of a histogram, or the difference of
// two snapshots of one: the observations made between them.
type distribution interface {
	// count is the number of observations.
	count() float64
	// quantile estimates the q-quantile (0 ≤ q ≤ 1) in the histogram's
	// unit; NaN when there is no observation.
	quantile(q float64) float64
}

// observed returns the observations the histogram named name (the series
// matching sel) gained from snapshot a to snapshot b. A histogram missing
// from a counts as empty.
func observed(a, b metrics, name string, sel labels) distribution {
	hb := b.histogram(name, sel)
	if hb == nil {
		return classic{}
	}
	ha := a.histogram(name, sel)
	if hb.Schema != nil {
		d := nativeOf(hb)
		if ha != nil && ha.Schema != nil {
			d = d.minus(nativeOf(ha))
		}
		return d
	}
	d := classicOf(hb)
	if ha != nil {
		d = d.minus(classicOf(ha))
	}
	return d
}

// classic is a histogram with classic buckets: upper bounds and the
// cumulative count of observations up to each.
type classic struct {
	upper, cumulative []float64
}

func classicOf(h *dto.Histogram) classic {
	var c classic
	for _, b := range h.GetBucket() {
		c.upper = append(c.upper, b.GetUpperBound())
		c.cumulative = append(c.cumulative, float64(b.GetCumulativeCount()))
	}
	// The +Inf bucket is implicit in the exposition: the sample count.
	if n := len(c.upper); n == 0 || !math.IsInf(c.upper[n-1], 1) {
		c.upper = append(c.upper, math.Inf(1))
		c.cumulative = append(c.cumulative, float64(h.GetSampleCount()))
	}
	return c
}

func (c classic) minus(prev classic) classic {
	out := classic{upper: c.upper, cumulative: make([]float64, len(c.cumulative))}
	for i := range c.cumulative {
		out.cumulative[i] = c.cumulative[i]
		if i < len(prev.cumulative) && prev.upper[i] == c.upper[i] {
			out.cumulative[i] -= prev.cumulative[i]
		}
	}
	return out
}

func (c classic) count() float64 {
	if len(c.cumulative) == 0 {
		return 0
	}
	return c.cumulative[len(c.cumulative)-1]
}

// quantile interpolates linearly within the bucket holding the rank, as
// Prometheus's histogram_quantile does.
func (c classic) quantile(q float64) float64 {
	if c.count() == 0 {
		return math.NaN()
	}
	rank := q * c.count()
	lower, below := 0.0, 0.0
	for i, upper := range c.upper {
		count := c.cumulative[i]
		if count >= rank && count > below {
			if math.IsInf(upper, 1) {
				return lower
			}
			return lower + (upper-lower)*(rank-below)/(count-below)
		}
		lower, below = upper, count
	}
	return lower
}

// native is a native (sparse, exponential) histogram: bucket i of schema s
// holds the observations in (b^(i-1), b^i] with b = 2^(2^-s), and the zero
// bucket those at most zeroThreshold.
type native struct {
	schema        int32
	zeroThreshold float64
	zero          float64
	buckets       map[int32]float64
}

func nativeOf(h *dto.Histogram) native {
	n := native{schema: h.GetSchema(), zeroThreshold: h.GetZeroThreshold(), zero: float64(h.GetZeroCount()), buckets: map[int32]float64{}}
	var index int32
	var count int64
	deltas := h.GetPositiveDelta()
	d := 0
	for si, span := range h.GetPositiveSpan() {
		if si == 0 {
			index = span.GetOffset()
		} else {
			index += span.GetOffset()
		}
		for j := uint32(0); j < span.GetLength() && d < len(deltas); j++ {
			count += deltas[d]
			d++
			n.buckets[index] = float64(count)
			index++
		}
	}
	return n
}

// downscale merges buckets into the coarser schema s (s ≤ n.schema): each
// bucket of schema s-1 covers two of schema s.
func (n native) downscale(s int32) native {
	if s >= n.schema {
		return n
	}
	factor := int32(1) << (n.schema - s)
	out := native{schema: s, zeroThreshold: n.zeroThreshold, zero: n.zero, buckets: map[int32]float64{}}
	for i, c := range n.buckets {
		// ceil(i / factor), for negative i too
		j := -floorDiv(-i, factor)
		out.buckets[j] += c
	}
	return out
}

func floorDiv(a, b int32) int32 {
	q := a / b
	if (a%b != 0) && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func (n native) minus(prev native) native {
	s := min(n.schema, prev.schema)
	a, b := n.downscale(s), prev.downscale(s)
	out := native{schema: s, zeroThreshold: a.zeroThreshold, zero: a.zero - b.zero, buckets: map[int32]float64{}}
	for i, c := range a.buckets {
		if d := c - b.buckets[i]; d > 0 {
			out.buckets[i] = d
		}
	}
	return out
}

func (n native) count() float64 {
	total := n.zero
	for _, c := range n.buckets {
		total += c
	}
	return total
}

// quantile interpolates exponentially within the bucket holding the rank,
// as Prometheus does for native histograms.
func (n native) quantile(q float64) float64 {
	total := n.count()
	if total == 0 {
		return math.NaN()
	}
	rank := q * total
	seen := n.zero
	if rank <= seen {
		return n.zeroThreshold
	}
	indexes := make([]int32, 0, len(n.buckets))
	for i := range n.buckets {
		indexes = append(indexes, i)
	}
	sort.Slice(indexes, func(a, b int) bool { return indexes[a] < indexes[b] })
	base := math.Pow(2, math.Pow(2, -float64(n.schema)))
	for _, i := range indexes {
		c := n.buckets[i]
		if seen+c >= rank {
			lower, upper := math.Pow(base, float64(i-1)), math.Pow(base, float64(i))
			return lower * math.Pow(upper/lower, (rank-seen)/c)
		}
		seen += c
	}
	return math.Pow(base, float64(indexes[len(indexes)-1]))
}
