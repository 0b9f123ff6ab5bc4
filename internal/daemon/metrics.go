package daemon

import (
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/provisiond/provisiond/rpc"
)

// metrics are the daemon's Prometheus metrics, served at /metrics. It
// implements rpc.Observer.
type metrics struct {
	reg         *prometheus.Registry
	conns       prometheus.Gauge
	connsTotal  prometheus.Counter
	connsEnded  *prometheus.CounterVec
	logins      *prometheus.CounterVec
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	nextWait    *prometheus.HistogramVec
	commits     prometheus.Histogram
	commitBatch prometheus.Histogram
	compactions prometheus.Counter // etcd compactions made here (cluster.go); nil on bbolt

	// perRequest caches, by facade, method and code, the series a request
	// updates (requestSeries): resolving them by label values hashes and
	// looks up each label set twice per request. The key space is bounded
	// as the labels are: registered methods (others are "unknown") and
	// the error codes.
	perRequest sync.Map // requestKey → *requestSeries
}

type requestKey struct{ facade, method, code string }

// requestSeries are the series one kind of request updates.
type requestSeries struct {
	count   prometheus.Counter
	latency prometheus.Observer // provisiond_watcher_next_wait_seconds for a watcher's Next
	login   prometheus.Counter  // nil unless Admin.Login
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
		connsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "provisiond_connections_ended_total",
			Help: "API connections ended, by reason: client_closed (its close frame), client_gone (its socket ended without one), " +
				"read_deadline (no pong within the pong wait of a ping, nor any other frame), read_error, over_read_limit, malformed, " +
				"write_timeout (a client that does not read), write_failed, shutdown, closed (no login, no agent ping, credentials changed).",
		}, []string{"reason"}),
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
	for _, r := range rpc.EndReasons { // every reason shows, at 0
		m.connsEnded.WithLabelValues(r)
	}
	m.reg.MustRegister(m.conns, m.connsTotal, m.connsEnded, m.logins, m.requests, m.latency, m.nextWait, m.commits, m.commitBatch,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "provisiond_watchers", Help: "Active watcher subscriptions.",
		}, watchers),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "provisiond_state_revision", Help: "Last committed state revision.",
		}, revision),
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(goRuntimeMetrics)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// goRuntimeMetrics are the runtime/metrics series served beside the Go
// collector's defaults: where the process's CPU time went (the collector's
// share of it among them) and the live heap and heap goal, the figures an
// operator tunes GOGC and GOMEMLIMIT by (docs/operator-guide.md, "Memory and
// the garbage collector").
var goRuntimeMetrics = collectors.GoRuntimeMetricsRule{
	Matcher: regexp.MustCompile(`^/cpu/classes/|^/gc/heap/(live|goal):bytes$`),
}

func (m *metrics) ConnOpened() { m.conns.Inc(); m.connsTotal.Inc() }
func (m *metrics) ConnClosed(reason string) {
	m.conns.Dec()
	m.connsEnded.WithLabelValues(reason).Inc()
}

// RequestDone counts a request by outcome: code is "" on success, which
// the metrics show as "ok". The time a watcher's Next spends waiting for a
// change is not request latency: it goes to its own histogram.
func (m *metrics) RequestDone(facade string, _ int, method, code string, d time.Duration) {
	s := m.series(facade, method, code)
	s.count.Inc()
	s.latency.Observe(d.Seconds())
	if s.login != nil {
		s.login.Inc()
	}
}

// series returns the series of a request, resolving them on first use.
func (m *metrics) series(facade, method, code string) *requestSeries {
	k := requestKey{facade, method, code}
	if s, ok := m.perRequest.Load(k); ok {
		return s.(*requestSeries)
	}
	if facade == "" {
		facade, method = "unknown", "unknown"
	}
	outcome := code
	if outcome == "" {
		outcome = "ok"
	}
	s := &requestSeries{count: m.requests.WithLabelValues(facade, method, outcome)}
	if method == "Next" && strings.HasSuffix(facade, "Watcher") {
		s.latency = m.nextWait.WithLabelValues(facade)
	} else {
		s.latency = m.latency.WithLabelValues(facade, method)
	}
	if facade == "Admin" && method == "Login" {
		s.login = m.logins.WithLabelValues(outcome)
	}
	got, _ := m.perRequest.LoadOrStore(k, s)
	return got.(*requestSeries)
}

func (m *metrics) observeCommit(d time.Duration, n int) {
	m.commits.Observe(d.Seconds())
	m.commitBatch.Observe(float64(n))
}
