package migrate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/agentbinaries"
	"github.com/provisiond/provisiond/internal/blobstore"
	"github.com/provisiond/provisiond/internal/controllerstore"
	"github.com/provisiond/provisiond/pki"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/boltstore"
	"github.com/provisiond/provisiond/state/store/etcdstore"
)

// Run copies a stopped controller from one store to another, empty
// one (provisiond migrate; docs/scale-out.md, Moving between stores):
// bbolt to etcd, or etcd to bbolt. What moves:
//
//   - every record, dumped at one revision and loaded into the target
//     (etcd: in batches within the cluster's limits, under a load mark, the
//     controller record in the first batch, so a daemon refuses a prefix
//     whose load did not finish; bbolt: one revision);
//   - the identity: a bbolt data dir keeps it in files (ca.crt, ca.key,
//     server.crt, server.key, and the passwords in credentials.yaml), an
//     etcd controller in its identity record; each becomes the other;
//   - agent binaries: blobs in a data dir (agent-binaries/), copied
//     between the data dirs given (on etcd the other daemons copy them
//     from the daemon that has them).
//
// It refuses a bbolt data dir a daemon holds (the database's lock), an
// etcd source that daemons are serving, and any target that is not empty.
// After the copy it reads the target back and compares the records (their
// count and digest) with the source's.

// End is one side of a migration.
type End struct {
	// Store is controllerstore.StoreBolt or controllerstore.StoreEtcd.
	Store string
	// DataDir is, for bbolt, the data dir holding the database; for etcd
	// (optional) the data dir of one of its daemons, whose agent binaries
	// move.
	DataDir string
	// Etcd is the cluster, for etcd.
	Etcd controllerstore.EtcdConfig
}

