package daemon

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/provisiond/provisiond/facades/admin"
	"github.com/provisiond/provisiond/internal/connlimit"
	"github.com/provisiond/provisiond/state"
)

// The HTTP server's own limits (docs/reliability.md, Limits): every
// connection, API or not, is closed when it idles, stalls in its headers
// or its body, or stops reading a reply, so none holds a file descriptor
// for ever.
const (
	// DefaultMaxHeaderBytes caps a request's HTTP headers (net/http adds
	// 4 KiB of slack); Juju's and python-libjuju's upgrade requests send
	// well under 1 KiB.
	DefaultMaxHeaderBytes = 16 << 10
	// DefaultIdleTimeout closes a keep-alive connection that has sent no
	// new request for this long.
	DefaultIdleTimeout = time.Minute
	// httpReadHeaderTimeout bounds the TLS handshake and the request
	// headers.
	httpReadHeaderTimeout = 10 * time.Second
	// httpReadTimeout bounds reading a whole request, body included. An
	// API connection sets its own deadlines once upgraded.
	httpReadTimeout = time.Minute
)

// loginWait is how long an agent's login waits for one of the
// --login-concurrent slots before it gets "try again" (admin.Limiter):
// refusing it would throw away its TLS handshake, done already, and cost
// another on its retry. Well under a client's call timeout.
const loginWait = 2 * time.Second

// Limits per entity (facade.EntityLimits): a machine agent, or a user who
// is not a superuser, across all its connections. A Juju machine agent
// holds one connection (a second while a dead one times out) and a few
// dozen watchers.
const (
	DefaultMaxConnsPerEntity    = 16
	DefaultMaxWatchersPerEntity = 2 * DefaultMaxWatchers
)

// newHTTPServer is the daemon's HTTP server: handler on tlsCfg with the
// limits above; a response must be written within cfg.WriteTimeout (a
// handler that streams, like /backup, extends its deadline per write).
func (d *Daemon) newHTTPServer(handler http.Handler, tlsCfg *tls.Config) *http.Server {
	return &http.Server{
		Handler:           handler,
		TLSConfig:         tlsCfg,
		ReadHeaderTimeout: httpReadHeaderTimeout,
		ReadTimeout:       httpReadTimeout,
		WriteTimeout:      d.cfg.WriteTimeout,
		IdleTimeout:       d.cfg.IdleTimeout,
		MaxHeaderBytes:    d.cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelDebug),
	}
}

// listen wraps ln in the connection cap and its bounds (connlimit.Listener),
// TLS and the handshake gate (connlimit.HandshakeGate), and registers their
// metrics.
// d.http must be made.
func (d *Daemon) listen(ln net.Listener, tlsCfg *tls.Config) net.Listener {
	d.svc.connRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "provisiond_connections_refused_total",
		Help: "TCP connections closed at once, by listener (api, metrics) and reason: cap (--max-connections, less the local operator's share), " +
			"pending (--max-pending-connections), address (--max-pending-per-address), handshakes (a client's TLS handshakes in progress), " +
			"overload (the daemon's goroutines waited too long to run: --shed-latency).",
	}, []string{"listener", "reason"})
	for _, r := range []string{connlimit.RefusedCap, connlimit.RefusedPending, connlimit.RefusedAddress, connlimit.RefusedHandshakes, connlimit.RefusedOverload} {
		d.svc.connRefused.WithLabelValues("api", r) // every reason shows, at 0
	}
	d.tcp = connlimit.NewListener(ln, d.cfg.MaxConns, d.cfg.MaxPendingConns, d.cfg.MaxPendingPerAddress, admin.ClientOf, d.countRefused("api"))
	overload := connlimit.NewOverload(d.cfg.ShedLatency)
	d.tcp.Shed(overload)
	dropped := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "provisiond_tls_handshakes_dropped_total",
		Help: "TLS handshakes refused unstarted: they waited too long for a handshake slot, or their client had gone (handshake.go).",
	})
	d.gate = connlimit.NewHandshakeGate(d.cfg.HandshakeSlots, d.cfg.HandshakeWait, httpReadHeaderTimeout, dropped.Inc,
		func() { d.countRefused("api")(connlimit.RefusedHandshakes) })
	d.http.RegisterOnShutdown(d.gate.Close)
	d.http.ConnState = func(c net.Conn, s http.ConnState) {
		if s != http.StateNew {
			connlimit.ReleaseSlot(c) // served (or closed) without VerifyConnection
		}
	}
	d.metrics.reg.MustRegister(d.svc.connRefused, dropped, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "provisiond_tcp_connections",
		Help: "Open TCP connections (API and HTTP), which --max-connections caps.",
	}, func() float64 { return float64(d.tcp.Open()) }), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "provisiond_tcp_connections_limit",
		Help: "The cap on open TCP connections (--max-connections), for alerting on provisiond_tcp_connections near it.",
	}, func() float64 { return float64(d.cfg.MaxConns) }), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "provisiond_tcp_connections_pending",
		Help: "Open TCP connections that have not logged in (the local operator's aside), which --max-pending-connections caps.",
	}, func() float64 { return float64(d.tcp.Pending()) }), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "provisiond_tls_handshakes_waiting",
		Help: "TLS handshakes waiting for one of the handshake slots (handshake.go).",
	}, func() float64 { return float64(d.gate.Waiting()) }), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "provisiond_shedding",
		Help: "1 while new API connections are refused because the daemon's goroutines wait too long to run (--shed-latency), else 0.",
	}, func() float64 { return b2f(overload.Shedding()) }), schedLatencyCollector{})
	return tls.NewListener(d.tcp, d.gate.TLSConfig(tlsCfg))
}

