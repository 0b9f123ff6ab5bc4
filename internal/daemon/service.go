package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/provisiond/provisiond/facades/admin"
	"github.com/provisiond/provisiond/internal/buildinfo"
	"github.com/provisiond/provisiond/internal/connlimit"
	"github.com/provisiond/provisiond/internal/controllerstore"
	"github.com/provisiond/provisiond/pki"
	"github.com/provisiond/provisiond/state/store"
)

// What the daemon offers the service manager and operators beside the
// API (service.go): its health for a watchdog, reloading what can change
// live, the TLS certificate's checks, renewal and expiry, the build and
// database metrics, and the separate plain-HTTP metrics listener.
//
// Goroutines: the metrics listener's HTTP server (started by Start,
// stopped by Shutdown) and the certificate expiry check, a time.AfterFunc
// timer re-armed each day (stopped by Shutdown).

// JujuAPIServerName is the name clients verify the server certificate
// against (Juju's Go client always does): the certificate must carry it.
const JujuAPIServerName = "juju-apiserver"

// CertWarnBefore is how long before its expiry the server certificate is
// warned about (at start, then daily).
const CertWarnBefore = 30 * 24 * time.Hour

// certCheckEvery is how often a running daemon looks at the certificate's
// expiry.
const certCheckEvery = 24 * time.Hour

// service is the daemon's state for service.go.
type service struct {
	cert       atomic.Pointer[tls.Certificate] // what the TLS listener serves
	tlsHosts   []string                        // the hosts of a generated certificate
	expiry     *time.Timer
	metricsLn  net.Listener
	metricsTCP *connlimit.Listener // metricsLn, bounded
	metricsSv  *http.Server
	metricsWG  sync.WaitGroup
	// connRefused counts the connections the listeners refuse at accept
	// (connlimit.Listener), by listener and reason.
	connRefused *prometheus.CounterVec
}

// liveTLS makes tlsCfg serve the certificate through GetCertificate, so
// that Reload can replace it without restarting, and checks that an
// operator-supplied certificate carries the name clients verify.
func (d *Daemon) liveTLS(tlsCfg *tls.Config, hosts []string) (*tls.Config, error) {
	if len(tlsCfg.Certificates) != 1 {
		return nil, fmt.Errorf("tls: want one server certificate, have %d", len(tlsCfg.Certificates))
	}
	cert := tlsCfg.Certificates[0]
	if err := d.checkCertificate(&cert); err != nil {
		return nil, err
	}
	d.svc.tlsHosts = hosts
	d.svc.cert.Store(&cert)
	cfg := tlsCfg.Clone()
	cfg.Certificates = nil
	cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return d.svc.cert.Load(), nil }
	return cfg, nil
}

// checkCertificate refuses a certificate without the juju-apiserver name:
// Juju's agents verify the server as juju-apiserver and would all fail to
// connect. (Generated certificates always carry it.)
func (d *Daemon) checkCertificate(cert *tls.Certificate) error {
	leaf, err := leafOf(cert)
	if err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	if slices.Contains(leaf.DNSNames, JujuAPIServerName) {
		return nil
	}
	file := "the server certificate"
	if d.cfg.CertFile != "" {
		file = "--cert-file " + d.cfg.CertFile
	}
	names := slices.Clone(leaf.DNSNames)
	for _, ip := range leaf.IPAddresses {
		names = append(names, ip.String())
	}
	have := "none"
	if len(names) > 0 {
		have = strings.Join(names, ", ")
	}
	return fmt.Errorf("tls: %s has no subject alternative name %s (it has: %s): Juju agents verify the controller as %s and could not connect; reissue it with DNS:%s",
		file, JujuAPIServerName, have, JujuAPIServerName, JujuAPIServerName)
}

func leafOf(cert *tls.Certificate) (*x509.Certificate, error) {
	if cert.Leaf != nil {
		return cert.Leaf, nil
	}
	if len(cert.Certificate) == 0 {
		return nil, errors.New("no certificate")
	}
	return x509.ParseCertificate(cert.Certificate[0])
}

