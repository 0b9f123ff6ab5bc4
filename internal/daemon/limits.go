package daemon

import (
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

// listen wraps ln in the connection cap and TLS, and registers the cap's
// metrics.
func (d *Daemon) listen(ln net.Listener, tlsCfg *tls.Config) net.Listener {
	refused := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "provisiond_connections_refused_total",
		Help: "TCP connections closed at once because --max-connections were open.",
	})
	d.tcp = newLimitListener(ln, d.cfg.MaxConns, func() {
		refused.Inc()
		d.log.Debug("connection refused: too many open", "limit", d.cfg.MaxConns)
	})
	d.metrics.reg.MustRegister(refused, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "provisiond_tcp_connections",
		Help: "Open TCP connections (API and HTTP), which --max-connections caps.",
	}, func() float64 { return float64(d.tcp.Open()) }))
	return tls.NewListener(d.tcp, tlsCfg)
}

// TCPConns returns the number of open TCP connections, which
// Config.MaxConns caps.
func (d *Daemon) TCPConns() int { return d.tcp.Open() }
