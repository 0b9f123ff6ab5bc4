package daemon_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/backup"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc/params"
)

// Secrets and TLS. TestTLSRefusesOldVersions (daemon_test.go)
// refuses TLS 1.0 and 1.1; TestNoSecretsInLogs (secrets_test.go) greps
// the log and error messages of good and bad logins.

// Every TLS 1.2 cipher suite Go knows is offered alone: only ECDHE key
// exchange with an AEAD cipher is accepted; TLS 1.3 (all AEAD) is
// negotiated when offered.
func TestTLSCipherSuites(t *testing.T) {
	d := start(t, nil)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(d.Credentials().CACert))
	modern := func(s *tls.CipherSuite) bool {
		return strings.HasPrefix(s.Name, "TLS_ECDHE_") &&
			(strings.Contains(s.Name, "_GCM_") || strings.Contains(s.Name, "CHACHA20_POLY1305"))
	}
	accepted := 0
	for _, suites := range [][]*tls.CipherSuite{tls.CipherSuites(), tls.InsecureCipherSuites()} {
		for _, s := range suites {
			if !supportsTLS12(s) {
				continue // TLS 1.3 suites are not configurable
			}
			conn, err := tls.Dial("tcp", d.Addr(), &tls.Config{
				RootCAs: pool, ServerName: "juju-apiserver",
				MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12,
				CipherSuites: []uint16{s.ID},
			})
			if err == nil {
				conn.Close()
				accepted++
				if !modern(s) {
					t.Errorf("TLS 1.2 suite %s accepted", s.Name)
				}
			}
		}
	}
	if accepted == 0 {
		t.Error("no TLS 1.2 suite accepted; the test would prove nothing")
	}
	conn, err := tls.Dial("tcp", d.Addr(), &tls.Config{RootCAs: pool, ServerName: "juju-apiserver", MinVersion: tls.VersionTLS13})
	if err != nil {
		t.Fatalf("TLS 1.3: %v", err)
	}
	if v := conn.ConnectionState().Version; v != tls.VersionTLS13 {
		t.Errorf("negotiated %x; want TLS 1.3", v)
	}
	conn.Close()
}

func supportsTLS12(s *tls.CipherSuite) bool {
	for _, v := range s.SupportedVersions {
		if v == tls.VersionTLS12 {
			return true
		}
	}
	return false
}

// The one listener speaks only TLS: plaintext HTTP (health, metrics, the
// websocket upgrade of the API) gets no content, only the refusal.
func TestNoPlaintext(t *testing.T) {
	d := start(t, nil)
	for _, path := range []string{"/health", "/metrics", "/api", "/model/" + d.Credentials().DefaultModelUUID + "/api", "/backup"} {
		conn, err := net.DialTimeout("tcp", d.Addr(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		req, _ := http.NewRequest("GET", "http://"+d.Addr()+path, nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		req.SetBasicAuth("admin", d.Credentials().AdminPassword)
		if err := req.Write(conn); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), req)
		if err != nil {
			t.Logf("plaintext GET %s: %v", path, err)
		} else {
			var body bytes.Buffer
			_, _ = body.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || strings.Contains(body.String(), "ok") {
				t.Errorf("plaintext GET %s: %s %q; want 400 and no content", path, resp.Status, body.String())
			}
		}
		conn.Close()
	}
	// Plain TCP that is not HTTP is dropped too.
	conn, err := net.DialTimeout("tcp", d.Addr(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = conn.Write([]byte(`{"request-id":1,"type":"Admin","version":3,"request":"Login"}` + "\n"))
	buf := make([]byte, 512)
	n, _ := conn.Read(buf)
	if bytes.Contains(buf[:n], []byte("request-id")) {
		t.Errorf("plaintext RPC answered: %q", buf[:n])
	}
}

// Every file the daemon creates in its data dir (database, credentials,
// CA and server keys and certificates) and every file a restore writes is
// 0600, in a 0700 dir, even with a umask that would allow more.
func TestDataDirFileModes(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)

	dir := filepath.Join(t.TempDir(), "data")
	cfg := daemon.Default(dir)
	cfg.Addr = "127.0.0.1:0"
	d, err := daemon.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	creds := d.Credentials()
	c := dial(t, d, creds.DefaultModelUUID)
	if _, err := c.LoginUser(ctxT(t), "admin", creds.AdminPassword); err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if err := backup.Fetch(ctxT(t), &creds, &archive, nil); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := d.Shutdown(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	restored := filepath.Join(t.TempDir(), "restored")
	if err := backup.Restore(bytes.NewReader(archive.Bytes()), restored, backup.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{dir, restored} {
		files := 0
		err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := e.Info()
			if err != nil {
				return err
			}
			want := fs.FileMode(0o600)
			if e.IsDir() {
				want = 0o700
			} else {
				files++
			}
			if info.Mode().Perm() != want {
				t.Errorf("%s: mode %v; want %v", p, info.Mode().Perm(), want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if files < 3 {
			t.Errorf("%s: %d files; want the database, credentials and TLS material", root, files)
		}
	}
	for _, name := range []string{daemon.DBFile, daemon.CredentialsFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Passwords set through the API (an agent's rotated password, a short one
// refused) appear in no log line (at debug level) and no error message.
func TestNoSecretsInLogsPasswordChanges(t *testing.T) {
	logs := &syncBuffer{}
	f := newProvFixtureWith(t, func(c *daemon.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	const long = "rotated-secret-password-0123456789"
	const short = "shortsecret"
	var errs []string
	res := mustCall[params.ErrorResults](t, f.Ctrl, 11, "SetPasswords", params.EntityPasswords{Changes: []params.EntityPassword{
		{Tag: "machine-1", Password: long}, {Tag: "machine-1", Password: short}, {Tag: "machine-42", Password: long}, {Tag: "bad", Password: long}}})
	for _, r := range res.Results {
		if r.Error != nil {
			errs = append(errs, r.Error.Message)
		}
	}
	if len(errs) != 3 {
		t.Fatalf("SetPasswords errors = %v; want 3", errs)
	}
	all := logs.String() + strings.Join(errs, "\n")
	if !strings.Contains(all, "login") {
		t.Fatal("nothing was logged; the test would prove nothing")
	}
	for _, secret := range []string{long, short, m0Password, f.D.Credentials().AdminPassword, f.D.Credentials().ControllerAgent.Password} {
		if strings.Contains(all, secret) {
			t.Errorf("a password appears in a log line or error message")
		}
	}
}
