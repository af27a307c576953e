package sidecar

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

// upDesc describes polyop_sidecar_up.
var upDesc = prometheus.NewDesc("polyop_sidecar_up",
	"Whether the polyop host's sidecar is up: 1 when its health service answers SERVING, 0 when it is unreachable "+
		"or reports another status. Asked at each scrape, within the health check's deadline.",
	nil, nil)

// UpCollector returns a Prometheus collector of polyop_sidecar_up for c: at
// each scrape it asks the sidecar's health service, as the readiness check
// does, within Options.CheckTimeout, but
// reports each failure at once (see Client.Serving). The host registers it with
// controller-runtime's metrics registry for as long as it runs.
func (c *Client) UpCollector() prometheus.Collector { return upCollector{c} }

type upCollector struct{ c *Client }

func (u upCollector) Describe(ch chan<- *prometheus.Desc) { ch <- upDesc }

func (u upCollector) Collect(ch chan<- prometheus.Metric) {
	up := 0.0
	// The health service's answer at this scrape, without readiness's
	// tolerance of short outages.
	if u.c.Serving(context.Background()) == nil {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, up)
}