// Config says what to migrate.
type Config struct {
	From, To End
	// Progress, if set, is told how the copy goes: phase "counting",
	// "copying" or "verifying", done of total records (total is the
	// source's count; 0 while counting).
	Progress func(phase string, done, total int)
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// Result is what Run did.
type Result struct {
	Controller       string // its UUID
	Records          int    // records loaded into the target
	SourceRevision   uint64 // the revision the source was read at
	TargetRevision   uint64 // the target's revision after the load
	AgentBinaries    int    // blobs copied
	AgentBinaryBytes int64
	Copy, Verify     time.Duration // how long the copy and the verification took
	// History is what was done with the history of commits.
	History History
	// Loaded says the load went through whole (what failed, if anything,
	// came after: the verification).
	Loaded bool
	// Notes are what the operator must know or do next.
	Notes []string
}

// IdentityFiles are the files a bbolt data dir keeps the controller's
// identity in: credentials.yaml (the passwords) and the TLS material,
// where present. A backup carries them beside the database.
var IdentityFiles = []string{credentials.File, pki.CACertFile, pki.CAKeyFile, pki.ServerCertFile, pki.ServerKeyFile}

// File is one of IdentityFiles and its content.
type File struct {
	Name string
	Data []byte
}

// ErrNotEmpty is returned when a migration's or restore's target holds
// anything.
var ErrNotEmpty = errors.New("the target is not empty")

// Run runs a migration (see above).
func Run(ctx context.Context, cfg Config) (res Result, err error) {
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Progress == nil {
		cfg.Progress = func(string, int, int) {}
	}
	src, id, err := openMigrateSource(ctx, cfg.From, cfg.Logger)
	if err != nil {
		return res, err
	}
	defer src.Close()
	if cfg.To.Store == controllerstore.StoreEtcd {
		err = migrateToEtcd(ctx, cfg, src, id, &res)
	} else {
		err = migrateToDataDir(ctx, cfg, src, id, &res)
	}
	if err == nil {
		res.Notes = append(res.Notes, HistoryNote(res.History, res.SourceRevision, res.TargetRevision))
	}
	return res, err
}

// HistoryNote says what a migration or a restore into another store did
// with the history of commits (provisionctl history): each record the
// source kept is carried under its revision, and the target's own
// revisions continue after the source's.
func HistoryNote(h History, sourceRev, targetRev uint64) string {
	if !h.Carried || h.Records == 0 {
		return fmt.Sprintf("the source kept no history of commits to carry; the target's history starts after its revision %d", targetRev)
	}
	elided := ""
	if h.Elided > 0 {
		elided = fmt.Sprintf(" (%d of them over etcd's request limit keep only the keys they wrote, as such a commit keeps on etcd)", h.Elided)
	}
	return fmt.Sprintf("the history of commits (provisionctl history) is carried: %d records%s, revisions %d (%s) to %d, under their revisions; "+
		"the records copied are the source's state at revision %d, and the target's own revisions go on after it (from %d)",
		h.Records, elided, h.Oldest, h.OldestTime.UTC().Format(time.RFC3339), h.Newest, sourceRev, targetRev)
}

// Validate checks the configuration (Run does too), filling in the
// default store (bbolt) of each side.
func (c *Config) Validate() error {
	for _, e := range []struct {
		end  *End
		side string
	}{{&c.From, "from"}, {&c.To, "to"}} {
		switch e.end.Store {
		case "", controllerstore.StoreBolt:
			e.end.Store = controllerstore.StoreBolt
			if e.end.DataDir == "" {
				return fmt.Errorf("migrating %s bbolt needs --%s-data-dir", e.side, e.side)
			}
		case controllerstore.StoreEtcd:
			if err := controllerstore.Validate(controllerstore.StoreEtcd, e.end.Etcd); err != nil {
				return err
			}
		default:
			return fmt.Errorf("--%s %q: want %s or %s", e.side, e.end.Store, controllerstore.StoreBolt, controllerstore.StoreEtcd)
		}
	}
	switch {
	case c.From.Store == c.To.Store && c.From.Store == controllerstore.StoreBolt:
		return errors.New("migrate copies between bbolt and etcd; from one bbolt data dir to another, use provisiond backup and restore (or copy the stopped data dir)")
	case c.From.Store == c.To.Store:
		return errors.New("migrate copies between bbolt and etcd; from one etcd prefix to another, migrate to a bbolt data dir and back")
	case c.From.DataDir != "" && filepath.Clean(c.From.DataDir) == filepath.Clean(c.To.DataDir):
		return fmt.Errorf("--from-data-dir and --to-data-dir are both %s", c.From.DataDir)
	}
	return nil
}

// openMigrateSource opens the source's state and reads the controller's
// identity from where that store keeps it.
func openMigrateSource(ctx context.Context, from End, log *slog.Logger) (*state.State, state.Identity, error) {
	var id state.Identity
	var st *state.State
	where := ""
	if from.Store == controllerstore.StoreBolt {
		where = from.DataDir
		path := filepath.Join(from.DataDir, controllerstore.DBFile)
		if _, err := os.Stat(path); err != nil {
			return nil, id, fmt.Errorf("no database at %s: --from-data-dir must be a provisiond data dir", path)
		}
		var err error
		st, _, err = controllerstore.OpenBolt(path, log)
		if errors.Is(err, boltstore.ErrLocked) {
			return nil, id, fmt.Errorf("%s is in use: a running provisiond holds its database's lock; stop it before migrating (%w)", from.DataDir, controllerstore.ErrDataDirInUse)
		}
		if err != nil {
			return nil, id, err
		}
	} else {
		where = "etcd prefix " + from.Etcd.PrefixOrDefault()
		var err error
		if st, err = controllerstore.OpenEtcdState(from.Etcd, log); err != nil {
			return nil, id, err
		}
		if err := controllerstore.CheckLoaded(st); err != nil {
			st.Close()
			return nil, id, err
		}
		servers, err := st.APIServers(ctx)
		if err != nil {
			st.Close()
			return nil, id, err
		}
		if len(servers) > 0 {
			ids := make([]string, len(servers))
			for i, s := range servers {
				ids[i] = s.ID
			}
			st.Close()
			return nil, id, fmt.Errorf("%s is being served by %d daemon(s) (%s): stop every daemon of the controller before migrating (a write after the copy would be lost)",
				where, len(servers), strings.Join(ids, ", "))
		}
	}
	fail := func(err error) (*state.State, state.Identity, error) {
		st.Close()
		return nil, id, err
	}
	ok, err := st.Initialized(ctx)
	if err != nil {
		return fail(err)
	}
	if !ok {
		return fail(fmt.Errorf("%s holds no controller (it was never initialised): nothing to migrate", where))
	}
	if from.Store == controllerstore.StoreBolt {
		id, err = identityFromDataDir(from.DataDir, st)
	} else {
		var found bool
		id, found, err = st.Identity(ctx)
		if err == nil && !found {
			err = fmt.Errorf("%s holds a controller without an identity record: it was not made by a daemon on etcd", where)
		}
	}
	if err != nil {
		return fail(err)
	}
	return st, id, nil
}

// identityFromDataDir makes the identity a daemon on etcd reads from what
// a bbolt daemon keeps in its data dir (internal/daemon: Start and initialise): the TLS
// material pki.LoadOrCreate keeps there and the passwords of
// credentials.yaml, which must be the controller's (the database's
// password hashes must accept them).
func identityFromDataDir(dir string, st *state.State) (state.Identity, error) {
	var id state.Identity
	credsPath := filepath.Join(dir, credentials.File)
	creds, err := credentials.Read(credsPath)
	if errors.Is(err, fs.ErrNotExist) {
		return id, fmt.Errorf("%s has no %s: the controller's admin and controller-agent passwords are in it, and a daemon on etcd needs them", dir, credentials.File)
	}
	if err != nil {
		return id, err
	}
	if creds.AdminPassword == "" || creds.ControllerAgent.Password == "" || creds.ControllerAgent.Nonce == "" {
		return id, fmt.Errorf("%s holds no admin or controller-agent password (it was rewritten without them): set the admin password again before migrating", credsPath)
	}
	ctrl, err := st.Controller(context.Background())
	if err != nil {
		return id, err
	}
	if creds.ControllerUUID != ctrl.UUID {
		return id, fmt.Errorf("%s is of controller %s, the database of controller %s", credsPath, creds.ControllerUUID, ctrl.UUID)
	}
	user := creds.AdminUser
	if user == "" {
		user = "admin"
	}
	if _, err := st.CheckUserPassword(context.Background(), user, creds.AdminPassword); err != nil {
		return id, fmt.Errorf("%s: the database refuses its admin password (%v)", credsPath, err)
	}
	agentID := strings.TrimPrefix(creds.ControllerAgent.Tag, "machine-")
	if _, err := st.AuthenticateMachine(context.Background(), ctrl.ModelUUID, agentID, creds.ControllerAgent.Password, creds.ControllerAgent.Nonce); err != nil {
		return id, fmt.Errorf("%s: the database refuses its controller-agent login (%v)", credsPath, err)
	}
	id.AdminPassword = creds.AdminPassword
	id.AgentPassword = creds.ControllerAgent.Password
	id.AgentNonce = creds.ControllerAgent.Nonce

	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return b, err
	}
	files := map[string]*[]byte{pki.CACertFile: &id.CACert, pki.CAKeyFile: &id.CAKey, pki.ServerCertFile: &id.ServerCert, pki.ServerKeyFile: &id.ServerKey}
	for name, p := range files {
		if *p, err = read(name); err != nil {
			return id, err
		}
	}
	switch {
	case len(id.CACert) == 0 && len(id.CAKey) == 0:
		// The daemon ran with --cert-file: its CA is the one clients
		// were given.
		if creds.CACert == "" {
			return id, fmt.Errorf("%s has no CA (%s) and %s names none", dir, pki.CACertFile, credsPath)
		}
		id.CACert, id.ServerCert, id.ServerKey = []byte(creds.CACert), nil, nil
	case len(id.CACert) == 0 || len(id.CAKey) == 0:
		return id, fmt.Errorf("%s holds only one of %s and %s", dir, pki.CACertFile, pki.CAKeyFile)
	case len(id.ServerCert) == 0 || len(id.ServerKey) == 0:
		id.ServerCert, id.ServerKey, err = pki.NewServerCert(id.CACert, id.CAKey, nil, pki.ServerValidity)
		if err != nil {
			return id, fmt.Errorf("tls: %w", err)
		}
	}
	return id, nil
}

