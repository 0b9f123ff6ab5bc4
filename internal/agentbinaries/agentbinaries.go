package agentbinaries

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
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
	"github.com/provisiond/provisiond/watcher"
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
// of at most Config.MaxSize; the body streams into the blob
// store (never whole in memory) and is kept only if its size and SHA-256
// are the ones given. It answers Juju's ToolsResult ({"tools": [...]})
// with the URL agents are given. Errors are Juju's HTTP error bodies:
// {"error": {"message", "code"}} as application/json.
//
// Blobs are named VERSION.SHA256 (content-addressed): an upload can never
// replace the binaries of an entry agents already use, and a refused one
// removes only its own blob.

// DirName is the blob store's directory in a daemon's data dir.
const DirName = "agent-binaries"

// DefaultMaxSize bounds an upload (Juju's agent tarballs are some 30 to
// 60 MiB).
const DefaultMaxSize = 1 << 30

// agentBinaryType is the content type of agent binaries, up and down.
const agentBinaryType = "application/x-tar-gz"

// fetchTimeout bounds fetching one catalog entry from its source URL.
const fetchTimeout = 10 * time.Minute

// Config is what a Server needs of the daemon.
type Config struct {
	// Dir is the blob store's directory (the data dir's agent-binaries).
	Dir string
	// State holds the catalog; Hub tells of its changes (follow).
	State *state.State
	Hub   *watcher.Hub
	// Logger defaults to discarding.
	Logger *slog.Logger
	// MaxSize bounds an upload in bytes (0: DefaultMaxSize).
	MaxSize int64
	// Shared says the controller has several daemons on a shared store:
	// each keeps its own copies and copies what it lacks from the others
	// (peers.go), ServerID naming it among them and CACertPEM the
	// controller's CA, which every daemon's certificate is signed by.
	Shared    bool
	ServerID  string
	CACertPEM []byte
	// Superuser checks an upload's HTTP basic auth for a superuser; on
	// failure it has answered (path and what name the endpoint and what
	// needs it).
	Superuser func(w http.ResponseWriter, r *http.Request, path, what string) (state.User, bool)
	// Writer is a download's writer: w, whose write deadline moves out
	// before each write. ReadTimeout is the read deadline an upload's
	// body gets before each read.
	Writer      func(w http.ResponseWriter) io.Writer
	ReadTimeout time.Duration
}

// Server serves the agent binaries of a controller from one daemon's
// blob store, and keeps that store in line with the catalog (Start).
type Server struct {
	cfg   Config
	log   *slog.Logger
	state *state.State
	store blobstore.Store
	max   int64
	fetch *http.Client

	mu       sync.Mutex
	fetching map[string]*sync.Mutex // per version: one fetch at a time
	busy     map[string]int         // blobs being stored, not to be removed (peers.go)

	// On a shared store (peers.go): the client of the other daemons;
	// follow's stop.
	peers      *http.Client
	stopFollow context.CancelFunc
	followWG   sync.WaitGroup
}

