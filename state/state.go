package state

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state/store"
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

// Options configures Open.
type Options struct {
	// Hub is the hub the store's feed publishes to: the store must have
	// been opened with Feed(Hub, Logger). If nil, State makes its own,
	// which no store publishes to: a State for a tool that reads or
	// repairs a store and watches nothing.
	Hub *watcher.Hub
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
}

// writeTimeout bounds each write State makes on the store, whatever its
// caller's context: a store that cannot commit (etcd without quorum)
// fails a write after this long instead of holding a caller whose context
// never ends (a tool's, the daemon's own upkeep) for ever. A facade's
// call ends sooner when its client goes or the call's deadline passes.
const writeTimeout = 30 * time.Second

// State is an open controller database. It is safe for concurrent use.
type State struct {
	store  store.Store
	hub    *watcher.Hub
	logger *slog.Logger
	now    func() time.Time

	machines *recordCache[Machine] // decoded machine records, for Machine

	// verifyTimes are how long this state's last verifications of users'
	// passwords took (userhash.go).
	verifyTimes *durationSample

	// afterSubscribe, if set (internal tests only), runs in every Watch
	// method between its subscription and its snapshot.
	afterSubscribe func()

	// noSpace holds the last write refused for want of space
	// (ErrStoreNoSpace), for the daemon's /health (NoSpace); shared by
	// the State's copies (OneView, ViewAt).
	noSpace *atomic.Pointer[noSpaceRefusal]

	// resumes count what resumed watches read of the history
	// (watch_resume.go); shared by the State's copies.
	resumes *resumeCounters
	// history is the recent history resumed watches share
	// (history_window.go); shared by the State's copies.
	history *historyWindow
}

// Feed is the store.Feed of a State whose Options.Hub is hub: open the
// store with it, then hand the store to Open. It publishes each committed
// change set to hub, after the commit is durable and before its writers
// are answered, once per revision in revision order; and when the store
// could not follow its feed (etcd compacted past it) and reloaded its
// view, it resets every watcher of hub (watch_stamp.go says what that
// does to each). logger may be nil.
func Feed(hub *watcher.Hub, logger *slog.Logger) store.Feed {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return store.Feed{
		Apply: hub.Publish,
		Reset: func(rev uint64) {
			n := hub.Subscriptions()
			logger.Warn("state: the store's change feed was reset; waking every watcher (strings watchers fail: their clients watch again)",
				"revision", rev, "subscriptions", n)
			hub.Reset(rev)
		},
	}
}

// Open returns the State kept in s, an open store (package boltstore or
// etcdstore) whose feed is Feed(opts.Hub, opts.Logger), and migrates
// state's schema in it if it is older (migrate.go). A new store is empty:
// see Initialized and Initialize. The State owns s from then on: Close
// closes it, and so does a failed Open.
func Open(s store.Store, opts Options) (*State, error) {
	st := newState(s, opts)
	if err := st.migrate(context.Background()); err != nil {
		_ = st.Close()
		return nil, errors.Annotate(err, "opening state")
	}
	info := s.Info()
	st.logger.Info("state opened", "store", info.Engine, "location", info.Location, "revision", info.Revision)
	return st, nil
}

func newState(s store.Store, opts Options) *State {
	st := &State{store: s, hub: opts.Hub, logger: opts.Logger, now: opts.Now, machines: newMachineCache(), verifyTimes: &durationSample{},
		noSpace: new(atomic.Pointer[noSpaceRefusal]), resumes: &resumeCounters{},
		history: newHistoryWindow()}
	if st.hub == nil {
		st.hub = watcher.NewHub()
	}
	if st.logger == nil {
		st.logger = slog.New(slog.DiscardHandler)
	}
	if st.now == nil {
		st.now = time.Now
	}
	return st
}

// Depart tells the processes sharing the store that this one is going
// (store.Departer), on a store shared among processes; on any other it
// does nothing.
func (st *State) Depart(ctx context.Context) error {
	if d, ok := st.store.(store.Departer); ok {
		return d.Depart(ctx)
	}
	return nil
}

// Close waits for writes in progress to commit and closes the store.
func (st *State) Close() error {
	st.history.close()
	return st.store.Close()
}

// Hub returns the hub change sets are published to.
func (st *State) Hub() *watcher.Hub { return st.hub }

// Revision returns the revision of the last committed write (the store's).
func (st *State) Revision() uint64 { return st.store.Revision() }

// WaitApplied returns once this process has applied revision rev (and
// published its changes), or ctx is done.
func (st *State) WaitApplied(ctx context.Context, rev uint64) error {
	return st.store.WaitApplied(ctx, rev)
}

// Store returns the store state keeps its records in (for the daemon's
// health check and operators' tools).
func (st *State) Store() store.Store { return st.store }

// reader is what reads need: a store view, or a write transaction (which
// sees its own writes).
type reader = store.Reader

// view runs fn in a read view of the store, under ctx.
func (st *State) view(ctx context.Context, fn func(r reader) error) error {
	return st.store.View(ctx, fn)
}

// update runs fn in a write transaction. fn may run more than once (etcd
// reruns it when what it read changed before it committed), so it must act
// only through the txn: anything random or expensive is computed before,
// and tx.now is the same each time. fn returning errNoChange commits
// nothing and spends no revision, as does a function that writes nothing.
//
// It waits for the commit until ctx ends, and at most writeTimeout; a
// write given up that way returns ctx's error and is never half applied
// (its transaction commits whole or not at all), though one whose commit
// was already on its way to etcd may still commit, as with etcd's own
// client.
func (st *State) update(ctx context.Context, fn func(tx *txn) error) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	now := st.now()
	_, err := st.store.Update(ctx, func(t store.Txn) error {
		return fn(&txn{Txn: t, now: now})
	})
	if errors.Is(err, errNoChange) {
		return nil
	}
	if errors.Is(err, ErrStoreNoSpace) {
		st.noSpace.Store(&noSpaceRefusal{at: time.Now(), err: err})
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
	case *MachineHost:
		if !decodeMachineHost(b, d) {
			*d = MachineHost{}
			err = json.Unmarshal(b, d)
		}
	case *ControllerIdentity:
		if !decodeControllerIdentity(b, d) {
			*d = ControllerIdentity{}
			err = json.Unmarshal(b, d)
		}
	case *machineLogin:
		if !decodeMachineLogin(b, d) {
			*d = machineLogin{}
			err = json.Unmarshal(b, d)
		}
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