// dataDirFiles are the files a bbolt daemon keeps its identity in, made
// from an identity record (what identityFromDataDir reads): the TLS
// material, unless the operator supplied it, and credentials.yaml, whose
// api-addresses the daemon fills in when it starts.
func dataDirFiles(id state.Identity, st *state.State) ([]File, error) {
	ctrl, err := st.Controller(context.Background())
	if err != nil {
		return nil, err
	}
	creds := credentials.Credentials{
		ControllerUUID:      ctrl.UUID,
		ControllerModelUUID: ctrl.ModelUUID,
		AdminUser:           "admin",
		AdminPassword:       id.AdminPassword,
		ControllerAgent:     credentials.ControllerAgent{Tag: "machine-0", Password: id.AgentPassword, Nonce: id.AgentNonce},
		CACert:              string(id.CACert),
	}
	if m, err := st.ModelByName(context.Background(), state.DefaultModelName); err == nil {
		creds.DefaultModelUUID = m.UUID
	}
	b, err := yaml.Marshal(&creds)
	if err != nil {
		return nil, err
	}
	out := []File{{credentials.File, b}}
	if len(id.CAKey) > 0 {
		out = append(out, File{pki.CACertFile, id.CACert}, File{pki.CAKeyFile, id.CAKey},
			File{pki.ServerCertFile, id.ServerCert}, File{pki.ServerKeyFile, id.ServerKey})
	}
	return out, nil
}

