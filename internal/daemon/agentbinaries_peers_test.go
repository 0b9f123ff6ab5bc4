package daemon_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// blobPath is where a daemon keeps its copy of version's binaries.
func blobPath(dataDir, version, sum string) string {
	return filepath.Join(dataDir, daemon.AgentBinariesDir, version+"."+sum)
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// TestAgentBinariesOnEveryDaemon: binaries uploaded through one daemon of
// an etcd controller are copied to the others as soon as they see the
// catalog entry, and a daemon asked before it has a copy fetches one from
// a peer first; so every daemon serves them, and they survive the daemon
// that took the upload. Removing the entry removes every daemon's copy.
func TestAgentBinariesOnEveryDaemon(t *testing.T) {
	etcd := etcdtest.New(t) // outlives a, which stops half-way
	a := provisiondtest.Start(t, provisiondtest.WithEtcd(etcd.Endpoints(), "/binaries/"))
	b := provisiondtest.Start(t, provisiondtest.Join(a))
	data := randomBytes(t, 200<<10)
	sum := sha256Hex(data)
	const version = "3.4.1-ubuntu-amd64"

	creds := *a.Credentials()
	creds.APIAddresses = []string{a.Addr()} // through a only
	if _, err := client.UploadAgentBinaries(ctxT(t), &creds, version, bytes.NewReader(data), int64(len(data)), sum); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b to copy the binaries uploaded through a", func() bool { return exists(blobPath(b.DataDir(), version, sum)) })

	// A third daemon joining later copies them at start; asked at once, it
	// fetches them from a peer if it has not yet.
	c := provisiondtest.Start(t, provisiondtest.Join(a))
	hc := httpsClient(t, testkit.Daemon(c))
	r := do(t, hc, "GET", "https://"+c.Addr()+"/tools/"+version, nil, nil)
	if r.status != http.StatusOK || sha256Hex(r.body) != sum {
		t.Fatalf("GET through a daemon that joined after the upload: %d (%d bytes)", r.status, len(r.body))
	}

	// The daemon that took the upload goes: the others still serve them.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*provisiondtest.Server{b, c} {
		r := do(t, hc, "GET", "https://"+s.Addr()+"/tools/"+version, nil, nil)
		if r.status != http.StatusOK || sha256Hex(r.body) != sum {
			t.Errorf("GET through %s after the uploader stopped: %d (%d bytes)", s.Addr(), r.status, len(r.body))
		}
	}

	// A peer's request is answered from what the daemon holds only: an
	// entry not stored yet is not fetched from its source for it (nor
	// from another daemon), so no request goes round the daemons.
	notStored := state.AgentBinary{Version: "3.4.9-ubuntu-amd64", SHA256: sum, Size: int64(len(data)), URL: "http://127.0.0.1:1/never"}
	if err := testkit.Daemon(b).State().AddAgentBinary(t.Context(), notStored); err != nil {
		t.Fatal(err)
	}
	r = do(t, hc, "GET", "https://"+b.Addr()+"/tools/"+notStored.Version, nil, func(req *http.Request) {
		req.Header.Set("X-Provisiond-Peer", "test")
	})
	if r.status != http.StatusNotFound {
		t.Errorf("a peer's GET of an entry not stored: %d %s, want 404", r.status, r.body)
	}

	// Removing the entry removes every daemon's copy.
	admin := client.NewModelAdmin(b.Admin(t, ""))
	if _, err := admin.RemoveAgentBinaries(ctxT(t), params.RemoveAgentBinariesArgs{Version: version}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*provisiondtest.Server{b, c} {
		waitFor(t, "the copy of a removed entry to go from "+s.Addr(), func() bool { return !exists(blobPath(s.DataDir(), version, sum)) })
	}
}

// TestRemovedAgentBinariesLeaveNoFile: on one daemon, removing a catalog
// entry removes its tarball from the data dir.
func TestRemovedAgentBinariesLeaveNoFile(t *testing.T) {
	s := provisiondtest.Start(t)
	data := randomBytes(t, 64<<10)
	sum := sha256Hex(data)
	const version = "3.4.2-ubuntu-amd64"
	if _, err := client.UploadAgentBinaries(ctxT(t), s.Credentials(), version, bytes.NewReader(data), int64(len(data)), sum); err != nil {
		t.Fatal(err)
	}
	if !exists(blobPath(s.DataDir(), version, sum)) {
		t.Fatal("no tarball in the data dir after the upload")
	}
	admin := client.NewModelAdmin(s.Admin(t, ""))
	if _, err := admin.RemoveAgentBinaries(ctxT(t), params.RemoveAgentBinariesArgs{Version: version}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the removed entry's tarball to go", func() bool { return !exists(blobPath(s.DataDir(), version, sum)) })
}

// TestShutdownWithEtcdGone: a daemon whose etcd has gone still shuts
// down, the one waiting in the compactor election included (etcd's
// campaign, cut short, resigns with no deadline of its own until the
// store closes).
func TestShutdownWithEtcdGone(t *testing.T) {
	etcd := etcdtest.New(t)
	a := provisiondtest.Start(t, provisiondtest.WithEtcd(etcd.Endpoints(), "/gone/"))
	b := provisiondtest.Start(t, provisiondtest.Join(a)) // campaigns behind a
	etcd.Stop(0)
	for _, s := range []*provisiondtest.Server{b, a} {
		done := make(chan error, 1)
		go func() { done <- s.Close() }()
		select {
		case <-done: // an error is expected: the store is unreachable
		case <-time.After(2 * time.Minute):
			t.Fatalf("the daemon at %s did not shut down with its etcd gone", s.Addr())
		}
	}
}