// countRefused returns what counts (and logs at debug) the connections a
// listener refuses at accept.
func (d *Daemon) countRefused(listener string) func(reason string) {
	return func(reason string) {
		d.svc.connRefused.WithLabelValues(listener, reason).Inc()
		d.log.Debug("connection refused", "listener", listener, "reason", reason)
	}
}

// newThrottle is the failed-login throttle of every path that checks a
// password (Admin.Login, /backup and /metrics basic auth), with its metrics.
func (d *Daemon) newThrottle() *admin.Throttle {
	failed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "provisiond_login_failures_total",
		Help: "Failed logins (wrong password or unknown entity) by path (api, backup, metrics) and kind (user, agent).",
	}, []string{"path", "kind"})
	throttled := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "provisiond_login_throttled_total",
		Help: "Logins refused unchecked while their user, address or agent backs off after failures, by path and kind.",
	}, []string{"path", "kind"})
	d.metrics.reg.MustRegister(failed, throttled)
	for _, path := range []string{"api", "backup", "metrics"} { // every series from the start, at 0
		for _, kind := range []string{"user", "agent"} {
			failed.WithLabelValues(path, kind)
			throttled.WithLabelValues(path, kind)
		}
	}
	var now func() time.Time
	if d.cfg.Clock != nil {
		now = d.cfg.Clock.Now // tests' fake clock
	}
	return admin.NewThrottle(admin.ThrottleConfig{
		Free: d.cfg.LoginFailures,
		Max:  d.cfg.LoginBackoffMax,
		Now:  now,
		// The listener knows its connections' clients (connlimit); the
		// throttle is made before it, so it asks through d.
		Client: d.clientOf,
		Failed: func(path, kind string) {
			failed.WithLabelValues(path, kind).Inc()
		},
		Throttled: func(path, kind string) {
			throttled.WithLabelValues(path, kind).Inc()
		},
	})
}

// TCPConns returns the number of open TCP connections, which
// Config.MaxConns caps.
func (d *Daemon) TCPConns() int { return d.tcp.Open() }

// clientOf names the client at remote (host:port) for the login
// throttle: by its open connection to the API port, else by its address.
func (d *Daemon) clientOf(remote string) admin.Client {
	for _, l := range []*connlimit.Listener{d.tcp, d.svc.metricsTCP} {
		if client, operator, ok := l.Client(remote); ok {
			return admin.Client{Key: client, Operator: operator}
		}
	}
	return admin.ClientOfRemote(remote)
}

// superuser checks r's HTTP basic auth (a user name, or a user tag as
// Juju's clients send) for a superuser, through the failed-login throttle
// (path names the endpoint in its metrics: backup, tools, metrics; what
// says what needs it). On failure it has answered: 401, 403, or 429 with
// Retry-After while the user or the address backs off.
func (d *Daemon) superuser(w http.ResponseWriter, r *http.Request, path, what string) (state.User, bool) {
	user, pass, ok := r.BasicAuth()
	if !ok {
		w.Header().Set("WWW-Authenticate", `Basic realm="provisiond"`)
		http.Error(w, what+" needs a superuser's name and password", http.StatusUnauthorized)
		return state.User{}, false
	}
	user = strings.TrimPrefix(user, "user-")
	attempt, wait := d.throttle.Begin(d.throttle.UserKeys(path, user, r.RemoteAddr))
	if wait > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		http.Error(w, admin.ThrottledError(wait).Error(), http.StatusTooManyRequests)
		return state.User{}, false
	}
	u, err := d.state.CheckUserPassword(r.Context(), user, pass)
	if err != nil {
		if errors.Is(err, state.ErrBadCredentials) {
			attempt.Failed()
		} else {
			attempt.Abandon()
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="provisiond"`)
		http.Error(w, "invalid entity name or password", http.StatusUnauthorized)
		return state.User{}, false
	}
	attempt.Succeeded()
	if u.Access != state.AccessSuperuser {
		http.Error(w, "permission denied", http.StatusForbidden)
		return state.User{}, false
	}
	return u, true
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

var schedLatencyDesc = prometheus.NewDesc("provisiond_sched_latency_seconds",
	"How long the daemon's goroutines waited to run once runnable (runtime/metrics /sched/latencies:seconds; the sum counts each wait at its runtime bucket's lower bound).",
	nil, nil)

// schedLatencyCollector serves the runtime's scheduling latencies at
// connlimit.SchedLatencyBounds.
type schedLatencyCollector struct{}

func (schedLatencyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- schedLatencyDesc }

func (schedLatencyCollector) Collect(ch chan<- prometheus.Metric) {
	cum, count, sum := connlimit.SchedLatencies(connlimit.SchedLatencyBounds)
	buckets := make(map[float64]uint64, len(cum))
	for i, b := range connlimit.SchedLatencyBounds {
		buckets[b] = cum[i]
	}
	ch <- prometheus.MustNewConstHistogram(schedLatencyDesc, count, sum, buckets)
}
