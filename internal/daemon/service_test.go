package daemon_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/buildinfo"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/pki"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// The daemon as a service: metrics, the audit trail, the TLS
// certificate's checks, reload and renewal, health.

// jsonLogLines decodes a JSON log.
func jsonLogLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s %s", url, resp.Status, b)
	}
	return string(b)
}

func TestMetricsOfTheService(t *testing.T) {
	var dataDir string
	d := start(t, func(c *daemon.Config) { dataDir, c.MetricsAddr = c.DataDir, "127.0.0.1:0" })
	if d.MetricsAddr() == "" {
		t.Fatal("no metrics listener")
	}
	c := loginAdmin(t, d, "")
	adminCall[params.AddMachinesResult](t, c, "AddMachines", params.AddMachinesArgs{})
	wantErr(t, modelAdmin(t, c, "AddModel", params.AddModelArgs{Name: "Bad"}, nil), "", params.CodeNotValid)
	// A watcher Next that waits for a change.
	w := adminCall[params.StringsWatchResult](t, c, "WatchModel", params.ModelArgs{})
	sw := client.NewStringsWatcher(c, w.StringsWatcherId)
	got := make(chan error, 1)
	go func() { _, err := sw.Next(ctxT(t)); got <- err }()
	adminCall[params.AddMachinesResult](t, c, "AddMachines", params.AddMachinesArgs{})
	if err := <-got; err != nil {
		t.Fatal(err)
	}

	body := scrape(t, "http://"+d.MetricsAddr()+"/metrics")
	bi := buildinfo.Get()
	for _, want := range []string{
		`provisiond_requests_total{code="ok",facade="ModelAdmin",method="AddMachines"} 2`,
		`provisiond_requests_total{code="not valid",facade="ModelAdmin",method="AddModel"} 1`,
		`provisiond_requests_total{code="ok",facade="StringsWatcher",method="Next"} 1`,
		`provisiond_logins_total{outcome="ok"} 1`,
		`provisiond_login_failures_total{kind="agent",path="metrics"} 0`, // every series from the start
		fmt.Sprintf(`provisiond_build_info{api_version="3.3.0",goversion=%q,revision=%q,version=%q} 1`, bi.GoVersion, bi.Revision, bi.Version),
		`provisiond_watcher_next_wait_seconds_count{facade="StringsWatcher"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(body, `provisiond_request_duration_seconds_count{facade="StringsWatcher",method="Next"}`) {
		t.Error("watcher Next is in the request latency histogram")
	}
	if strings.Contains(body, `code=""`) {
		t.Error(`a success is counted with code=""`)
	}
	fi, err := os.Stat(filepath.Join(dataDir, daemon.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^provisiond_database_size_bytes (\S+)$`).FindStringSubmatch(body); m == nil || m[1] != fmt.Sprint(fi.Size()) &&
		m[1] != fmt.Sprintf("%g", float64(fi.Size())) {
		t.Errorf("database size = %v, file %d bytes", m, fi.Size())
	}
	m := regexp.MustCompile(`(?m)^provisiond_tls_certificate_expiry_timestamp_seconds (\S+)$`).FindStringSubmatch(body)
	if m == nil || m[1] != fmt.Sprintf("%g", float64(d.CertificateNotAfter().Unix())) {
		t.Errorf("certificate expiry = %v, want %d", m, d.CertificateNotAfter().Unix())
	}
	// The same registry on the API port.
	if api := metricsOverTLS(t, d); !strings.Contains(api, "provisiond_build_info{") {
		t.Error("/metrics on the API port lacks provisiond_build_info")
	}
	if h := scrape(t, "http://"+d.MetricsAddr()+"/health"); h != "ok\n" {
		t.Errorf("/health = %q", h)
	}
	if err := d.Healthy(); err != nil {
		t.Errorf("Healthy() = %v", err)
	}
}

func metricsOverTLS(t *testing.T, d *daemon.Daemon) string {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(d.Credentials().CACert))
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "juju-apiserver"}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("https://" + d.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestMetricsAddrLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "10.1.2.3:9100", "example.com:9100"} {
		cfg := daemon.Default(t.TempDir())
		cfg.Addr, cfg.MetricsAddr = "127.0.0.1:0", addr
		d, err := daemon.Start(cfg)
		if err == nil {
			_ = d.Shutdown(context.Background())
			t.Fatalf("--metrics-addr %s accepted", addr)
		}
		if !strings.Contains(err.Error(), "listens on loopback only") {
			t.Errorf("--metrics-addr %s: %v", addr, err)
		}
	}
	for _, addr := range []string{"[::1]:0", "localhost:0"} {
		d := start(t, func(c *daemon.Config) { c.MetricsAddr = addr })
		if !strings.Contains(scrape(t, "http://"+d.MetricsAddr()+"/metrics"), "provisiond_build_info") {
			t.Errorf("--metrics-addr %s: no metrics", addr)
		}
	}
}