// CertificateNotAfter is when the served certificate expires.
func (d *Daemon) CertificateNotAfter() time.Time {
	leaf, err := leafOf(d.svc.cert.Load())
	if err != nil {
		return time.Time{}
	}
	return leaf.NotAfter
}

// checkExpiry warns when the certificate expires within CertWarnBefore,
// and arms the next check.
func (d *Daemon) checkExpiry() {
	notAfter := d.CertificateNotAfter()
	if left := time.Until(notAfter); left < CertWarnBefore {
		how := "run provisiond rotate-cert, then reload (SIGHUP) the daemon"
		if d.cfg.CertFile != "" {
			how = "renew --cert-file " + d.cfg.CertFile + ", then reload (SIGHUP) the daemon"
		}
		d.log.Warn("the server certificate expires soon", "not-after", notAfter.UTC().Format(time.RFC3339),
			"days-left", int(left.Hours()/24), "action", how)
	}
}

func (d *Daemon) startExpiryChecks() {
	d.checkExpiry()
	var arm func()
	arm = func() {
		d.svc.expiry = time.AfterFunc(certCheckEvery, func() {
			d.checkExpiry()
			d.mu.Lock()
			defer d.mu.Unlock()
			if !d.stopping {
				arm()
			}
		})
	}
	d.mu.Lock()
	arm()
	d.mu.Unlock()
}

// Healthy reports whether the daemon serves: its HTTP server runs and the
// store commits (the check of /health, health.go). A watchdog pings the
// service manager only while it is healthy.
func (d *Daemon) Healthy() error {
	select {
	case <-d.done:
		return errors.New("the API server has stopped")
	default:
	}
	return d.health.check()
}

// Live are the settings Reload changes while the daemon serves.
type Live struct {
	LoginRateMax    int
	LoginRateRefill time.Duration
	// HistoryRetention: zero is store.DefaultRetention.
	HistoryRetention store.Retention
	// Rebalance is Config.Rebalance.
	Rebalance bool
}

// Reload applies what can change while serving and says what it did, one
// entry per change: the agent login rate, the server certificate (read
// again from its files: after provisiond rotate-cert, or an operator's
// renewed --cert-file), the audit log, reopened (for log rotation), and
// the history's retention.
func (d *Daemon) Reload(l Live) ([]string, error) {
	var did []string
	if l.LoginRateMax != d.cfg.LoginRateMax || l.LoginRateRefill != d.cfg.LoginRateRefill {
		if l.LoginRateMax < 0 || l.LoginRateRefill < 0 {
			return nil, errors.New("login rate limits must not be negative")
		}
		d.limiter.SetRate(l.LoginRateMax, l.LoginRateRefill)
		if l.LoginRateMax != d.cfg.LoginRateMax { // each setting that changed, and only those
			did = append(did, fmt.Sprintf("login-rate-max %d -> %d", d.cfg.LoginRateMax, l.LoginRateMax))
		}
		if l.LoginRateRefill != d.cfg.LoginRateRefill {
			did = append(did, fmt.Sprintf("login-rate-refill %s -> %s", d.cfg.LoginRateRefill, l.LoginRateRefill))
		}
		d.cfg.LoginRateMax, d.cfg.LoginRateRefill = l.LoginRateMax, l.LoginRateRefill
	}
	if r := l.HistoryRetention; r != d.cfg.HistoryRetention {
		old := d.history.Retention()
		d.history.setRetention(r)
		d.cfg.HistoryRetention = r
		if now := d.history.Retention(); now != old {
			did = append(did, fmt.Sprintf("history-retention %s -> %s", old, now))
		}
	}
	if l.Rebalance != d.rebalance.Load() {
		did = append(did, fmt.Sprintf("rebalance %t -> %t", d.rebalance.Load(), l.Rebalance))
		d.rebalance.Store(l.Rebalance)
	}
	changed, err := d.reloadCertificate()
	if err != nil {
		return did, err
	}
	if changed != "" {
		did = append(did, changed)
	}
	if d.audit.path != "" {
		if err := d.audit.reopen(); err != nil {
			return did, err
		}
		did = append(did, "reopened the audit log "+d.audit.path)
	}
	return did, nil
}