// migrateToEtcd loads the source into an empty etcd prefix, the identity
// record with it, and copies the agent binaries to the data dir given.
func migrateToEtcd(ctx context.Context, cfg Config, src *state.State, id state.Identity, res *Result) error {
	where := "etcd prefix " + cfg.To.Etcd.PrefixOrDefault()
	if cfg.To.DataDir != "" {
		if err := checkBlobTarget(cfg.To.DataDir); err != nil {
			return err
		}
	}
	dst, err := controllerstore.OpenEtcdState(cfg.To.Etcd, cfg.Logger)
	if err != nil {
		return err
	}
	defer dst.Close()
	if err := controllerstore.CheckLoaded(dst); err != nil {
		return err
	}
	if ok, err := dst.Initialized(ctx); err != nil {
		return err
	} else if ok {
		ctrl, _ := dst.Controller(ctx)
		return fmt.Errorf("%s already holds controller %s: %w (migrate only into an empty prefix)", where, ctrl.UUID, ErrNotEmpty)
	}
	es, ok := dst.Store().(*etcdstore.Store)
	if !ok {
		return errors.New("the target is not an etcd store")
	}
	if n, err := es.KeyCount(ctx); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	} else if n > 0 {
		return fmt.Errorf("%s holds no controller but is not empty (%d keys): %w (migrate only into an empty prefix)", where, n, ErrNotEmpty)
	}
	if n, err := es.ArchiveKeyCount(ctx); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	} else if n > 0 {
		return fmt.Errorf("%s is empty but its history archive is not (%d keys under %s%s: a controller on this prefix before?): %w (remove them with etcdctl del --prefix %s%s)",
			where, n, etcdstore.HistoryArchive, es.Prefix(), ErrNotEmpty, etcdstore.HistoryArchive, es.Prefix())
	}
	idb, err := jsonIdentity(id)
	if err != nil {
		return err
	}
	opts := copyOptions{count: true, controllerFirst: true, first: []record{{identityKey, idb}}}
	if err := copyAndVerify(ctx, cfg, src, dst, opts, res); err != nil {
		// The archive was empty: what it holds now is this copy's.
		dropHistory := func() {
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if derr := es.DropHistory(dctx); derr != nil {
				err = fmt.Errorf("%w; and removing the history carried failed: %v (remove it with etcdctl del --prefix %s%s)", err, derr, etcdstore.HistoryArchive, es.Prefix())
			}
		}
		if res.Records == 0 {
			dropHistory()
			return err
		}
		actx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		switch undone, aerr := es.AbortLoad(actx); {
		case undone:
			dropHistory()
			return fmt.Errorf("%w (the records loaded so far were removed again)", err)
		case res.Loaded:
			return fmt.Errorf("%w (the prefix holds the records loaded: remove them with etcdctl del --prefix %s before trying again)", err, es.Prefix())
		case aerr != nil:
			return fmt.Errorf("%w; and undoing the load failed: %v (if the prefix holds the load's mark, remove it with etcdctl del --prefix %s before trying again)", err, aerr, es.Prefix())
		}
		return err
	}
	if _, ok, err := dst.Identity(ctx); err != nil || !ok {
		return fmt.Errorf("verifying %s: the controller's identity is not found after the load (%v)", where, err)
	}
	if cfg.From.DataDir != "" {
		if cfg.To.DataDir != "" {
			if err := copyAgentBinaries(ctx, cfg.From.DataDir, cfg.To.DataDir, res); err != nil {
				return err
			}
		} else if n, size := countBlobs(cfg.From.DataDir); n > 0 {
			res.Notes = append(res.Notes, fmt.Sprintf("%d agent binaries (%.1f MiB) stay in %s: no daemon on etcd has them (it would copy them from a peer that has); copy that directory into the data dir of the first daemon to start on etcd",
				n, float64(size)/(1<<20), filepath.Join(cfg.From.DataDir, agentbinaries.DirName)))
		}
	}
	if len(id.CAKey) == 0 {
		res.Notes = append(res.Notes, "the controller's certificates were supplied by the operator (--cert-file): give every daemon on etcd --cert-file, --key-file and --ca-file")
	}
	return nil
}

