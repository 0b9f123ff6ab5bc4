package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	jujuerrors "github.com/juju/errors"

	"github.com/provisiond/provisiond/environ"
	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/internal/blobstore"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// Agent binaries served by the controller, as Juju's apiserver serves
// them (its tools handlers):
//
//	GET  /model/<uuid>/tools/<version>        no credentials: a machine just
//	GET  /tools/<version>                     started has none yet
//	GET  /environment/<uuid>/tools/<version>  the 2015 form (Provisioner v0/v1 URLs)
//	POST /model/<uuid>/tools?binaryVersion=V&sha256=HEX
//	POST /tools?binaryVersion=V&sha256=HEX    superusers (HTTP basic auth), as /backup
//
// A download answers 200 with the tarball, Content-Type
// application/x-tar-gz and its Content-Length; a version in a series
// form ("3.3.0-jammy-amd64", what 2015 clients are told) is the catalog
// entry of its OS ("3.3.0-ubuntu-amd64") when there is no entry of its
// own. A catalog entry that is not stored yet but has a source URL is
// fetched once, checked against its SHA-256 and size, stored, then served.
//
// An upload needs Content-Type application/x-tar-gz and a Content-Length
// of at most Config.MaxAgentBinarySize; the body streams into the blob
// store (never whole in memory) and is kept only if its size and SHA-256
// are the ones given. It answers Juju's ToolsResult ({"tools": [...]})
// with the URL agents are given. Errors are Juju's HTTP error bodies:
// {"error": {"message", "code"}} as application/json.
//
// Blobs are named VERSION.SHA256 (content-addressed): an upload can never
// replace the binaries of an entry agents already use, and a refused one
// removes only its own blob.

// AgentBinariesDir is the blob store's directory in the data dir.
const AgentBinariesDir = "agent-binaries"

// DefaultMaxAgentBinarySize bounds an upload (Juju's agent tarballs are
// some 30 to 60 MiB).
const DefaultMaxAgentBinarySize = 1 << 30

// agentBinaryType is the content type of agent binaries, up and down.
const agentBinaryType = "application/x-tar-gz"

// fetchTimeout bounds fetching one catalog entry from its source URL.
const fetchTimeout = 10 * time.Minute

type agentBinaries struct {
	d     *Daemon
	store blobstore.Store
	max   int64
	fetch *http.Client

	mu       sync.Mutex
	fetching map[string]*sync.Mutex // per version: one fetch at a time
	busy     map[string]int         // blobs being stored, not to be removed (agentbinaries_peers.go)

	// On a shared store (agentbinaries_peers.go): the client of the other
	// daemons; follow's stop.
	peers      *http.Client
	stopFollow context.CancelFunc
	followWG   sync.WaitGroup
}

// serveAgentBinaries opens the blob store under the data dir and adds the
// agent binaries routes to mux.
func (d *Daemon) serveAgentBinaries(mux *http.ServeMux) error {
	store, err := blobstore.NewFS(filepath.Join(d.cfg.DataDir, AgentBinariesDir))
	if err != nil {
		return fmt.Errorf("agent binaries store: %w", err)
	}
	a := &agentBinaries{d: d, store: store, max: d.cfg.MaxAgentBinarySize,
		fetch: &http.Client{Timeout: fetchTimeout}, fetching: map[string]*sync.Mutex{}, busy: map[string]int{}}
	if a.max <= 0 {
		a.max = DefaultMaxAgentBinarySize
	}
	for _, p := range []string{"/tools/{version}", "/model/{uuid}/tools/{version}", "/environment/{uuid}/tools/{version}"} {
		mux.HandleFunc("GET "+p, a.download)
	}
	for _, p := range []string{"/tools", "/model/{uuid}/tools"} {
		mux.HandleFunc("POST "+p, a.upload)
	}
	d.binaries = a
	return nil
}

// blobName is where the binaries of b are in the blob store.
func blobName(b state.AgentBinary) string { return b.Version + "." + b.SHA256 }

// httpError writes Juju's HTTP error body.
func httpError(w http.ResponseWriter, status int, code, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(params.ErrorResult{Error: &params.Error{Message: fmt.Sprintf(format, args...), Code: code}})
}

// modelOK checks the path's model, if it names one.
func (a *agentBinaries) modelOK(w http.ResponseWriter, r *http.Request) bool {
	uuid := r.PathValue("uuid")
	if uuid == "" {
		return true
	}
	if _, err := a.d.state.Model(r.Context(), uuid); err != nil {
		if jujuerrors.Is(err, jujuerrors.NotFound) || jujuerrors.Is(err, jujuerrors.NotValid) {
			httpError(w, http.StatusNotFound, params.CodeNotFound, "model %q not found", uuid)
		} else {
			httpError(w, http.StatusInternalServerError, "", "cannot read model: %v", err)
		}
		return false
	}
	return true
}

