package state

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/boltstore"
	"github.com/provisiond/provisiond/watcher"
)

// Entity kinds: the Kind of the changes state records, and the kind (first
// key segment, store.Kind) each kind's records are kept under.
const (
	KindController watcher.Kind = "controller"
	KindModel      watcher.Kind = "model"
	KindUser       watcher.Kind = "user"
	KindMachine    watcher.Kind = "machine"

	KindApplication watcher.Kind = "application"
	KindUnit        watcher.Kind = "unit"
	KindSpace       watcher.Kind = "space"
	KindSubnet      watcher.Kind = "subnet"
	KindIPAddress   watcher.Kind = "ipaddress"
	KindVolume      watcher.Kind = "volume"
	KindStoragePool watcher.Kind = "storagepool"
	KindTools       watcher.Kind = "tools" // controller-wide: the agent binaries catalog

	// CAAS (Kubernetes) models: see caas.go.
	KindCharm             watcher.Kind = "charm"        // id: charm URL
	KindApplicationConfig watcher.Kind = "appconfig"    // id: application name
	KindPodSpec           watcher.Kind = "podspec"      // id: application name
	KindCloudService      watcher.Kind = "cloudservice" // id: application name
	KindStatus            watcher.Kind = "status"       // id: global key ("a#<app>#operator")
	KindStorageInstance   watcher.Kind = "storage"      // id: "<name>/<n>"
	KindFilesystem        watcher.Kind = "filesystem"   // id: "<unit>/<n>"
	KindModelConstraints  watcher.Kind = "modelconstraints"
)

// ControllerKinds are the kinds of controller-wide entities: their changes
// have Model "" and their records are keyed by id alone.
var ControllerKinds = []watcher.Kind{KindController, KindUser, KindTools}

// ModelKinds are the kinds of per-model entities: their changes carry the
// model's UUID and their records are keyed "<model-uuid>/<id>". KindModel
// itself is in neither list (its changes carry its own UUID).
//
// Every per-model entity kind must be listed here or in ModelRecordKinds:
// WatchModelChanges subscribes to each of them, and the removal of a model
// reads them. The kinds here hold a dying model: it is removed once none of
// them holds a record of it.
var ModelKinds = []watcher.Kind{
	KindMachine, KindApplication, KindUnit, KindIPAddress, KindVolume, KindStorageInstance, KindFilesystem,
}

// ModelRecordKinds are per-model kinds that do not keep a dying model: the
// model's networking, pools and constraints, and the records that belong to
// an application (its charm, config, pod spec, cloud service, statuses).
// They are deleted with the model.
var ModelRecordKinds = []watcher.Kind{
	KindSpace, KindSubnet, KindStoragePool, KindModelConstraints,
	KindCharm, KindApplicationConfig, KindPodSpec, KindCloudService, KindStatus,
}

// Field names of the changes state records, besides watcher.FieldCreated,
// watcher.FieldRemoved and watcher.FieldLife.
const (
	FieldConfig       = "config"
	FieldPassword     = "password"
	FieldAPIHostPorts = "apihostports"

	// FieldDead accompanies FieldLife when the entity became dead.
	FieldDead                = "dead"
	FieldStatus              = "status"
	FieldInstance            = "instance" // instance id, nonce, hardware
	FieldSupportedContainers = "supported-containers"
	FieldAgentStartTime      = "agent-start-time"
	FieldAgentVersion        = "agent-version"
	FieldCharmProfiles       = "charm-profiles"
	FieldRemovalMark         = "removal-mark"
	FieldNetworkConfig       = "network-config"
	FieldAddresses           = "addresses"
	FieldAssignment          = "assignment"
)

// Kinds of keys that hold no entities, and so record no changes.
const (
	kindSequence = "sequence" // "<model-uuid>/<name>" -> last number handed out
	// kindSchema holds state's own schema version (schemaKey): what the
	// records and derived indexes of the store look like (migrate.go).
	kindSchema = "schema"
)

