package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
)

// The daemon as a service, through the built binary:
// sd_notify readiness and watchdog, SIGHUP reload, rotate-cert, the
// systemd configuration directory.

const serviceWait = 60 * time.Second

// service runs the binary's serve with extra environment and arguments and
// keeps its JSON log lines.
type serviceProc struct {
	cmd  *exec.Cmd
	exit chan error

	mu    sync.Mutex
	lines []map[string]any
	added chan struct{} // a line arrived (non-blocking signal)
}

func startService(t *testing.T, environ []string, args ...string) *serviceProc {
	t.Helper()
	bin := buildDaemon(t)
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--log-format", "json"}, args...)...)
	cmd.Env = append([]string{"HOME=" + t.TempDir()}, environ...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serviceProc{cmd: cmd, exit: make(chan error, 1), added: make(chan struct{}, 1)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				m = map[string]any{"msg": sc.Text()}
			}
			p.mu.Lock()
			p.lines = append(p.lines, m)
			p.mu.Unlock()
			select {
			case p.added <- struct{}{}:
			default:
			}
		}
		p.exit <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	return p
}

// waitLog waits for a log line for which match is true and returns it.
func (p *serviceProc) waitLog(t *testing.T, what string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.After(serviceWait)
	seen := 0
	for {
		p.mu.Lock()
		lines := p.lines[seen:]
		seen = len(p.lines)
		p.mu.Unlock()
		for _, l := range lines {
			if match(l) {
				return l
			}
		}
		select {
		case <-p.added:
		case err := <-p.exit:
			p.exit <- err
			t.Fatalf("daemon exited (%v) before logging %s:\n%v", err, what, p.lines)
		case <-deadline:
			t.Fatalf("no log line %s:\n%v", what, p.lines)
		}
	}
}

func msgIs(msg string) func(map[string]any) bool {
	return func(l map[string]any) bool { return l["msg"] == msg }
}

func (p *serviceProc) signal(t *testing.T, s syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(s); err != nil {
		t.Fatal(err)
	}
}

func (p *serviceProc) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-p.exit:
		return err
	case <-time.After(serviceWait):
		t.Fatal("daemon did not exit")
	}
	return nil
}

// notifySocket listens where $NOTIFY_SOCKET points and returns the
// messages as they arrive.
func notifySocket(t *testing.T, name string) <-chan string {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	out := make(chan string, 100)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			out <- string(buf[:n])
		}
	}()
	return out
}

func nextNotify(t *testing.T, ch <-chan string, prefix string) string {
	t.Helper()
	deadline := time.After(serviceWait)
	for {
		select {
		case m := <-ch:
			if strings.HasPrefix(m, prefix) {
				return m
			}
		case <-deadline:
			t.Fatalf("no %s notification", prefix)
		}
	}
}

// Type=notify: READY=1 once serving, WATCHDOG=1 every half period,
// RELOADING=1 then READY=1 around a SIGHUP, STOPPING=1 at the end.
func TestServeUnderSystemd(t *testing.T) {
	for _, tc := range []struct{ name, socket string }{
		{"path", filepath.Join(t.TempDir(), "notify")},
		{"abstract", "@provisiond-test-" + strconv.Itoa(os.Getpid())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs := notifySocket(t, tc.socket)
			p := startService(t, []string{"NOTIFY_SOCKET=" + tc.socket, "WATCHDOG_USEC=200000"}, "--data-dir", t.TempDir())
			serving := p.waitLog(t, "serving", msgIs("serving"))
			if m := nextNotify(t, msgs, "READY=1"); m != "READY=1\nSTATUS=serving on "+serving["addr"].(string) {
				t.Errorf("ready message %q", m)
			}
			nextNotify(t, msgs, "WATCHDOG=1")
			nextNotify(t, msgs, "WATCHDOG=1")
			p.waitLog(t, "the watchdog period", func(l map[string]any) bool {
				return l["msg"] == "pinging the service manager's watchdog" && l["every"] == "100ms"
			})
			p.signal(t, syscall.SIGHUP)
			nextNotify(t, msgs, "RELOADING=1")
			nextNotify(t, msgs, "READY=1")
			p.waitLog(t, "reloaded", msgIs("reloaded: nothing to change"))
			p.signal(t, syscall.SIGTERM)
			nextNotify(t, msgs, "STOPPING=1")
			if err := p.wait(t); err != nil {
				t.Fatalf("exit: %v", err)
			}
		})
	}
}