func TestAuditTrail(t *testing.T) {
	dir := t.TempDir()
	auditPath := filepath.Join(dir, "audit.log")
	var logBuf syncBuffer
	d := start(t, func(c *daemon.Config) {
		c.AuditLog = auditPath
		c.Logger = slog.New(slog.NewJSONHandler(&logBuf, nil))
	})
	c := loginAdmin(t, d, "")
	adminCall[params.AddMachinesResult](t, c, "AddMachines", params.AddMachinesArgs{Constraints: "mem=1G"})
	wantErr(t, modelAdmin(t, c, "AddModel", params.AddModelArgs{Name: "Bad"}, nil), "", params.CodeNotValid)
	adminCall[params.ListModelsResult](t, c, "ListModels", nil) // a read: not audited
	// An agent's mutation, with a secret in its params.
	agent := loginController(t, d, d.Credentials().ControllerModelUUID)
	secret := "a-new-password-of-24-chars"
	var res params.ErrorResults
	if err := agent.Call(ctxT(t), "Provisioner", 11, "", "SetPasswords",
		params.EntityPasswords{Changes: []params.EntityPassword{{Tag: "machine-0", Password: secret}}}, &res); err != nil {
		t.Fatal(err)
	}
	// A refused login.
	bad := dial(t, d, "")
	if _, err := bad.LoginUser(ctxT(t), "admin", "not-the-password"); err == nil {
		t.Fatal("login with a wrong password succeeded")
	}

	data, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), secret) || strings.Contains(logBuf.String(), secret) {
		t.Error("a password reached the audit trail")
	}
	fi, _ := os.Stat(auditPath)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("audit log mode %v", fi.Mode().Perm())
	}
	recs := jsonLogLines(t, string(data))
	find := func(event, method string) map[string]any {
		for _, r := range recs {
			if r["event"] == event && r["method"] == method {
				return r
			}
		}
		t.Fatalf("no %s %s in the audit log:\n%s", event, method, data)
		return nil
	}
	add := find("mutation", "AddMachines")
	if add["who"] != "user-admin" || !strings.HasPrefix(add["remote"].(string), "127.0.0.1:") || add["facade"] != "ModelAdmin" ||
		add["outcome"] != "ok" || add["model"] == "" || !strings.Contains(fmt.Sprint(add["params"]), "mem=1G") {
		t.Errorf("AddMachines record = %v", add)
	}
	if r := find("mutation", "AddModel"); r["outcome"] != "not valid" || !strings.Contains(r["error"].(string), `model name "Bad" not valid`) {
		t.Errorf("AddModel record = %v", r)
	}
	if r := find("mutation", "SetPasswords"); r["who"] != "machine-0" || r["facade"] != "Provisioner" ||
		!strings.Contains(fmt.Sprint(r["params"]), "[redacted]") {
		t.Errorf("SetPasswords record = %v", r)
	}
	if r := find("login-refused", "Login"); r["who"] != "user-admin" || r["outcome"] != params.CodeUnauthorized ||
		!strings.HasPrefix(r["remote"].(string), "127.0.0.1:") || r["params"] != nil {
		t.Errorf("refused login record = %v", r)
	}
	for _, r := range recs {
		if r["method"] == "ListModels" || (r["method"] == "Login" && r["event"] != "login-refused") {
			t.Errorf("audited a read or a good login: %v", r)
		}
	}
	// The daemon's log: the mutations at info, the refusal at warn with the
	// remote address, no Go source location.
	var sawMutation, sawRefusal bool
	for _, l := range jsonLogLines(t, logBuf.String()) {
		if l["msg"] == "mutation" && l["method"] == "AddMachines" && l["who"] == "user-admin" && l["level"] == "INFO" {
			sawMutation = true
		}
		if l["msg"] == "login refused" && l["level"] == "WARN" && strings.HasPrefix(fmt.Sprint(l["remote"]), "127.0.0.1:") && l["who"] == "user-admin" {
			sawRefusal = true
		}
		if _, ok := l["source"]; ok {
			t.Errorf("log line with a source location: %v", l)
		}
	}
	if !sawMutation || !sawRefusal {
		t.Errorf("log: mutation %v, refusal %v:\n%s", sawMutation, sawRefusal, logBuf.String())
	}
	if regexp.MustCompile(`\.go:\d+`).MatchString(logBuf.String()) {
		t.Errorf("Go source locations in the log:\n%s", logBuf.String())
	}

	// A reload reopens the log: after a rotation, records go to a new file.
	if err := os.Rename(auditPath, auditPath+".1"); err != nil {
		t.Fatal(err)
	}
	did, err := d.Reload(daemon.Live{LoginRateMax: daemon.DefaultLoginRateMax, LoginRateRefill: daemon.DefaultLoginRateRefill, Rebalance: true})
	if err != nil || !slices.Contains(did, "reopened the audit log "+auditPath) {
		t.Fatalf("Reload = %q, %v", did, err)
	}
	adminCall[params.AddMachinesResult](t, c, "AddMachines", params.AddMachinesArgs{})
	if b, err := os.ReadFile(auditPath); err != nil || !strings.Contains(string(b), `"method":"AddMachines"`) {
		t.Errorf("audit log after the reopen: %q %v", b, err)
	}
}