// Options configures Open: exactly one of Path and OpenStore.
type Options struct {
	// Path is the bbolt file (package boltstore, the embedded default);
	// it is created if missing.
	Path string
	// OpenStore, instead of Path, opens another store (etcd), handing it
	// the feed state applies change sets through.
	OpenStore func(store.Feed) (store.Store, error)
	// Hub receives one ChangeSet per committed write. If nil, State makes
	// its own (see State.Hub).
	Hub *watcher.Hub
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
	// ObserveCommit, if set, is told how long each commit took and how many
	// writes it grouped (bbolt; a store opened by OpenStore reports its own,
	// as etcdstore.Config.ObserveCommit).
	ObserveCommit func(d time.Duration, writes int)
	// StoreFailed, if set, is called once if the bbolt store fails for
	// good: its file removed, replaced or truncated under it, or reading
	// it faulted (boltstore.Options.Failed). It must not block.
	StoreFailed func(error)
}

// writeTimeout bounds each write State makes on the store. The callers'
// contexts are not threaded through State's API yet (follow-up work); until
// they are, a store that cannot commit (etcd without quorum) fails a write
// after this long instead of holding its caller for ever. Reads run under
// State's own context, which Close cancels: on bbolt they are bounded by
// the file, on etcd they are served from the local replica.
const writeTimeout = 30 * time.Second

// State is an open controller database. It is safe for concurrent use.
type State struct {
	store  store.Store
	hub    *watcher.Hub
	logger *slog.Logger
	now    func() time.Time

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	machines *recordCache[Machine] // decoded machine records, for Machine

	// verifyTimes are how long this state's last verifications of users'
	// passwords took (userhash.go).
	verifyTimes *durationSample

	// afterSubscribe, if set (internal tests only), runs in every Watch
	// method between its subscription and its snapshot.
	afterSubscribe func()
}

// Open opens the store (opts.Path or opts.OpenStore) and migrates state's
// schema in it if it is older (migrate.go). A new store is empty: see
// Initialized and Initialize.
func Open(opts Options) (*State, error) {
	if (opts.Path == "") == (opts.OpenStore == nil) {
		return nil, errors.NotValidf("state options without exactly one of a path and a store")
	}
	st := newState(opts)
	feed := store.Feed{Apply: st.publish, Reset: st.reset}
	var err error
	if opts.OpenStore != nil {
		st.store, err = opts.OpenStore(feed)
	} else {
		st.store, err = boltstore.Open(opts.Path, boltstore.Options{
			Feed:            feed,
			InitialMmapSize: boltstore.MmapSize,
			ObserveCommit:   opts.ObserveCommit,
			Failed:          opts.StoreFailed,
		})
	}
	if err != nil {
		st.cancel()
		return nil, errors.Annotate(err, "opening state")
	}
	if err := st.migrate(); err != nil {
		_ = st.Close()
		return nil, errors.Annotate(err, "opening state")
	}
	info := st.store.Info()
	st.logger.Info("state opened", "store", info.Engine, "location", info.Location, "revision", info.Revision)
	return st, nil
}

func newState(opts Options) *State {
	st := &State{hub: opts.Hub, logger: opts.Logger, now: opts.Now, machines: newMachineCache(), verifyTimes: &durationSample{}}
	if st.hub == nil {
		st.hub = watcher.NewHub()
	}
	if st.logger == nil {
		st.logger = slog.New(slog.DiscardHandler)
	}
	if st.now == nil {
		st.now = time.Now
	}
	st.ctx, st.cancel = context.WithCancel(context.Background())
	return st
}

// publish is the store's Feed.Apply: it runs after each commit is durable
// and before its writers are answered, once per revision in revision
// order, and hands the change set to the hub.
func (st *State) publish(cs watcher.ChangeSet) { st.hub.Publish(cs) }

// reset is the store's Feed.Reset: the store could not follow its feed
// (etcd compacted past it) and reloaded its view at rev. Every watcher
// whose snapshot is older may have missed changes: the hub resets them
// all (watch_stamp.go says what that does to each).
func (st *State) reset(rev uint64) {
	n := st.hub.Subscriptions()
	st.logger.Warn("state: the store's change feed was reset; waking every watcher (strings watchers fail: their clients watch again)",
		"revision", rev, "subscriptions", n)
	st.hub.Reset(rev)
}

// Close waits for writes in progress to commit and closes the store.
func (st *State) Close() error {
	err := st.store.Close()
	st.cancel()
	return err
}

// Hub returns the hub change sets are published to.
func (st *State) Hub() *watcher.Hub { return st.hub }