// reloadCertificate reads the TLS material again and serves it if it
// differs; an unusable one is refused and the old one kept.
func (d *Daemon) reloadCertificate() (string, error) {
	var m *pki.Material
	var err error
	if d.cfg.CertFile != "" {
		m, err = pki.LoadFiles(d.cfg.CertFile, d.cfg.KeyFile, d.cfg.CAFile)
	} else {
		m, err = pki.LoadOrCreate(d.cfg.DataDir, d.svc.tlsHosts)
	}
	if err != nil {
		return "", fmt.Errorf("tls: %w (kept the certificate served)", err)
	}
	if string(m.CACertPEM) != string(d.tls.CACertPEM) && d.cfg.CertFile == "" {
		return "", errors.New("tls: the CA in the data dir changed; restart the daemon to use it (kept the certificate served)")
	}
	cfg, err := m.TLSConfig()
	if err != nil {
		return "", fmt.Errorf("tls: %w", err)
	}
	cert := cfg.Certificates[0]
	if err := d.checkCertificate(&cert); err != nil {
		return "", fmt.Errorf("%w (kept the certificate served)", err)
	}
	old := d.svc.cert.Load()
	if slices.EqualFunc(old.Certificate, cert.Certificate, func(a, b []byte) bool { return string(a) == string(b) }) {
		return "", nil
	}
	d.svc.cert.Store(&cert)
	d.tls = m
	d.checkExpiry()
	leaf, _ := leafOf(&cert)
	return fmt.Sprintf("serving a new certificate (serial %s, expires %s)", leaf.SerialNumber.Text(16),
		leaf.NotAfter.UTC().Format(time.RFC3339)), nil
}

// RotateCertificate issues a new server certificate in dataDir with the
// CA there, for the same names as the current one, and writes it in place
// of the old (key, then certificate; each atomically). Agents trust it at
// once: they trust the CA. A running daemon serves it after a reload
// (SIGHUP); a stopped one at its next start. It returns the new
// certificate's expiry.
func RotateCertificate(dataDir string) (time.Time, error) {
	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dataDir, name))
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no %s in %s: rotate-cert renews the certificate the daemon made (with --cert-file, renew that file instead)", name, dataDir)
		}
		return b, err
	}
	caCert, err := read(pki.CACertFile)
	if err != nil {
		return time.Time{}, err
	}
	caKey, err := read(pki.CAKeyFile)
	if err != nil {
		return time.Time{}, err
	}
	oldPEM, err := read(pki.ServerCertFile)
	if err != nil {
		return time.Time{}, err
	}
	block, _ := pem.Decode(oldPEM)
	if block == nil {
		return time.Time{}, fmt.Errorf("%s: no PEM certificate", pki.ServerCertFile)
	}
	old, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %w", pki.ServerCertFile, err)
	}
	hosts := slices.Clone(old.DNSNames)
	for _, ip := range old.IPAddresses {
		hosts = append(hosts, ip.String())
	}
	certPEM, keyPEM, err := pki.NewServerCert(caCert, caKey, hosts, pki.ServerValidity)
	if err != nil {
		return time.Time{}, err
	}
	if err := writeAtomic(filepath.Join(dataDir, pki.ServerKeyFile), keyPEM); err != nil {
		return time.Time{}, err
	}
	if err := writeAtomic(filepath.Join(dataDir, pki.ServerCertFile), certPEM); err != nil {
		return time.Time{}, err
	}
	block, _ = pem.Decode(certPEM)
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return time.Time{}, err
	}
	return leaf.NotAfter, nil
}

// writeAtomic writes data to path (mode 0600) through a synced temporary
// file and a rename, then syncs the directory.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".rotate-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after the rename, a no-op
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return controllerstore.SyncDir(filepath.Dir(path))
}