// Every registered method is classified for the audit trail; the list is
// the golden file testdata/audit-methods.golden (-update rewrites it), so
// a new method's class is a reviewed choice.
func TestAuditClassification(t *testing.T) {
	reg := daemon.NewRegistry(nil)
	var b strings.Builder
	for _, fv := range reg.Facades() {
		for _, v := range fv.Versions {
			for _, m := range reg.MethodNames(fv.Name, v) {
				class := "read"
				if daemon.IsMutation(m) {
					class = "mutation"
				}
				fmt.Fprintf(&b, "%s/v%d/%s %s\n", fv.Name, v, m, class)
			}
		}
	}
	checkGolden(t, filepath.Join("testdata", "audit-methods.golden"), b.String())
	for _, m := range []string{"SetInstanceInfo", "EnsureDead", "Remove", "MarkMachinesForRemoval", "UpdateApplicationsUnits",
		"PrepareContainerInterfaceInfo", "AddMachines", "Deploy", "ScaleApplication", "RemoveModel", "SetPasswords"} {
		if !daemon.IsMutation(m) {
			t.Errorf("%s is not a mutation", m)
		}
	}
	for _, m := range []string{"Life", "InstanceId", "ProvisioningInfo", "WatchModelMachines", "Next", "Stop", "Status", "ListModels", "ModelEntities", "DeploymentMode", "Settings", "Openness", ""} {
		if daemon.IsMutation(m) {
			t.Errorf("%s is a mutation", m)
		}
	}
}

