package backup

import (
	"archive/tar"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/controllerstore"
	"github.com/provisiond/provisiond/internal/migrate"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/store/boltstore"
)

// A backup is an uncompressed USTAR tar archive holding a consistent
// snapshot of the database (controllerstore.DBFile) and the data dir's
// small files: credentials.yaml and the TLS material, where present,
// between its manifest (first) and the manifest's digest (last;
// manifest.go). The daemon serves it at GET /backup to superusers (HTTP
// basic auth; Handler); Restore verifies it and unpacks it into a data
// dir the daemon starts from.

type tarEntry struct {
	name string
	data []byte
}

func entrySize(size int64) int64 { return 512 + (size+511)/512*512 }

// A backup is taken in two steps, so a client that reads slowly or stops
// reading never holds the database (a stalled /backup holding a read
// transaction let writes grow the file to the memory map's size, and then
// every write hung): the snapshot is first copied into a
// temporary file in the data dir (mode 0600; one short read transaction
// at the disk's pace, bounded by backupSnapshotTimeout), then streamed from
// that file with a write deadline before each write (--write-timeout), and
// the file is removed. One backup runs at a time.
const (
	backupSnapshotTimeout = 5 * time.Minute
	backupTempPrefix      = ".backup-"
)

// Config is what a Handler needs of the daemon.
type Config struct {
	// DataDir holds the temporary snapshots.
	DataDir string
	// State is the controller's; Bolt its store on bbolt, whose snapshot
	// a backup takes (nil when Shared: the daemon runs on etcd, and a
	// backup is a dump of the store loaded into a bbolt file).
	State  *state.State
	Bolt   *boltstore.Store
	Shared bool
	// Controller is the controller's UUID, for the manifest.
	Controller string
	// Superuser checks the request's HTTP basic auth for a superuser; on
	// failure it has answered (path and what name the endpoint and what
	// needs it).
	Superuser func(w http.ResponseWriter, r *http.Request, path, what string) (state.User, bool)
	// Writer is the response's writer: w, whose write deadline moves out
	// before each write.
	Writer func(w http.ResponseWriter) io.Writer
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// Handler serves GET /backup to superusers, one backup at a time.
type Handler struct {
	cfg  Config
	log  *slog.Logger
	slot chan struct{} // one backup at a time
}

// NewHandler returns the handler of GET /backup.
func NewHandler(cfg Config) *Handler {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{cfg: cfg, log: log, slot: make(chan struct{}, 1)}
}

// ServeHTTP takes a backup and streams it (see above).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u, ok := h.cfg.Superuser(w, r, "backup", "backup")
	if !ok {
		return
	}
	select {
	case h.slot <- struct{}{}:
		defer func() { <-h.slot }()
	default:
		w.Header().Set("Retry-After", "10")
		http.Error(w, "another backup is being taken; try again", http.StatusServiceUnavailable)
		return
	}
	var (
		small  []tarEntry
		snap   *os.File
		dbSize int64
		err    error
	)
	if h.cfg.Shared {
		small, snap, dbSize, err = h.sharedSnapshotToTemp()
	} else if small, err = h.backupSmallFiles(); err == nil {
		snap, dbSize, err = h.snapshotToTemp()
	}
	if err != nil {
		h.log.Error("backup: snapshot failed", "err", err)
		http.Error(w, "cannot take a snapshot: "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer func() {
		snap.Close()
		os.Remove(snap.Name())
	}()
	manifest, err := h.backupManifest(small, snap, dbSize)
	if err != nil {
		h.log.Error("backup: manifest failed", "err", err)
		http.Error(w, "cannot take a snapshot: "+err.Error(), http.StatusInternalServerError)
		return
	}
	small = append([]tarEntry{{ManifestFile, manifest}}, small...)
	digest := tarEntry{ManifestDigestFile, manifestDigest(manifest)}
	total := entrySize(dbSize) + entrySize(int64(len(digest.data))) + 1024
	for _, e := range small {
		total += entrySize(int64(len(e.data)))
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Content-Length", fmt.Sprint(total))
	w.Header().Set("Content-Disposition", `attachment; filename="provisiond-backup.tar"`)
	now := time.Now().Truncate(time.Second)
	tw := tar.NewWriter(h.cfg.Writer(w))
	header := func(name string, size int64) *tar.Header {
		return &tar.Header{Name: name, Size: size, Mode: 0o600, ModTime: now, Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}
	}
	err = func() error {
		for _, e := range small {
			if err := tw.WriteHeader(header(e.name, int64(len(e.data)))); err != nil {
				return err
			}
			if _, err := tw.Write(e.data); err != nil {
				return err
			}
		}
		if err := tw.WriteHeader(header(controllerstore.DBFile, dbSize)); err != nil {
			return err
		}
		if _, err := io.Copy(tw, snap); err != nil {
			return err
		}
		if err := tw.WriteHeader(header(digest.name, int64(len(digest.data)))); err != nil {
			return err
		}
		if _, err := tw.Write(digest.data); err != nil {
			return err
		}
		return tw.Close()
	}()
	if err != nil {
		// The status line has gone out; a short body tells the client.
		h.log.Warn("backup not delivered", "user", u.Name, "err", err)
		return
	}
	h.log.Info("backup taken", "user", u.Name, "bytes", total)
}

// backupSmallFiles reads the data dir files a backup carries.
func (h *Handler) backupSmallFiles() ([]tarEntry, error) {
	var small []tarEntry
	for _, name := range migrate.IdentityFiles { // the small files a backup carries besides the database
		data, err := os.ReadFile(filepath.Join(h.cfg.DataDir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cannot read %s: %w", name, err)
		}
		small = append(small, tarEntry{name, data})
	}
	return small, nil
}

// snapshotToTemp copies a consistent snapshot of the database into a new
// temporary file in the data dir, positioned at its start, and returns it
// with its size. The copy must finish within backupSnapshotTimeout.
func (h *Handler) snapshotToTemp() (*os.File, int64, error) {
	f, err := os.CreateTemp(h.cfg.DataDir, backupTempPrefix+"*.db")
	if err != nil {
		return nil, 0, err
	}
	deadline := time.Now().Add(backupSnapshotTimeout)
	n, err := h.cfg.Bolt.Snapshot(writerFunc(func(p []byte) (int, error) {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the snapshot took longer than %v", backupSnapshotTimeout)
		}
		return f.Write(p)
	}), nil)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, 0, err
	}
	return f, n, nil
}

// RemoveStale removes the temporary snapshots a daemon that died
// mid-backup left in the data dir.
func RemoveStale(dataDir string, log *slog.Logger) {
	stale, _ := filepath.Glob(filepath.Join(dataDir, backupTempPrefix+"*.db"))
	for _, p := range stale {
		if err := os.Remove(p); err != nil {
			log.Warn("cannot remove a stale backup snapshot", "path", p, "err", err)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Fetch downloads a backup from the daemon that creds describe into
// out. progress, if not nil, is called as bytes arrive with the total size.
func Fetch(ctx context.Context, creds *credentials.Credentials, out io.Writer, progress func(done, total int64)) error {
	if len(creds.APIAddresses) == 0 {
		return errors.New("credentials name no API address")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(creds.CACert)) {
		return errors.New("credentials hold no usable CA certificate")
	}
	hc := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "juju-apiserver", MinVersion: tls.VersionTLS12},
	}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+creds.APIAddresses[0]+"/backup", nil)
	if err != nil {
		return err
	}
	req.SetBasicAuth(creds.AdminUser, creds.AdminPassword)
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("backup request: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("backup refused: %s: %s", resp.Status, string(msg))
	}
	var done int64
	body := io.Reader(resp.Body)
	if progress != nil {
		body = readerFunc(func(p []byte) (int, error) {
			n, err := resp.Body.Read(p)
			done += int64(n)
			progress(done, resp.ContentLength)
			return n, err
		})
	}
	n, err := io.Copy(out, body)
	if err != nil {
		return fmt.Errorf("backup download: %w", err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return fmt.Errorf("backup download: got %d of %d bytes; the daemon failed mid-way (see its log)", n, resp.ContentLength)
	}
	return nil
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// RestoreOptions are how Restore treats the data dir and the archive.
type RestoreOptions struct {
	// Force replaces a database the data dir holds (never a live one).
	Force bool
	// AllowUnverified restores an archive without a manifest (made by an
	// earlier provisiond) as it is (UnpackArchive).
	AllowUnverified bool
}

// Restore unpacks a backup archive into dataDir. It refuses a data dir a
// daemon is running on, and one that already holds a database unless
// opts.Force. The archive is unpacked into a temporary directory beside
// the data and verified against its manifest (UnpackArchive), the
// database is opened and checked there, and only then are the files
// moved into place.
func Restore(archive io.Reader, dataDir string, opts RestoreOptions) error {
	dbPath := filepath.Join(dataDir, controllerstore.DBFile)
	if _, err := os.Stat(dbPath); err == nil {
		st, _, err := controllerstore.OpenBolt(dbPath, nil)
		if errors.Is(err, boltstore.ErrLocked) {
			return fmt.Errorf("restore into %s: %w", dataDir, controllerstore.ErrDataDirInUse)
		}
		if err == nil {
			st.Close()
		}
		if !opts.Force {
			return fmt.Errorf("restore into %s: it already holds a database; pass --force to replace it", dataDir)
		}
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	tmp, err := os.MkdirTemp(dataDir, ".restore-")
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer os.RemoveAll(tmp)

	m, names, err := UnpackArchive(archive, tmp, opts.AllowUnverified)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if !slices.Contains(names, controllerstore.DBFile) {
		return fmt.Errorf("restore: archive holds no %s", controllerstore.DBFile)
	}
	if m != nil {
		if err := checkArchivedStats(m, filepath.Join(tmp, controllerstore.DBFile)); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
	}
	st, db, err := controllerstore.OpenBolt(filepath.Join(tmp, controllerstore.DBFile), nil)
	if err != nil {
		return fmt.Errorf("restore: the archived database does not open: %w", err)
	}
	ok, ierr := st.Initialized(context.Background())
	cerr := db.Check()
	st.Close()
	switch {
	case ierr != nil:
		return fmt.Errorf("restore: %w", ierr)
	case !ok:
		return errors.New("restore: the archived database was never initialised")
	case cerr != nil:
		return fmt.Errorf("restore: the archived database fails its consistency check: %w", cerr)
	}
	// The database goes last, so a daemon never starts on new files with
	// an old database half-replaced.
	slices.SortFunc(names, func(a, b string) int {
		if a == controllerstore.DBFile {
			return 1
		}
		if b == controllerstore.DBFile {
			return -1
		}
		return 0
	})
	for _, name := range names {
		if err := os.Rename(filepath.Join(tmp, name), filepath.Join(dataDir, name)); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
	}
	return controllerstore.SyncDir(dataDir)
}

// checkArchivedStats opens the unpacked database at path read-only and
// compares its schema version, revision and counts with the manifest's.
func checkArchivedStats(m *Manifest, path string) error {
	st, err := controllerstore.OpenReadOnly(path)
	if err != nil {
		return fmt.Errorf("the archived database does not open: %w", err)
	}
	stats, err := st.Stats(context.Background())
	st.Close()
	if err != nil {
		return fmt.Errorf("the archived database: %w", err)
	}
	if err := m.CheckStats(stats.SchemaVersion, stats.Revision, stats.Records); err != nil {
		return fmt.Errorf("%w: %w", ErrTampered, err)
	}
	return nil
}