// New opens the blob store in cfg.Dir and adds the agent binaries routes
// to mux.
func New(mux *http.ServeMux, cfg Config) (*Server, error) {
	store, err := blobstore.NewFS(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("agent binaries store: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Server{cfg: cfg, log: log, state: cfg.State, store: store, max: cfg.MaxSize,
		fetch: &http.Client{Timeout: fetchTimeout}, fetching: map[string]*sync.Mutex{}, busy: map[string]int{}}
	if a.max <= 0 {
		a.max = DefaultMaxSize
	}
	for _, p := range []string{"/tools/{version}", "/model/{uuid}/tools/{version}", "/environment/{uuid}/tools/{version}"} {
		mux.HandleFunc("GET "+p, a.download)
	}
	for _, p := range []string{"/tools", "/model/{uuid}/tools"} {
		mux.HandleFunc("POST "+p, a.upload)
	}
	return a, nil
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
func (a *Server) modelOK(w http.ResponseWriter, r *http.Request) bool {
	uuid := r.PathValue("uuid")
	if uuid == "" {
		return true
	}
	if _, err := a.state.Model(r.Context(), uuid); err != nil {
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
func (a *Server) entry(version string) (state.AgentBinary, error) {
	v, err := environ.ParseBinary(version)
	if err != nil {
		return state.AgentBinary{}, jujuerrors.NewBadRequest(nil, "error parsing version: "+err.Error())
	}
	b, err := a.state.AgentBinaryRecord(context.Background(), v.String())
	if jujuerrors.Is(err, jujuerrors.NotFound) {
		if os := environ.SeriesOS(v.Release); os != "" {
			v.Release = os
			b, err = a.state.AgentBinaryRecord(context.Background(), v.String())
		}
	}
	if jujuerrors.Is(err, jujuerrors.NotFound) {
		return state.AgentBinary{}, jujuerrors.NotFoundf("agent binaries %s", version)
	}
	return b, err
}

func (a *Server) download(w http.ResponseWriter, r *http.Request) {
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
			// Not copied here yet (peers.go): from a peer now.
			if err = a.fetchFromPeers(r.Context(), b); err == nil {
				f, size, err = a.store.Open(r.Context(), blobName(b))
			} else {
				a.log.Warn("agent binaries download: not on this daemon, and no peer gave them", "version", b.Version, "err", err)
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
		a.log.Error("agent binaries download failed", "version", r.PathValue("version"), "err", err)
		httpError(w, http.StatusInternalServerError, "", "%v", err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", agentBinaryType)
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	if _, err := io.Copy(a.cfg.Writer(w), f); err != nil {
		// The status line is out; the short body tells the client.
		a.log.Debug("agent binaries download cut short", "version", b.Version, "err", err)
	}
}

// fetchEntry fetches an entry that is not stored yet from its source URL
// into the store (checked against its SHA-256 and size) and marks it
// stored. Concurrent downloads of one version wait for one fetch.
func (a *Server) fetchEntry(ctx context.Context, b state.AgentBinary) (state.AgentBinary, error) {
	if b.URL == "" {
		return b, jujuerrors.NotFoundf("agent binaries %s in the controller's store", b.Version)
	}
	unlock := a.versionLock(b.Version)
	defer unlock()
	if cur, err := a.state.AgentBinaryRecord(ctx, b.Version); err == nil && cur.Stored {
		return cur, nil // fetched while this one waited
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.URL, nil)
	if err != nil {
		return b, err
	}
	a.log.Info("fetching agent binaries", "version", b.Version, "url", b.URL)
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
	if err := a.state.AddStoredAgentBinary(ctx, b); err != nil {
		return b, err
	}
	b.Stored = true
	return b, nil
}

func (a *Server) upload(w http.ResponseWriter, r *http.Request) {
	u, ok := a.cfg.Superuser(w, r, "tools", "uploading agent binaries")
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
	if cur, err := a.state.AgentBinaryRecord(r.Context(), b.Version); err == nil && (cur.SHA256 != b.SHA256 || cur.Size != b.Size) {
		httpError(w, http.StatusConflict, params.CodeAlreadyExists,
			"agent binaries %s already exist with sha256 %s and size %d", b.Version, cur.SHA256, cur.Size)
		return
	}
	body := &movingReader{rc: http.NewResponseController(w), r: http.MaxBytesReader(w, r.Body, a.max), timeout: a.cfg.ReadTimeout}
	done := a.markBusy(blobName(b))
	defer done()
	if err := a.store.Put(r.Context(), blobName(b), body, b.Size, b.SHA256); err != nil {
		if errors.Is(err, blobstore.ErrMismatch) {
			bad("agent binaries %s: %v", b.Version, err)
		} else {
			a.log.Error("agent binaries upload failed", "version", b.Version, "err", err)
			httpError(w, http.StatusInternalServerError, "", "storing agent binaries %s: %v", b.Version, err)
		}
		return
	}
	if err := a.state.AddStoredAgentBinary(r.Context(), b); err != nil {
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
	a.log.Info("agent binaries uploaded", "user", u.Name, "version", b.Version, "size", b.Size)
	root := "https://" + r.Host
	if uuid := r.PathValue("uuid"); uuid != "" {
		root += "/model/" + uuid
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(params.ToolsResult{Tools: []params.Tools{{
		Version: b.Version, URL: root + "/tools/" + b.Version, SHA256: b.SHA256, Size: b.Size}}})
}

// movingReader reads r, pushing the connection's read deadline timeout
// out before each read: transfers of agent binaries take longer than the
// HTTP server's whole-request deadlines allow on a slow link; they only
// have to keep moving.
type movingReader struct {
	rc      *http.ResponseController
	r       io.Reader
	timeout time.Duration
}

func (m *movingReader) Read(p []byte) (int, error) {
	_ = m.rc.SetReadDeadline(time.Now().Add(m.timeout))
	return m.r.Read(p)
}