// Revision returns the revision of the last committed write (the store's).
func (st *State) Revision() uint64 { return st.store.Revision() }

// Store returns the store state keeps its records in (for the daemon's
// health check and operators' tools).
func (st *State) Store() store.Store { return st.store }

// Snapshot writes a consistent copy of a bbolt database to w (see
// boltstore.Store.Snapshot); size, if not nil, first gets the copy's exact
// size. Other stores do not support it.
func (st *State) Snapshot(w io.Writer, size func(int64)) (int64, error) {
	s, ok := st.store.(interface {
		Snapshot(io.Writer, func(int64)) (int64, error)
	})
	if !ok {
		return 0, errors.NotSupportedf("a snapshot of a %s store", st.store.Info().Engine)
	}
	return s.Snapshot(w, size)
}

// Check runs the database's consistency check (bbolt's; other stores have
// none and pass).
func (st *State) Check() error {
	if c, ok := st.store.(interface{ Check() error }); ok {
		return c.Check()
	}
	return nil
}

// reader is what reads need: a store view, or a write transaction (which
// sees its own writes).
type reader = store.Reader

// view runs fn in a read view of the store.
func (st *State) view(fn func(r reader) error) error {
	return st.store.View(st.ctx, fn)
}

// update runs fn in a write transaction. fn may run more than once (etcd
// reruns it when what it read changed before it committed), so it must act
// only through the txn: anything random or expensive is computed before,
// and tx.now is the same each time. fn returning errNoChange commits
// nothing and spends no revision, as does a function that writes nothing.
func (st *State) update(fn func(tx *txn) error) error {
	ctx, cancel := context.WithTimeout(st.ctx, writeTimeout)
	defer cancel()
	now := st.now()
	_, err := st.store.Update(ctx, func(t store.Txn) error {
		return fn(&txn{Txn: t, now: now})
	})
	if errors.Is(err, errNoChange) {
		return nil
	}
	return err
}

// txn is a write transaction at the level of entities. put and remove are
// the only ways entity records are written, and each records its change.
type txn struct {
	store.Txn
	now time.Time
}

// put stores d as the record of entity (kind, model, id), moves its index
// entries (index.go) and records the change with fields.
func (tx *txn) put(kind watcher.Kind, model, id string, d any, fields ...string) error {
	b, err := json.Marshal(d)
	if err != nil {
		return errors.Annotatef(err, "encoding %s %q", kind, id)
	}
	if ix, ok := indexes[kind]; ok {
		if err := tx.reindex(ix, kind, model, id, d, b); err != nil {
			return err
		}
	}
	if err := tx.Put(entityKey(kind, model, id), b); err != nil {
		return errors.Trace(err)
	}
	tx.Record(change(kind, model, id, fields...))
	return nil
}

// change is the change record of entity (kind, model, id): a machine's
// names its parent machine, if any, so the hub finds a parent's container
// watchers through its index.
func change(kind watcher.Kind, model, id string, fields ...string) watcher.Change {
	c := watcher.Change{Kind: kind, Model: model, ID: id, Fields: fields}
	if kind == KindMachine {
		c.Parent = ParentID(id)
	}
	return c
}

// remove deletes the record of entity (kind, model, id) and its index
// entries and records its removal. Removing the last entity of a dying model removes the model too,
// in the same transaction.
func (tx *txn) remove(kind watcher.Kind, model, id string) error {
	if ix, ok := indexes[kind]; ok {
		if err := tx.reindex(ix, kind, model, id, nil, nil); err != nil {
			return err
		}
	}
	if err := tx.Delete(entityKey(kind, model, id)); err != nil {
		return errors.Trace(err)
	}
	tx.Record(change(kind, model, id, watcher.FieldRemoved))
	if kind != KindModel && model != "" {
		return tx.removeModelIfDone(model)
	}
	return nil
}

// nextSequence returns the next number of the named per-model sequence,
// starting at 0. The read and the write are one transaction's, so on any
// store two writers never get the same number.
func (tx *txn) nextSequence(model, name string) (int, error) {
	key := store.Key(kindSequence, model+"/"+name)
	next := 0
	b, ok, err := tx.Get(key)
	if err != nil {
		return 0, errors.Trace(err)
	}
	if ok {
		if err := json.Unmarshal(b, &next); err != nil {
			return 0, errors.Annotatef(err, "decoding sequence %q", key)
		}
	}
	if err := tx.Put(key, strconv.AppendInt(nil, int64(next+1), 10)); err != nil {
		return 0, errors.Trace(err)
	}
	return next, nil
}