func TestWatchdogInterval(t *testing.T) {
	pid := strconv.Itoa(os.Getpid())
	for _, tc := range []struct {
		env  map[string]string
		want time.Duration
	}{
		{map[string]string{}, 0},
		{map[string]string{"WATCHDOG_USEC": "30000000"}, 15 * time.Second},
		{map[string]string{"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": pid}, 15 * time.Second},
		{map[string]string{"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}, 0}, // another process's
		{map[string]string{"WATCHDOG_USEC": "soon"}, 0},
	} {
		if got := watchdogInterval(env(tc.env)); got != tc.want {
			t.Errorf("watchdogInterval(%v) = %v, want %v", tc.env, got, tc.want)
		}
	}
	if newNotifier(env(nil)) != nil {
		t.Error("a notifier without $NOTIFY_SOCKET")
	}
	var n *notifier
	if err := n.notify("READY=1"); err != nil {
		t.Errorf("nil notifier: %v", err)
	}
}

// SIGHUP reads the settings again: the log level and the login rate
// change at once and say so; the rest is named as waiting for a restart;
// settings that do not read change nothing.
func TestReloadOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "provisiond.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("log-level: info\nlogin-rate-max: 500\n")
	data := filepath.Join(dir, "data")
	p := startService(t, nil, "--config", cfg, "--data-dir", data)
	p.waitLog(t, "serving", msgIs("serving"))

	write("log-level: debug\nlogin-rate-max: 10\nmax-watchers: 5\n")
	p.signal(t, syscall.SIGHUP)
	l := p.waitLog(t, "reloaded", msgIs("reloaded"))
	if ch := l["changed"].(string); !strings.Contains(ch, "log-level info -> debug") || !strings.Contains(ch, "login-rate-max 500 -> 10") || strings.Contains(ch, "login-rate-refill") {
		t.Errorf("reloaded: %v", l)
	}
	later := p.waitLog(t, "what waits for a restart", msgIs("reload: these changes take effect at the next start"))
	if later["settings"] != "max-watchers" || later["level"] != "WARN" {
		t.Errorf("restart-needed line: %v", later)
	}
	// Debug lines now appear: a login logs one.
	creds, err := daemon.ReadCredentials(filepath.Join(data, daemon.CredentialsFile))
	if err != nil {
		t.Fatal(err)
	}
	loginBoth(t, creds, creds.APIAddresses[0])
	p.waitLog(t, "a debug line", func(l map[string]any) bool { return l["level"] == "DEBUG" })

	write("log-levle: warn\n")
	p.signal(t, syscall.SIGHUP)
	bad := p.waitLog(t, "the refused reload", msgIs("reload: the settings do not read; nothing changed"))
	if !strings.Contains(bad["err"].(string), "field log-levle not found") {
		t.Errorf("refused reload: %v", bad)
	}
	p.signal(t, syscall.SIGTERM)
	if err := p.wait(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

func servedSerial(t *testing.T, addr, caPEM string) string {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(caPEM))
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "juju-apiserver"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Text(16)
}

// rotate-cert renews the certificate with the same CA; after SIGHUP the
// daemon serves it, and clients verifying against the old CA still
// connect.
func TestRotateCert(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	p := startService(t, nil, "--data-dir", data)
	serving := p.waitLog(t, "serving", msgIs("serving"))
	addr := serving["addr"].(string)
	creds, err := daemon.ReadCredentials(filepath.Join(data, daemon.CredentialsFile))
	if err != nil {
		t.Fatal(err)
	}
	before := servedSerial(t, addr, creds.CACert)

	r := runBin(t, nil, "rotate-cert", "--data-dir", data)
	if r.code != 0 || !strings.Contains(r.stderr, "renewed the server certificate in "+data+" (same CA; expires ") {
		t.Fatalf("rotate-cert: %+v", r)
	}
	p.signal(t, syscall.SIGHUP)
	l := p.waitLog(t, "reloaded", msgIs("reloaded"))
	if !strings.Contains(l["changed"].(string), "serving a new certificate (serial ") {
		t.Errorf("reloaded: %v", l)
	}
	after := servedSerial(t, addr, creds.CACert)
	if after == before {
		t.Errorf("serial %s unchanged after rotate-cert and SIGHUP", after)
	}
	loginBoth(t, creds, addr)
	p.signal(t, syscall.SIGTERM)
	if err := p.wait(t); err != nil {
		t.Fatal(err)
	}
	// rotate-cert honours $PROVISIOND_DATA_DIR; a dir without a generated
	// certificate says why.
	if r := runBin(t, []string{"PROVISIOND_DATA_DIR=" + data}, "rotate-cert"); r.code != 0 {
		t.Errorf("rotate-cert via $PROVISIOND_DATA_DIR: %+v", r)
	}
	if r := runBin(t, nil, "rotate-cert", "--data-dir", t.TempDir()); r.code != 1 || !strings.Contains(r.stderr, "ERROR no ca.crt in") {
		t.Errorf("rotate-cert of an empty dir: %+v", r)
	}
}

// Without --config, serve reads provisiond.yaml of systemd's
// ConfigurationDirectory; --config and $PROVISIOND_CONFIG win.
func TestConfigurationDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ConfigFileName), []byte("max-watchers: 42\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other.yaml")
	if err := os.WriteFile(other, []byte("max-watchers: 7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want int
	}{
		{"the configuration directory", map[string]string{"CONFIGURATION_DIRECTORY": dir}, nil, 42},
		{"its first entry", map[string]string{"CONFIGURATION_DIRECTORY": dir + ":/nonexistent"}, nil, 42},
		{"none there", map[string]string{"CONFIGURATION_DIRECTORY": t.TempDir()}, nil, daemon.DefaultMaxWatchers},
		{"$PROVISIOND_CONFIG wins", map[string]string{"CONFIGURATION_DIRECTORY": dir, "PROVISIOND_CONFIG": other}, nil, 7},
		{"--config wins", map[string]string{"CONFIGURATION_DIRECTORY": dir}, []string{"--config", other}, 7},
		{"the environment over the file", map[string]string{"CONFIGURATION_DIRECTORY": dir, "PROVISIOND_MAX_WATCHERS": "3"}, nil, 3},
	} {
		o, err := loadOptions(tc.args, env(tc.env), &strings.Builder{})
		if err != nil || o.MaxWatchers != tc.want {
			t.Errorf("%s: max-watchers %d, %v; want %d", tc.name, o.MaxWatchers, err, tc.want)
		}
	}
}

// An operator certificate without juju-apiserver: serve exits 1 and says
// what to do.
func TestServeRefusesCertificateWithoutJujuAPIServer(t *testing.T) {
	// The daemon makes a CA and a certificate on first start; one of the
	// daemon's own certificates, renamed, is an operator's certificate with
	// the name. Without it, the refusal.
	data := filepath.Join(t.TempDir(), "data")
	p := startService(t, nil, "--data-dir", data)
	p.waitLog(t, "serving", msgIs("serving"))
	p.signal(t, syscall.SIGTERM)
	if err := p.wait(t); err != nil {
		t.Fatal(err)
	}
	noSAN := writeCertWithout(t, data)
	p = startService(t, nil, "--data-dir", filepath.Join(t.TempDir(), "d2"), "--cert-file", noSAN.cert, "--key-file", noSAN.key)
	l := p.waitLog(t, "the refusal", msgIs("cannot start"))
	if !strings.Contains(l["err"].(string), "has no subject alternative name juju-apiserver") ||
		!strings.Contains(l["err"].(string), "reissue it with DNS:juju-apiserver") {
		t.Errorf("cannot start: %v", l)
	}
	if err := p.wait(t); err == nil || p.cmd.ProcessState.ExitCode() != 1 {
		t.Errorf("exit: %v", err)
	}
}

type certFiles struct{ cert, key string }

// writeCertWithout issues, from the CA in dataDir, a server certificate
// whose only name is controller.example.com.
func writeCertWithout(t *testing.T, dataDir string) certFiles {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dataDir, name))
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(b)
		if block == nil {
			t.Fatalf("%s: no PEM", name)
		}
		return block.Bytes
	}
	ca, err := x509.ParseCertificate(read("ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	keyDER := read("ca.key")
	var caKey any
	if caKey, err = x509.ParsePKCS8PrivateKey(keyDER); err != nil {
		if caKey, err = x509.ParseECPrivateKey(keyDER); err != nil {
			t.Fatal(err)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(99), Subject: pkix.Name{CommonName: "controller"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"controller.example.com"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := certFiles{cert: filepath.Join(dir, "op.crt"), key: filepath.Join(dir, "op.key")}
	if err := os.WriteFile(f.cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}