// jsonIdentity encodes id as state's identity record (state.Identity's
// JSON, as SetIdentity stores it).
func jsonIdentity(id state.Identity) ([]byte, error) { return json.Marshal(id) }

// copyOptions say how copyAndVerify copies.
type copyOptions struct {
	// count reads the source twice, first to count it (the progress
	// bar's total) and then to copy it, and refuses a source that changed
	// in between: a stopped controller. A live one (a backup) is read
	// once, at one revision.
	count bool
	// controllerFirst loads the controller record first (an etcd target:
	// with the load's mark, so a daemon meeting the half-loaded prefix
	// finds both and refuses it). It needs a stopped source: the record
	// is read apart from the dump.
	controllerFirst bool
	// first are records loaded before the dump's (the identity record of
	// an etcd target).
	first []record
}

// copyAndVerify copies src into dst (empty): the dump of src but its
// identity record (the target's is in opts.first, or in files), then
// reads dst back and compares.
func copyAndVerify(ctx context.Context, cfg Config, src, dst *state.State, opts copyOptions, res *Result) error {
	dumper, loader, err := dumperLoader(src, dst)
	if err != nil {
		return err
	}
	ctrl, err := src.Controller(ctx)
	if err != nil {
		return err
	}
	res.Controller = ctrl.UUID
	var counted digest
	var rev uint64
	if opts.count {
		cfg.Progress("counting", 0, 0)
		if counted, rev, err = dumpDigest(ctx, dumper); err != nil {
			return fmt.Errorf("reading the source: %w", err)
		}
		if counted.unordered {
			return errors.New("the source's dump is not in key order: it is damaged (run provisiond check)")
		}
	}
	first := opts.first
	skip := func(key string) bool { return key == identityKey }
	if opts.controllerFirst {
		var ctrlVal []byte
		if err := src.Store().View(ctx, func(r store.Reader) error {
			v, _, err := r.Get(controllerKey)
			ctrlVal = v
			return err
		}); err != nil {
			return err
		}
		first = append([]record{{controllerKey, ctrlVal}}, first...)
		skip = func(key string) bool { return key == controllerKey || key == identityKey }
	}
	total := 0
	if opts.count {
		// What the load takes: the source's records but its identity
		// record, and first's.
		total = counted.n + len(opts.first)
		if err := src.Store().View(ctx, func(r store.Reader) error {
			ok, err := r.GetFunc(identityKey, func([]byte) {})
			if ok {
				total--
			}
			return err
		}); err != nil {
			return err
		}
	}
	start := time.Now()
	// The history goes into an etcd target before its records (its
	// revisions are the cluster's: the load's must follow the history's),
	// into a bbolt one after them, up to the revision they were dumped at.
	toEtcd := dst.Store().Info().Engine == controllerstore.StoreEtcd
	if toEtcd {
		if !opts.count {
			return errors.New("a copy into etcd needs a stopped source")
		}
		cfg.Progress("history", 0, 0)
		if res.History, err = carryHistory(ctx, src, dst, rev); err != nil {
			return err
		}
	}
	cr, err := copyRecords(ctx, dumper, loader, first, skip, func(n int) { cfg.Progress("copying", n, max(n, total)) })
	res.Records = cr.loaded.n
	res.SourceRevision = cr.rev
	res.Copy = time.Since(start)
	if err != nil {
		return fmt.Errorf("copying the records: %w", err)
	}
	if cr.source.unordered {
		return errors.New("the source's dump is not in key order: it is damaged (run provisiond check)")
	}
	if opts.count && (!cr.source.same(&counted) || cr.rev != rev && src.Store().Info().Engine == controllerstore.StoreBolt) {
		return fmt.Errorf("the source changed during the copy (%d records at revision %d, then %d at %d): is a daemon running on it?",
			counted.n, rev, cr.source.n, cr.rev)
	}
	if !toEtcd {
		if sy, ok := src.Store().(interface{ Sync(context.Context) error }); ok {
			// A live source (a backup on etcd): the history this process
			// reads must hold every commit up to the dump's revision.
			if err := sy.Sync(ctx); err != nil {
				return fmt.Errorf("reading the source's history: %w", err)
			}
		}
		cfg.Progress("history", 0, 0)
		if res.History, err = carryHistory(ctx, src, dst, cr.rev); err != nil {
			return err
		}
	}
	res.Loaded = true
	start = time.Now()
	cfg.Progress("verifying", 0, cr.loaded.n)
	dumpT, ok := dst.Store().(store.Dumper)
	if !ok {
		return errors.New("the target cannot be read back")
	}
	got, trev, err := dumpDigest(ctx, dumpT)
	res.TargetRevision = trev
	res.Verify = time.Since(start)
	switch {
	case err != nil:
		return fmt.Errorf("reading the target back: %w", err)
	case got.unordered:
		return errors.New("verifying: the target's records do not read back in key order")
	case !got.same(&cr.loaded):
		return fmt.Errorf("verifying: the target holds %d records, %d were loaded, and their digests differ", got.n, cr.loaded.n)
	case trev < dst.Store().Revision():
		return fmt.Errorf("verifying: the target read back at revision %d, before the load's %d", trev, dst.Store().Revision())
	}
	if res.History.Elided, err = verifyHistory(ctx, src, dst, max(rev, cr.rev), res.History, !opts.count); err != nil {
		return err
	}
	cfg.Progress("verifying", got.n, got.n)
	tctrl, err := dst.Controller(ctx)
	if err != nil || tctrl.UUID != ctrl.UUID {
		return fmt.Errorf("verifying: the target's controller is %q, want %s (%v)", tctrl.UUID, ctrl.UUID, err)
	}
	return nil
}