// registerServiceMetrics adds the build, database and certificate metrics.
func (d *Daemon) registerServiceMetrics() {
	bi := buildinfo.Get()
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "provisiond_build_info",
		Help:        "The running build: always 1, with its version, VCS revision, Go version and the Juju API level served.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "revision": bi.Revision, "goversion": bi.GoVersion, "api_version": ServerVersion},
	})
	build.Set(1)
	dbPath := filepath.Join(d.cfg.DataDir, DBFile)
	d.metrics.reg.MustRegister(build,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "provisiond_database_size_bytes", Help: "Size of the state database file.",
		}, func() float64 {
			fi, err := os.Stat(dbPath)
			if err != nil {
				return 0
			}
			return float64(fi.Size())
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "provisiond_tls_certificate_expiry_timestamp_seconds",
			Help: "When the served TLS certificate expires (Unix time); see provisiond rotate-cert.",
		}, func() float64 {
			t := d.CertificateNotAfter()
			if t.IsZero() {
				return 0
			}
			return float64(t.Unix())
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "provisiond_healthy",
			Help: "1 while /health says ok (the store commits, and on etcd answers with a quorum), else 0; the same probe as /health, reused for a second.",
		}, func() float64 {
			if d.state == nil || d.health.check() != nil {
				return 0
			}
			return 1
		}),
	)
}

// serveMetrics starts the plain-HTTP metrics listener of
// Config.MetricsAddr: loopback only, /metrics (and /health) only.
func (d *Daemon) serveMetrics() error {
	addr := d.cfg.MetricsAddr
	if addr == "" {
		return nil
	}
	if err := checkLoopback(addr); err != nil {
		return err
	}
	raw, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics-addr: %w", err)
	}
	// Bounded as the API port is, on a small cap of its own: a local
	// user cannot fill it for the others, nor spend the daemon's file
	// descriptors through it; the API port's state never reaches it.
	ln := connlimit.NewListener(raw, metricsMaxConns, 0, metricsPerClient, admin.ClientOf, d.countRefused("metrics"))
	d.svc.metricsTCP = ln
	mux := http.NewServeMux()
	// The same rule as on the API port (--metrics-auth): on loopback,
	// only "always" asks for credentials.
	mux.Handle("GET /metrics", d.metricsHandler(promhttp.HandlerFor(d.metrics.reg, promhttp.HandlerOpts{})))
	mux.HandleFunc("GET /health", d.handleHealth)
	d.svc.metricsLn = ln
	d.svc.metricsSv = &http.Server{Handler: mux, ReadHeaderTimeout: httpReadHeaderTimeout, ReadTimeout: httpReadTimeout,
		WriteTimeout: d.cfg.WriteTimeout, IdleTimeout: d.cfg.IdleTimeout, MaxHeaderBytes: d.cfg.MaxHeaderBytes}
	d.svc.metricsWG.Add(1)
	go func() {
		defer d.svc.metricsWG.Done()
		if err := d.svc.metricsSv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("metrics listener stopped", "err", err)
		}
	}()
	d.log.Info("serving metrics", "addr", ln.Addr().String())
	return nil
}

// The metrics listener's bounds: its connections never log in, so all
// but the local operator's are pending (connlimit.Listener).
const (
	metricsMaxConns  = 32
	metricsPerClient = 4
)

// MetricsAddr is the address of the plain-HTTP metrics listener ("" when
// there is none).
func (d *Daemon) MetricsAddr() string {
	if d.svc.metricsLn == nil {
		return ""
	}
	return d.svc.metricsLn.Addr().String()
}

// checkLoopback refuses a metrics address that is not on loopback: the
// listener is plain HTTP without authentication.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--metrics-addr %q: want HOST:PORT: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--metrics-addr %q: the metrics listener is plain HTTP without authentication, so it listens on loopback only (127.0.0.1, ::1 or localhost); use /metrics on the API port (TLS) from elsewhere", addr)
}

// stopService stops what service.go started.
func (d *Daemon) stopService(ctx context.Context) error {
	d.mu.Lock()
	d.stopping = true
	if d.svc.expiry != nil {
		d.svc.expiry.Stop()
	}
	d.mu.Unlock()
	var errs []error
	if d.svc.metricsSv != nil {
		if d.svc.metricsSv.Shutdown(ctx) != nil {
			// The stop's deadline passed: a scrape under way is cut
			// (Close's error is the listener's, as Shutdown's would be).
			errs = append(errs, d.svc.metricsSv.Close())
		}
		d.svc.metricsWG.Wait()
	}
	errs = append(errs, d.audit.close())
	return errors.Join(errs...)
}