// entry finds the catalog entry serving version: its own, or for a
// series-form version that of its OS.
func (a *agentBinaries) entry(version string) (state.AgentBinary, error) {
	v, err := environ.ParseBinary(version)
	if err != nil {
		return state.AgentBinary{}, jujuerrors.NewBadRequest(nil, "error parsing version: "+err.Error())
	}
	b, err := a.d.state.AgentBinaryRecord(context.Background(), v.String())
	if jujuerrors.Is(err, jujuerrors.NotFound) {
		if os := environ.SeriesOS(v.Release); os != "" {
			v.Release = os
			b, err = a.d.state.AgentBinaryRecord(context.Background(), v.String())
		}
	}
	if jujuerrors.Is(err, jujuerrors.NotFound) {
		return state.AgentBinary{}, jujuerrors.NotFoundf("agent binaries %s", version)
	}
	return b, err
}

func (a *agentBinaries) download(w http.ResponseWriter, r *http.Request) {
	if !a.modelOK(w, r) {
		return
	}
	peer := r.Header.Get(peerHeader) != "" // another daemon: only what this one holds
	b, err := a.entry(r.PathValue("version"))
	if err == nil && !b.Stored {
		if peer {
			err = jujuerrors.NotFoundf("agent binaries %s on this daemon", b.Version)
		} else {
			b, err = a.fetchEntry(r.Context(), b)
		}
	}
	var f io.ReadCloser
	var size int64
	if err == nil {
		f, size, err = a.store.Open(r.Context(), blobName(b))
		if errors.Is(err, blobstore.ErrNotFound) && a.peers != nil && !peer {
			// Not copied here yet (agentbinaries_peers.go): from a peer now.
			if err = a.fetchFromPeers(r.Context(), b); err == nil {
				f, size, err = a.store.Open(r.Context(), blobName(b))
			} else {
				a.d.log.Warn("agent binaries download: not on this daemon, and no peer gave them", "version", b.Version, "err", err)
				err = blobstore.ErrNotFound
			}
		}
		if errors.Is(err, blobstore.ErrNotFound) {
			err = jujuerrors.NotFoundf("agent binaries %s in the controller's store", b.Version)
		}
	}
	switch {
	case jujuerrors.Is(err, jujuerrors.BadRequest):
		httpError(w, http.StatusBadRequest, params.CodeBadRequest, "%v", err)
		return
	case jujuerrors.Is(err, jujuerrors.NotFound):
		httpError(w, http.StatusNotFound, params.CodeNotFound, "%v", err)
		return
	case err != nil:
		a.d.log.Error("agent binaries download failed", "version", r.PathValue("version"), "err", err)
		httpError(w, http.StatusInternalServerError, "", "%v", err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", agentBinaryType)
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	if _, err := io.Copy(a.d.movingWriter(w), f); err != nil {
		// The status line is out; the short body tells the client.
		a.d.log.Debug("agent binaries download cut short", "version", b.Version, "err", err)
	}
}

// fetchEntry fetches an entry that is not stored yet from its source URL
// into the store (checked against its SHA-256 and size) and marks it
// stored. Concurrent downloads of one version wait for one fetch.
func (a *agentBinaries) fetchEntry(ctx context.Context, b state.AgentBinary) (state.AgentBinary, error) {
	if b.URL == "" {
		return b, jujuerrors.NotFoundf("agent binaries %s in the controller's store", b.Version)
	}
	unlock := a.versionLock(b.Version)
	defer unlock()
	if cur, err := a.d.state.AgentBinaryRecord(ctx, b.Version); err == nil && cur.Stored {
		return cur, nil // fetched while this one waited
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.URL, nil)
	if err != nil {
		return b, err
	}
	a.d.log.Info("fetching agent binaries", "version", b.Version, "url", b.URL)
	resp, err := a.fetch.Do(req)
	if err != nil {
		return b, fmt.Errorf("fetching agent binaries %s: %w", b.Version, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return b, fmt.Errorf("fetching agent binaries %s from %s: %s", b.Version, b.URL, resp.Status)
	}
	done := a.markBusy(blobName(b))
	defer done()
	if err := a.store.Put(ctx, blobName(b), resp.Body, b.Size, b.SHA256); err != nil {
		return b, fmt.Errorf("fetching agent binaries %s from %s: %w", b.Version, b.URL, err)
	}
	if err := a.d.state.AddStoredAgentBinary(ctx, b); err != nil {
		return b, err
	}
	b.Stored = true
	return b, nil
}

func (a *agentBinaries) upload(w http.ResponseWriter, r *http.Request) {
	u, ok := a.d.superuser(w, r, "tools", "uploading agent binaries")
	if !ok || !a.modelOK(w, r) {
		return
	}
	q := r.URL.Query()
	bad := func(format string, args ...any) {
		httpError(w, http.StatusBadRequest, params.CodeBadRequest, format, args...)
	}
	version := q.Get("binaryVersion")
	if version == "" {
		bad("expected binaryVersion argument")
		return
	}
	v, err := environ.ParseBinary(version)
	if err != nil {
		bad("invalid agent binaries version %q", version)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != agentBinaryType {
		bad("expected Content-Type: %s, got: %v", agentBinaryType, ct)
		return
	}
	b := state.AgentBinary{Version: v.String(), SHA256: strings.ToLower(q.Get("sha256")), Size: r.ContentLength, Stored: true}
	switch {
	case r.ContentLength < 0:
		httpError(w, http.StatusLengthRequired, params.CodeBadRequest, "agent binaries uploads need a Content-Length")
		return
	case r.ContentLength == 0:
		bad("no agent binaries uploaded")
		return
	case r.ContentLength > a.max:
		httpError(w, http.StatusRequestEntityTooLarge, params.CodeBadRequest,
			"agent binaries of %d bytes exceed the limit of %d bytes", r.ContentLength, a.max)
		return
	}
	if err := state.ValidateAgentBinary(b); err != nil {
		bad("%v", err)
		return
	}
	// Refuse before reading the body when the catalog has the version
	// with other binaries (AddStoredAgentBinary checks again, atomically).
	if cur, err := a.d.state.AgentBinaryRecord(r.Context(), b.Version); err == nil && (cur.SHA256 != b.SHA256 || cur.Size != b.Size) {
		httpError(w, http.StatusConflict, params.CodeAlreadyExists,
			"agent binaries %s already exist with sha256 %s and size %d", b.Version, cur.SHA256, cur.Size)
		return
	}
	body := movingReader(w, http.MaxBytesReader(w, r.Body, a.max))
	done := a.markBusy(blobName(b))
	defer done()
	if err := a.store.Put(r.Context(), blobName(b), body, b.Size, b.SHA256); err != nil {
		if errors.Is(err, blobstore.ErrMismatch) {
			bad("agent binaries %s: %v", b.Version, err)
		} else {
			a.d.log.Error("agent binaries upload failed", "version", b.Version, "err", err)
			httpError(w, http.StatusInternalServerError, "", "storing agent binaries %s: %v", b.Version, err)
		}
		return
	}
	if err := a.d.state.AddStoredAgentBinary(r.Context(), b); err != nil {
		// Another upload of this version with other binaries won: its blob
		// has another name, so this one removes only its own.
		_ = a.store.Remove(context.WithoutCancel(r.Context()), blobName(b))
		e := facade.ServerError(err)
		status := http.StatusInternalServerError
		if e.Code == params.CodeAlreadyExists {
			status = http.StatusConflict
		}
		httpError(w, status, e.Code, "%s", e.Message)
		return
	}
	a.d.log.Info("agent binaries uploaded", "user", u.Name, "version", b.Version, "size", b.Size)
	root := "https://" + r.Host
	if uuid := r.PathValue("uuid"); uuid != "" {
		root += "/model/" + uuid
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(params.ToolsResult{Tools: []params.Tools{{
		Version: b.Version, URL: root + "/tools/" + b.Version, SHA256: b.SHA256, Size: b.Size}}})
}

// DataDir is the daemon's data dir.
func (d *Daemon) DataDir() string { return d.cfg.DataDir }

// Transfers of agent binaries take longer than the HTTP server's whole-
// request deadlines allow on a slow link; they only have to keep moving.
// movingReader and movingWriter push the connection's read or write
// deadline out before each read or write, so a transfer fails only when
// it stalls for that long.

func movingReader(w http.ResponseWriter, r io.Reader) io.Reader {
	rc := http.NewResponseController(w)
	return readerFunc(func(p []byte) (int, error) {
		_ = rc.SetReadDeadline(time.Now().Add(httpReadTimeout))
		return r.Read(p)
	})
}

func (d *Daemon) movingWriter(w http.ResponseWriter) io.Writer {
	rc := http.NewResponseController(w)
	timeout := d.cfg.WriteTimeout
	return writerFunc(func(p []byte) (int, error) {
		if timeout > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(timeout))
		}
		return w.Write(p)
	})
}