// migrateToDataDir loads the source into a new bbolt database and writes
// the data dir files of its identity, all in a staging directory inside
// the target, moved into place (the database last) once verified.
func migrateToDataDir(ctx context.Context, cfg Config, src *state.State, id state.Identity, res *Result) (err error) {
	dir := cfg.To.DataDir
	if err := checkDataDirTarget(dir); err != nil {
		return err
	}
	made := controllerstore.MissingDirs(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	stage, err := os.MkdirTemp(dir, ".migrate-")
	if err != nil {
		return err
	}
	defer func() {
		os.RemoveAll(stage)
		if err != nil {
			for _, d := range made {
				_ = os.Remove(d)
			}
		}
	}()
	if err := stageDataDir(ctx, cfg, src, id, stage, copyOptions{count: true}, res); err != nil {
		return err
	}
	if cfg.From.DataDir != "" {
		if err := copyAgentBinaries(ctx, cfg.From.DataDir, stage, res); err != nil {
			return err
		}
	} else {
		res.Notes = append(res.Notes, fmt.Sprintf("no agent binaries were copied (give --from-data-dir, the data dir of a daemon on etcd, to copy its %s)", agentbinaries.DirName))
	}
	entries, err := os.ReadDir(stage)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == controllerstore.DBFile {
			continue
		}
		if err := os.Rename(filepath.Join(stage, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	if err := os.Rename(filepath.Join(stage, controllerstore.DBFile), filepath.Join(dir, controllerstore.DBFile)); err != nil {
		return err
	}
	if len(id.CAKey) == 0 {
		res.Notes = append(res.Notes, "the controller's certificates were supplied by the operator (--cert-file): start the daemon with --cert-file, --key-file and --ca-file")
	}
	return controllerstore.SyncDir(dir)
}

// stageDataDir makes a bbolt data dir in the new directory stage from
// src: the database, without the identity record, and the identity's
// files.
func stageDataDir(ctx context.Context, cfg Config, src *state.State, id state.Identity, stage string, opts copyOptions, res *Result) error {
	files, err := stageDatabase(ctx, cfg, src, id, filepath.Join(stage, controllerstore.DBFile), nil, opts, res)
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := controllerstore.WriteFileSynced(filepath.Join(stage, f.Name), strings.NewReader(string(f.Data))); err != nil {
			return err
		}
	}
	return nil
}

// stageDatabase makes a new bbolt database at path from src, without the
// identity record, checks it, and returns the data dir files of id. With
// snapshot, it also writes a snapshot of the database there (as /backup
// takes one: its pages in use, not the file's preallocated size).
func stageDatabase(ctx context.Context, cfg Config, src *state.State, id state.Identity, path string, snapshot io.Writer, opts copyOptions, res *Result) ([]File, error) {
	dst, db, err := controllerstore.OpenBolt(path, cfg.Logger)
	if err != nil {
		return nil, err
	}
	defer dst.Close()
	if err := copyAndVerify(ctx, cfg, src, dst, opts, res); err != nil {
		return nil, err
	}
	if err := db.Check(); err != nil {
		return nil, fmt.Errorf("verifying: the new database fails its consistency check: %w", err)
	}
	files, err := dataDirFiles(id, dst)
	if err != nil {
		return nil, err
	}
	if snapshot != nil {
		if _, err := db.Snapshot(snapshot, nil); err != nil {
			return nil, err
		}
	}
	return files, dst.Close()
}

// Snapshot makes a new bbolt database at path from src, a live
// controller on a shared store read once at one revision (a backup of it),
// checks it, writes a snapshot of it to snapshot (its pages in use), and
// returns the data dir files of id; res says what was copied.
func Snapshot(ctx context.Context, src *state.State, id state.Identity, path string, snapshot io.Writer, log *slog.Logger) (files []File, res Result, err error) {
	cfg := Config{Progress: func(string, int, int) {}, Logger: log}
	files, err = stageDatabase(ctx, cfg, src, id, path, snapshot, copyOptions{}, &res)
	return files, res, err
}

// checkDataDirTarget refuses a data dir that holds any of what a bbolt
// target gets.
func checkDataDirTarget(dir string) error {
	for _, name := range append([]string{controllerstore.DBFile}, IdentityFiles...) {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return fmt.Errorf("%s already holds %s: %w (migrate only into a new or empty data dir)", dir, name, ErrNotEmpty)
		}
	}
	return checkBlobTarget(dir)
}

// checkBlobTarget refuses a data dir whose agent binaries directory holds
// anything.
func checkBlobTarget(dir string) error {
	entries, err := os.ReadDir(filepath.Join(dir, agentbinaries.DirName))
	if err == nil && len(entries) > 0 {
		return fmt.Errorf("%s already holds agent binaries: %w", filepath.Join(dir, agentbinaries.DirName), ErrNotEmpty)
	}
	return nil
}

// countBlobs counts the agent binaries in a data dir.
func countBlobs(dir string) (n int, size int64) {
	entries, _ := os.ReadDir(filepath.Join(dir, agentbinaries.DirName))
	for _, e := range entries {
		if !blobstore.ValidName(e.Name()) {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			n++
			size += fi.Size()
		}
	}
	return n, size
}

// copyAgentBinaries copies the blobs of one data dir's agent binaries
// store into another's, each checked against its SHA-256 (the end of its
// name, VERSION.SHA256) as it is written.
func copyAgentBinaries(ctx context.Context, fromDir, toDir string, res *Result) error {
	entries, err := os.ReadDir(filepath.Join(fromDir, agentbinaries.DirName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("agent binaries: %w", err)
	}
	from, err := blobstore.NewFS(filepath.Join(fromDir, agentbinaries.DirName))
	if err != nil {
		return fmt.Errorf("agent binaries: %w", err)
	}
	to, err := blobstore.NewFS(filepath.Join(toDir, agentbinaries.DirName))
	if err != nil {
		return fmt.Errorf("agent binaries: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if !blobstore.ValidName(name) || !e.Type().IsRegular() {
			continue
		}
		sum := name[strings.LastIndexByte(name, '.')+1:]
		if len(sum) != 2*sha256.Size {
			if sum, err = fileSHA256(filepath.Join(fromDir, agentbinaries.DirName, name)); err != nil {
				return fmt.Errorf("agent binaries: %w", err)
			}
		}
		r, size, err := from.Open(ctx, name)
		if err != nil {
			return fmt.Errorf("agent binaries: %w", err)
		}
		err = to.Put(ctx, name, r, size, sum)
		r.Close()
		if err != nil {
			return fmt.Errorf("agent binaries: copying %s: %w", name, err)
		}
		res.AgentBinaries++
		res.AgentBinaryBytes += size
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