// entityKey is the store key of an entity's record: "<kind>/<model>/<id>"
// for per-model entities, "<kind>/<id>" for models and controller-wide
// ones (state/db's bucket and key, joined: files written before the store
// seam read as they are).
func entityKey(kind watcher.Kind, model, id string) string {
	if kind == KindModel || model == "" {
		return string(kind) + "/" + id
	}
	return string(kind) + "/" + model + "/" + id
}

// kindPrefix is the key prefix of every record of kind in model ("" for
// every record of a controller-wide kind, and of the models).
func kindPrefix(kind watcher.Kind, model string) string {
	if kind == KindModel || model == "" {
		return string(kind) + "/"
	}
	return string(kind) + "/" + model + "/"
}

// exists reports whether entity (kind, model, id) has a record.
func exists(r reader, kind watcher.Kind, model, id string) (bool, error) {
	ok, err := r.GetFunc(entityKey(kind, model, id), func([]byte) {})
	return ok, errors.Trace(err)
}

// get decodes the record of (kind, model, id) into d and reports whether it
// exists.
func get(r reader, kind watcher.Kind, model, id string, d any) (bool, error) {
	var decErr error
	key := entityKey(kind, model, id)
	ok, err := r.GetFunc(key, func(b []byte) { decErr = decodeRecord(key, b, d) })
	if err != nil {
		return false, errors.Trace(err)
	}
	if decErr != nil {
		return false, errors.Annotatef(decErr, "decoding %s %q", kind, id)
	}
	return ok, nil
}

// decodeRecord decodes record b, stored under key, into d, which is zero:
// units and applications through their caches (record_cache.go), which
// the CAAS unit updates read again and again, models through theirs,
// anything else with encoding/json.
func decodeRecord(key string, b []byte, d any) error {
	var err error
	switch d := d.(type) {
	case *modelDoc:
		*d, err = modelRecords.get(key, b)
	case *modelHead:
		m, _, merr := modelRecords.getShared(key, b)
		if merr != nil {
			// A config the whole record cannot hold does not hide the
			// head: decode it alone, as before the cache.
			return json.Unmarshal(b, d)
		}
		*d = modelHead{UUID: m.UUID, Name: m.Name, Type: m.Type, Life: m.Life}
	case *unitDoc:
		d.Unit, err = unitRecords.get(key, b)
	case *applicationDoc:
		d.Application, err = applicationRecords.get(key, b)
	default:
		err = json.Unmarshal(b, d)
	}
	return err
}

// scan calls fn for every key starting with prefix (which names a kind),
// in key order, through the store's bounded Scan page by page.
func scan(r reader, prefix string, fn func(key string, val []byte) error) error {
	for start := ""; ; {
		last, more, err := r.Scan(prefix, start, 0, fn)
		if err != nil || !more {
			return errors.Trace(err)
		}
		start = last
	}
}

// scanKeys returns every key starting with prefix.
func scanKeys(r reader, prefix string) ([]string, error) {
	var keys []string
	err := scan(r, prefix, func(k string, _ []byte) error {
		keys = append(keys, k)
		return nil
	})
	return keys, err
}

// listPrefix decodes every record of kind in model whose id starts with
// prefix, in key order.
func listPrefix[T any](r reader, kind watcher.Kind, model, prefix string) ([]T, error) {
	return decodeAll[T](r, kind, kindPrefix(kind, model)+prefix)
}

// list decodes every record of kind in model ("" for all of a
// controller-wide kind), in key order.
func list[T any](r reader, kind watcher.Kind, model string) ([]T, error) {
	return decodeAll[T](r, kind, kindPrefix(kind, model))
}

func decodeAll[T any](r reader, kind watcher.Kind, prefix string) ([]T, error) {
	var out []T
	err := scan(r, prefix, func(key string, b []byte) error {
		var d T
		if err := json.Unmarshal(b, &d); err != nil {
			return errors.Annotatef(err, "decoding %s %q", kind, key)
		}
		out = append(out, d)
		return nil
	})
	return out, err
}
