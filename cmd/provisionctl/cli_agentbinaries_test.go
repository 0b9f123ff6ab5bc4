package main

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// add-agent-binaries --file uploads a tarball the controller then serves.
func TestCLIAgentBinariesUpload(t *testing.T) {
	e := startDaemon(t)
	data := make([]byte, 200<<10)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(data)
	sum := hex.EncodeToString(s[:])
	file := filepath.Join(t.TempDir(), "juju.tgz")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}

	var info struct {
		Version, URL, SHA256 string
		Size                 int64 `json:"size-bytes"`
		Stored               bool
	}
	_, r := e.mutate(t, &info, "add-agent-binaries", "3.3.0", "--os", "ubuntu", "--arch", "amd64", "--file", file)
	if info.Version != "3.3.0-ubuntu-amd64" || info.SHA256 != sum || info.Size != int64(len(data)) ||
		info.URL != "https://"+e.d.Addr()+"/tools/3.3.0-ubuntu-amd64" {
		t.Errorf("add-agent-binaries --file printed %+v", info)
	}
	if r.stderr != "" { // no terminal: no progress bar
		t.Errorf("stderr = %q", r.stderr)
	}
	r = e.ok(t, nil, "agent-binaries")
	if !strings.Contains(r.stdout, "3.3.0-ubuntu-amd64  204800  "+sum[:12]+"...  (uploaded)") {
		t.Errorf("agent-binaries:\n%s", r.stdout)
	}

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(e.d.Credentials().CACert))
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "juju-apiserver"}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(info.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || sha256.Sum256(got) != s {
		t.Errorf("GET %s = %s, %d bytes", info.URL, resp.Status, len(got))
	}

	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"3.4.0", "--os", "ubuntu", "--arch", "amd64", "--file", file, "--sha256", strings.Repeat("0", 64)}, 1,
			"ERROR " + file + " has sha256 " + sum + ", not " + strings.Repeat("0", 64)},
		{[]string{"3.4.0", "--file", file}, 2, "--file needs --os and --arch"},
		{[]string{"3.4.0", "--os", "ubuntu", "--arch", "amd64", "--file", file, "--url", "https://h/x"}, 2, "--file goes without --url and --size"},
		{[]string{"3.4.0", "--os", "ubuntu", "--arch", "amd64", "--file", filepath.Join(t.TempDir(), "none")}, 1, "no such file or directory"},
	} {
		r := e.run(t, append([]string{"add-agent-binaries"}, c.args...)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("add-agent-binaries %v: %s; want exit %d and %q", c.args, r, c.code, c.msg)
		}
	}
	// Other binaries for a version in the catalog: the daemon's refusal.
	other := filepath.Join(t.TempDir(), "other.tgz")
	if err := os.WriteFile(other, []byte("other"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = e.run(t, "add-agent-binaries", "3.3.0", "--os", "ubuntu", "--arch", "amd64", "--file", other)
	if r.code != 1 || !strings.Contains(r.stderr, "ERROR agent binaries 3.3.0-ubuntu-amd64 already exist with sha256 "+sum) {
		t.Errorf("other binaries: %s", r)
	}
}
