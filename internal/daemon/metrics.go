package daemon

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the daemon's Prometheus metrics, served at /metrics. It
// implements rpc.Observer.
type metrics struct {
	reg         *prometheus.Registry
	conns       prometheus.Gauge
	connsTotal  prometheus.Counter
	logins      *prometheus.CounterVec
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	nextWait    *prometheus.HistogramVec
	commits     prometheus.Histogram
	commitBatch prometheus.Histogram
	compactions prometheus.Counter // etcd compactions made here (cluster.go); nil on bbolt
}

func newMetrics(watchers func() float64, revision func() float64) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "provisiond_connections", Help: "Open API connections.",
		}),
		connsTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "provisiond_connections_total", Help: "API connections accepted.",
		}),
		logins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "provisiond_logins_total", Help: "Admin.Login calls by outcome (ok, or the error code).",
		}, []string{"outcome"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "provisiond_requests_total", Help: "API requests by facade, method and outcome (code: \"ok\", or the error code; \"error\" for an error without one).",
		}, []string{"facade", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "provisiond_request_duration_seconds",
			Help:    "API request latency by facade and method; watcher Next calls are in provisiond_watcher_next_wait_seconds instead.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"facade", "method"}),
		nextWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "provisiond_watcher_next_wait_seconds",
			Help:    "Time from a watcher Next call to its reply, mostly waiting for a change, by watcher facade.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 12),
		}, []string{"facade"}),
		commits: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "provisiond_commit_duration_seconds",
			Help:    "Duration of state commits, fsync included.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		commitBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "provisiond_commit_batch_size",
			Help:    "Write transactions grouped into one commit.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10),
		}),
	}
	m.reg.MustRegister(m.conns, m.connsTotal, m.logins, m.requests, m.latency, m.nextWait, m.commits, m.commitBatch,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "provisiond_watchers", Help: "Active watcher subscriptions.",
		}, watchers),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "provisiond_state_revision", Help: "Last committed state revision.",
		}, revision),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

func (m *metrics) ConnOpened() { m.conns.Inc(); m.connsTotal.Inc() }
func (m *metrics) ConnClosed() { m.conns.Dec() }

// RequestDone counts a request by outcome: code is "" on success, which
// the metrics show as "ok". The time a watcher's Next spends waiting for a
// change is not request latency: it goes to its own histogram.
func (m *metrics) RequestDone(facade string, _ int, method, code string, d time.Duration) {
	if facade == "" {
		facade, method = "unknown", "unknown"
	}
	outcome := code
	if outcome == "" {
		outcome = "ok"
	}
	m.requests.WithLabelValues(facade, method, outcome).Inc()
	if method == "Next" && strings.HasSuffix(facade, "Watcher") {
		m.nextWait.WithLabelValues(facade).Observe(d.Seconds())
	} else {
		m.latency.WithLabelValues(facade, method).Observe(d.Seconds())
	}
	if facade == "Admin" && method == "Login" {
		m.logins.WithLabelValues(outcome).Inc()
	}
}

func (m *metrics) observeCommit(d time.Duration, n int) {
	m.commits.Observe(d.Seconds())
	m.commitBatch.Observe(float64(n))
}