// selfSigned makes a CA and a server certificate for names, written to
// dir; it returns the cert, key and CA file paths.
func selfSigned(t *testing.T, dir string, names ...string) (certFile, keyFile, caFile string) {
	t.Helper()
	caPEM, caKeyPEM, err := pki.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caBlock, _ := pem.Decode(caPEM)
	ca, err := x509.ParseCertificate(caBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	keyBlock, _ := pem.Decode(caKeyPEM)
	caKey, err := x509.ParsePKCS8PrivateKey(keyBlock.Bytes)
	if err != nil {
		ec, err2 := x509.ParseECPrivateKey(keyBlock.Bytes)
		if err2 != nil {
			t.Fatal(err)
		}
		caKey = ec
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "operator"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), DNSNames: names,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, caFile = filepath.Join(dir, "op.crt"), filepath.Join(dir, "op.key"), filepath.Join(dir, "ca.pem")
	for path, data := range map[string][]byte{
		certFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyFile:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		caFile:   caPEM,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile, caFile
}

// An operator's certificate without the juju-apiserver name is refused at
// start, with what to do.
func TestOperatorCertificateNeedsJujuAPIServerName(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, caFile := selfSigned(t, dir, "controller.example.com")
	cfg := daemon.Default(filepath.Join(dir, "data"))
	cfg.Addr, cfg.CertFile, cfg.KeyFile, cfg.CAFile = "127.0.0.1:0", certFile, keyFile, caFile
	d, err := daemon.Start(cfg)
	if err == nil {
		_ = d.Shutdown(context.Background())
		t.Fatal("a certificate without juju-apiserver was accepted")
	}
	want := "tls: --cert-file " + certFile + " has no subject alternative name juju-apiserver (it has: controller.example.com): " +
		"Juju agents verify the controller as juju-apiserver and could not connect; reissue it with DNS:juju-apiserver"
	if err.Error() != want {
		t.Errorf("error:\n%s\nwant:\n%s", err, want)
	}
	// With the name, it serves.
	certFile, keyFile, caFile = selfSigned(t, t.TempDir(), "juju-apiserver", "controller.example.com")
	d = start(t, func(c *daemon.Config) { c.CertFile, c.KeyFile, c.CAFile = certFile, keyFile, caFile })
	if got := servedCert(t, d, caFile); got.SerialNumber.Int64() != 7 {
		t.Errorf("served serial %v", got.SerialNumber)
	}
}

func servedCert(t *testing.T, d *daemon.Daemon, caFile string) *x509.Certificate {
	t.Helper()
	pool := x509.NewCertPool()
	var ca []byte
	if caFile != "" {
		ca, _ = os.ReadFile(caFile)
	} else {
		ca = []byte(d.Credentials().CACert)
	}
	pool.AppendCertsFromPEM(ca)
	conn, err := tls.Dial("tcp", d.Addr(), &tls.Config{RootCAs: pool, ServerName: "juju-apiserver"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

// rotate-cert renews the certificate with the same CA; a reload serves it
// without a restart, and the login rate changes live.
func TestRotateCertificateAndReload(t *testing.T) {
	var logBuf syncBuffer
	var dataDir string
	d := start(t, func(c *daemon.Config) {
		dataDir = c.DataDir
		c.Logger = slog.New(slog.NewJSONHandler(&logBuf, nil))
	})
	before := servedCert(t, d, "")
	notAfter, err := daemon.RotateCertificate(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if got := servedCert(t, d, ""); got.SerialNumber.Cmp(before.SerialNumber) != 0 {
		t.Fatal("the new certificate was served before the reload")
	}
	did, err := d.Reload(daemon.Live{LoginRateMax: 1, LoginRateRefill: time.Hour, Rebalance: true})
	if err != nil {
		t.Fatal(err)
	}
	after := servedCert(t, d, "") // verified against the CA of credentials.yaml
	if after.SerialNumber.Cmp(before.SerialNumber) == 0 || !after.NotAfter.Equal(notAfter) ||
		!slices.Equal(after.DNSNames, before.DNSNames) || after.Issuer.String() != before.Issuer.String() {
		t.Errorf("after the reload: serial %v (was %v), not after %v (want %v), names %v (were %v)",
			after.SerialNumber, before.SerialNumber, after.NotAfter, notAfter, after.DNSNames, before.DNSNames)
	}
	if !d.CertificateNotAfter().Equal(notAfter) {
		t.Errorf("CertificateNotAfter = %v, want %v", d.CertificateNotAfter(), notAfter)
	}
	want := []string{"login-rate-max 0 -> 1", "login-rate-refill 2ms -> 1h0m0s",
		fmt.Sprintf("serving a new certificate (serial %s, expires %s)", after.SerialNumber.Text(16), notAfter.UTC().Format(time.RFC3339))}
	if !slices.Equal(did, want) {
		t.Errorf("Reload did %q\nwant %q", did, want)
	}
	// The controller agent's connections still verify; the bucket now
	// holds one login.
	loginController(t, d, "")
	c := dial(t, d, "")
	a := d.Credentials().ControllerAgent
	_, err = c.LoginAgent(ctxT(t), a.Tag, a.Password, a.Nonce)
	wantErr(t, err, "", params.CodeTryAgain)
	// Nothing changed: nothing done.
	if did, err := d.Reload(daemon.Live{LoginRateMax: 1, LoginRateRefill: time.Hour, Rebalance: true}); err != nil || len(did) != 0 {
		t.Errorf("second Reload = %q, %v", did, err)
	}
	// One setting changed: only it is said to change.
	if did, err := d.Reload(daemon.Live{LoginRateMax: 2, LoginRateRefill: time.Hour, Rebalance: true}); err != nil || !slices.Equal(did, []string{"login-rate-max 1 -> 2"}) {
		t.Errorf("Reload of login-rate-max alone = %q, %v", did, err)
	}
	if did, err := d.Reload(daemon.Live{LoginRateMax: 2, LoginRateRefill: time.Hour}); err != nil || !slices.Equal(did, []string{"rebalance true -> false"}) {
		t.Errorf("Reload of rebalance alone = %q, %v", did, err)
	}
	// A data dir without a generated certificate: rotate-cert says why.
	if _, err := daemon.RotateCertificate(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no ca.crt in") {
		t.Errorf("RotateCertificate of an empty dir: %v", err)
	}
}

// A certificate about to expire is warned about at start.
func TestCertificateExpiryWarning(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, caFile := selfSigned(t, dir, "juju-apiserver") // valid one hour
	var logBuf syncBuffer
	start(t, func(c *daemon.Config) {
		c.CertFile, c.KeyFile, c.CAFile = certFile, keyFile, caFile
		c.Logger = slog.New(slog.NewJSONHandler(&logBuf, nil))
	})
	var warned bool
	for _, l := range jsonLogLines(t, logBuf.String()) {
		if l["msg"] == "the server certificate expires soon" && l["level"] == "WARN" && l["days-left"] == 0.0 &&
			strings.Contains(fmt.Sprint(l["action"]), "renew --cert-file "+certFile) {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no expiry warning:\n%s", logBuf.String())
	}
}
