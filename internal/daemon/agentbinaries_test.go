package daemon_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// Agent binaries served by the controller: uploads (superusers, checked,
// bounded), downloads without credentials in Juju's URL forms, FindTools
// pointing at them, and entries fetched from their source URL.

func sha256Hex(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// httpsClient trusts the daemon's CA and verifies it as juju-apiserver.
func httpsClient(t *testing.T, d *daemon.Daemon) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(d.Credentials().CACert))
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: client.DefaultServerName}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

type httpReply struct {
	status int
	header http.Header
	body   []byte
}

func (r httpReply) jujuError(t *testing.T) params.Error {
	t.Helper()
	var e params.ErrorResult
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error == nil || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("reply %d %q is not Juju's JSON error body (%v)", r.status, r.body, err)
	}
	return *e.Error
}

func do(t *testing.T, hc *http.Client, method, u string, body io.Reader, mod func(*http.Request)) httpReply {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if mod != nil {
		mod(req)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return httpReply{resp.StatusCode, resp.Header, b}
}

func TestAgentBinariesUploadAndServe(t *testing.T) {
	const limit = 1 << 20
	f := newProvFixtureWith(t, func(c *daemon.Config) { c.MaxAgentBinarySize = limit })
	creds := f.D.Credentials()
	hc := httpsClient(t, f.D)
	base := "https://" + f.D.Addr()
	data := randomBytes(t, 300<<10)
	sum := sha256Hex(data)

	up, err := client.UploadAgentBinaries(ctxT(t), &creds, "3.4.0-ubuntu-amd64", bytes.NewReader(data), int64(len(data)), sum)
	if err != nil {
		t.Fatal(err)
	}
	if up.Version != "3.4.0-ubuntu-amd64" || up.SHA256 != sum || up.Size != int64(len(data)) ||
		up.URL != base+"/tools/3.4.0-ubuntu-amd64" {
		t.Errorf("upload answered %+v", up)
	}
	if rec, err := f.St.AgentBinaryRecord(t.Context(), "3.4.0-ubuntu-amd64"); err != nil || !rec.Stored || rec.SHA256 != sum {
		t.Errorf("catalog entry = %+v, %v", rec, err)
	}
	if _, err := os.Stat(filepath.Join(f.D.DataDir(), daemon.AgentBinariesDir, "3.4.0-ubuntu-amd64."+sum)); err != nil {
		t.Errorf("blob not under the data dir: %v", err)
	}

	// Downloads need no credentials, in every URL form; a series-form
	// version (what 2015 clients are told) is its OS's entry.
	for _, p := range []string{
		"/tools/3.4.0-ubuntu-amd64",
		"/model/" + f.Model + "/tools/3.4.0-ubuntu-amd64",
		"/environment/" + f.Model + "/tools/3.4.0-jammy-amd64",
		"/model/" + f.Model + "/tools/3.4.0-noble-amd64",
	} {
		r := do(t, hc, "GET", base+p, nil, nil)
		if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/x-tar-gz" ||
			r.header.Get("Content-Length") != strconv.Itoa(len(data)) || sha256Hex(r.body) != sum {
			t.Errorf("GET %s = %d %v (%d bytes)", p, r.status, r.header, len(r.body))
		}
	}

	// FindTools and Tools point at the controller's own URL, which serves
	// the binaries with the SHA-256 and size they announce.
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(f.St.UpdateModelConfig(t.Context(), f.Model, map[string]any{"agent-version": "3.4.0"}, nil))
	agent := rawLogin(t, f.D, f.Model, "machine-0", m0Password, m0Nonce)
	var ft struct {
		List []struct {
			Version, URL, SHA256 string
			Size                 int64
		} `json:"list"`
	}
	agent.must("Provisioner", 11, "FindTools", map[string]any{"number": "3.4.0", "os-type": "ubuntu", "arch": "amd64"}, &ft)
	var tools struct {
		Results []struct {
			Tools []struct {
				URL, SHA256 string
				Size        int64
			} `json:"tools"`
		} `json:"results"`
	}
	agent.must("Provisioner", 11, "Tools", map[string]any{"entities": []map[string]string{{"tag": "machine-0"}}}, &tools)
	if len(ft.List) != 1 || len(tools.Results) != 1 || len(tools.Results[0].Tools) != 1 {
		t.Fatalf("FindTools = %+v, Tools = %+v", ft, tools)
	}
	for _, u := range []string{ft.List[0].URL, tools.Results[0].Tools[0].URL} {
		if u != base+"/model/"+f.Model+"/tools/3.4.0-ubuntu-amd64" {
			t.Errorf("agents are sent %s", u)
		}
		r := do(t, hc, "GET", u, nil, nil)
		if r.status != 200 || sha256Hex(r.body) != ft.List[0].SHA256 || int64(len(r.body)) != ft.List[0].Size {
			t.Errorf("GET %s = %d, %d bytes; FindTools said %s, %d", u, r.status, len(r.body), ft.List[0].SHA256, ft.List[0].Size)
		}
	}

	// Download errors: Juju's JSON error bodies.
	for _, c := range []struct {
		path, code string
		status     int
	}{
		{"/tools/9.9.9-ubuntu-amd64", params.CodeNotFound, 404},
		{"/tools/not-a-version", params.CodeBadRequest, 400},
		{"/model/00000000-0000-0000-0000-000000000000/tools/3.4.0-ubuntu-amd64", params.CodeNotFound, 404},
		{"/tools/3.3.0-ubuntu-amd64", params.CodeNotFound, 404}, // catalogued, neither stored nor with a URL
	} {
		r := do(t, hc, "GET", base+c.path, nil, nil)
		if e := r.jujuError(t); r.status != c.status || e.Code != c.code {
			t.Errorf("GET %s = %d %+v; want %d %q", c.path, r.status, e, c.status, c.code)
		}
	}

	// Upload refusals; none stores anything.
	post := func(query url.Values, body []byte, mod func(*http.Request)) httpReply {
		return do(t, hc, "POST", base+"/model/"+f.Model+"/tools?"+query.Encode(), bytes.NewReader(body), func(r *http.Request) {
			r.Header.Set("Content-Type", "application/x-tar-gz")
			r.SetBasicAuth("user-admin", creds.AdminPassword)
			if mod != nil {
				mod(r)
			}
		})
	}
	q := func(v, sum string) url.Values { return url.Values{"binaryVersion": {v}, "sha256": {sum}} }
	other := randomBytes(t, 1000)
	_, err = f.St.AddUser(t.Context(), "bob", "Bob", "bob-password-long-enough", "login")
	must(err)
	for _, c := range []struct {
		name   string
		query  url.Values
		body   []byte
		mod    func(*http.Request)
		status int
		msg    string
	}{
		{"no credentials", q("3.5.0-ubuntu-amd64", sha256Hex(other)), other,
			func(r *http.Request) { r.Header.Del("Authorization") }, 401, "uploading agent binaries needs a superuser's name and password"},
		{"wrong password", q("3.5.0-ubuntu-amd64", sha256Hex(other)), other,
			func(r *http.Request) { r.SetBasicAuth("admin", "nope") }, 401, "invalid entity name or password"},
		{"not a superuser", q("3.5.0-ubuntu-amd64", sha256Hex(other)), other,
			func(r *http.Request) { r.SetBasicAuth("bob", "bob-password-long-enough") }, 403, "permission denied"},
		{"no version", url.Values{"sha256": {sha256Hex(other)}}, other, nil, 400, "expected binaryVersion argument"},
		{"bad version", q("3.5", sha256Hex(other)), other, nil, 400, `invalid agent binaries version "3.5"`},
		{"content type", q("3.5.0-ubuntu-amd64", sha256Hex(other)), other,
			func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, 400,
			"expected Content-Type: application/x-tar-gz, got: text/plain"},
		{"no hash", q("3.5.0-ubuntu-amd64", ""), other, nil, 400, `sha256 "" is not 64 lowercase hex digits`},
		{"wrong hash", q("3.5.0-ubuntu-amd64", sum), other, nil, 400,
			"agent binaries 3.5.0-ubuntu-amd64: blob does not match: sha256 " + sha256Hex(other) + ", want " + sum},
		{"empty", q("3.5.0-ubuntu-amd64", sha256Hex(nil)), nil, nil, 400, "no agent binaries uploaded"},
		{"too large", q("3.5.0-ubuntu-amd64", sha256Hex(other)), other,
			func(r *http.Request) {
				r.ContentLength = limit + 1
				r.Body = io.NopCloser(io.LimitReader(rand.Reader, limit+1))
			},
			413, "agent binaries of 1048577 bytes exceed the limit of 1048576 bytes"},
		{"other binaries of a version", q("3.4.0-ubuntu-amd64", sha256Hex(other)), other, nil, 409,
			"agent binaries 3.4.0-ubuntu-amd64 already exist with sha256 " + sum + " and size " + strconv.Itoa(len(data))},
		{"unknown model", q("3.5.0-ubuntu-amd64", sha256Hex(other)), other, func(r *http.Request) {
			r.URL.Path = "/model/00000000-0000-0000-0000-000000000000/tools"
		}, 404, `model "00000000-0000-0000-0000-000000000000" not found`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := post(c.query, c.body, c.mod)
			if r.status != c.status {
				t.Fatalf("status %d %q; want %d", r.status, r.body, c.status)
			}
			msg := strings.TrimSpace(string(r.body))
			if r.status != 401 && r.status != 403 {
				msg = r.jujuError(t).Message
			}
			if msg != c.msg {
				t.Errorf("message %q; want %q", msg, c.msg)
			}
		})
	}
	if _, err := f.St.AgentBinaryRecord(t.Context(), "3.5.0-ubuntu-amd64"); err == nil {
		t.Error("a refused upload left a catalog entry")
	}
	entries, err := os.ReadDir(filepath.Join(f.D.DataDir(), daemon.AgentBinariesDir))
	if err != nil || len(entries) != 1 {
		t.Errorf("the store holds %d files (%v); want the one uploaded", len(entries), err)
	}

	// The same binaries again are accepted (a retry after a lost answer).
	if r := post(q("3.4.0-ubuntu-amd64", sum), data, nil); r.status != 200 {
		t.Errorf("same upload again = %d %s", r.status, r.body)
	}
}

// An entry catalogued with a source URL is fetched on the first download,
// checked, stored, and served from the controller afterwards.
func TestAgentBinariesFetchedFromSource(t *testing.T) {
	data := randomBytes(t, 64<<10)
	var hits int
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		switch r.URL.Path {
		case "/good.tgz", "/bad.tgz":
			_, _ = w.Write(data)
		default:
			http.NotFound(w, r)
		}
	}))
	defer src.Close()
	d := start(t, nil)
	admin := loginAdmin(t, d, "")
	add := func(v, path, sum string) {
		t.Helper()
		var res params.AgentBinaryInfo
		if err := admin.Call(ctxT(t), "ModelAdmin", 1, "", "AddAgentBinaries", params.AddAgentBinariesArgs{
			Version: v, OS: "ubuntu", Arch: "amd64", URL: src.URL + path, SHA256: sum, Size: int64(len(data))}, &res); err != nil {
			t.Fatal(err)
		}
	}
	add("3.3.0", "/good.tgz", sha256Hex(data))
	add("3.3.1", "/bad.tgz", strings.Repeat("0", 64))
	add("3.3.2", "/missing.tgz", sha256Hex(data))
	hc := httpsClient(t, d)
	base := "https://" + d.Addr() + "/tools/"
	for range 2 {
		r := do(t, hc, "GET", base+"3.3.0-ubuntu-amd64", nil, nil)
		if r.status != 200 || !bytes.Equal(r.body, data) {
			t.Fatalf("GET = %d (%d bytes)", r.status, len(r.body))
		}
	}
	if hits != 1 {
		t.Errorf("the source was asked %d times; want once", hits)
	}
	if rec, err := d.State().AgentBinaryRecord(t.Context(), "3.3.0-ubuntu-amd64"); err != nil || !rec.Stored {
		t.Errorf("after the fetch: %+v, %v", rec, err)
	}
	for _, v := range []string{"3.3.1-ubuntu-amd64", "3.3.2-ubuntu-amd64"} {
		r := do(t, hc, "GET", base+v, nil, nil)
		if r.status != 500 || !strings.Contains(r.jujuError(t).Message, "fetching agent binaries "+v) {
			t.Errorf("GET %s = %d %s", v, r.status, r.body)
		}
		if rec, err := d.State().AgentBinaryRecord(t.Context(), v); err != nil || rec.Stored {
			t.Errorf("%s after a failed fetch: %+v, %v", v, rec, err)
		}
	}
}

// A client that stops mid-upload leaves nothing behind.
func TestAgentBinariesUploadCut(t *testing.T) {
	d := start(t, nil)
	creds := d.Credentials()
	ctx, cancel := context.WithCancel(ctxT(t))
	data := randomBytes(t, 256<<10)
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write(data[:100<<10])
		cancel()
		pw.CloseWithError(errors.New("client gone"))
	}()
	_, err := client.UploadAgentBinaries(ctx, &creds, "3.3.0-ubuntu-amd64", pr, int64(len(data)), sha256Hex(data))
	if err == nil {
		t.Fatal("a cut upload succeeded")
	}
	if _, err := d.State().AgentBinaryRecord(t.Context(), "3.3.0-ubuntu-amd64"); err == nil {
		t.Error("a cut upload left a catalog entry")
	}
}
