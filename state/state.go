package state

import (
	"encoding/json"
	"io"
	"log/slog"
	"time"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state/store/boltstore"
	"github.com/provisiond/provisiond/watcher"
)

// Entity kinds: the Kind of the changes state records, and the name of the
// bucket each kind's records are kept in.
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
// Open makes a bucket only for listed kinds, and WatchModelChanges
// subscribes to each of them. The kinds here hold a dying model: it is
// removed once none of their buckets holds a record of it.
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

// buckets lists every bucket Open makes: one per entity kind and the
// buckets of the indexes.
func buckets() []string {
	out := []string{string(KindModel), bucketModelName, bucketSequence, bucketUnitProviderID}
	for _, k := range ControllerKinds {
		out = append(out, string(k))
	}
	for _, k := range ModelKinds {
		out = append(out, string(k))
	}
	for _, k := range ModelRecordKinds {
		out = append(out, string(k))
	}
	return out
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

// Buckets that hold no entities, and so record no changes.
const (
	bucketModelName = "model-name" // model name -> UUID
	bucketSequence  = "sequence"   // "<model-uuid>/<name>" -> last number handed out
)

// initialMmapSize is boltstore.StateMmapSize (see there).
const initialMmapSize = boltstore.StateMmapSize

// Options configures Open.
type Options struct {
	// Path is the bbolt file; it is created if missing.
	Path string
	// Hub receives one ChangeSet per committed write. If nil, State makes
	// its own (see State.Hub).
	Hub *watcher.Hub
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
	// ObserveCommit, if set, is told how long each commit took and how many
	// writes it grouped.
	ObserveCommit func(d time.Duration, writes int)
}

// State is an open controller database. It is safe for concurrent use.
type State struct {
	db     *boltstore.DB
	hub    *watcher.Hub
	logger *slog.Logger
	now    func() time.Time

	machines *machineCache // decoded machine records, for Machine
}

// Open opens the database at opts.Path. A new file is empty: see
// Initialized and Initialize.
func Open(opts Options) (*State, error) {
	if opts.Path == "" {
		return nil, errors.NotValidf("empty state path")
	}
	st := &State{hub: opts.Hub, logger: opts.Logger, now: opts.Now, machines: newMachineCache()}
	if st.hub == nil {
		st.hub = watcher.NewHub()
	}
	if st.logger == nil {
		st.logger = slog.New(slog.DiscardHandler)
	}
	if st.now == nil {
		st.now = time.Now
	}
	d, err := boltstore.Open(opts.Path, boltstore.Options{
		Buckets:         buckets(),
		InitialMmapSize: initialMmapSize,
		Derive:          rebuildUnitIndex,
		OnCommit:        st.publish,
		ObserveCommit:   opts.ObserveCommit,
	})
	if err != nil {
		return nil, errors.Annotate(err, "opening state")
	}
	st.db = d
	st.logger.Info("state opened", "path", opts.Path, "revision", d.Revision())
	return st, nil
}

// publish runs on the committer goroutine, after each commit and before its
// writers are answered: it hands the hub one change set per revision, in
// commit order.
func (st *State) publish(batch []boltstore.Committed) {
	for _, c := range batch {
		if len(c.Changes) > 0 {
			st.hub.Publish(watcher.ChangeSet{Rev: c.Rev, Changes: c.Changes})
		}
	}
}

// Close waits for queued writes to commit and closes the database.
func (st *State) Close() error { return st.db.Close() }

// Hub returns the hub change sets are published to.
func (st *State) Hub() *watcher.Hub { return st.hub }

// Revision returns the revision of the last committed write.
func (st *State) Revision() uint64 { return st.db.Revision() }

// Snapshot writes a consistent copy of the database to w (see
// boltstore.DB.Snapshot); size, if not nil, first gets the copy's exact size.
func (st *State) Snapshot(w io.Writer, size func(int64)) (int64, error) {
	return st.db.Snapshot(w, size)
}

// Check runs the database's consistency check.
func (st *State) Check() error { return st.db.Check() }

// reader is what reads need from a transaction: both *boltstore.ReadTx and
// *boltstore.WriteTx satisfy it.
type reader interface {
	Get(bucket, key string) ([]byte, bool)
	ForEachPrefix(bucket, prefix string, fn func(key string, val []byte) error) error
}

// view runs fn in a read transaction.
func (st *State) view(fn func(r reader) error) error {
	return st.db.View(func(tx *boltstore.ReadTx) error { return fn(tx) })
}

// update runs fn in a write transaction. fn may run more than once (group
// commit reruns a batch when another write in it fails), so it must act
// only through the txn: anything random or expensive is computed before.
// fn returning errNoChange commits nothing and spends no revision.
func (st *State) update(fn func(tx *txn) error) error {
	_, _, err := st.db.Update(func(tx *boltstore.WriteTx) error {
		return fn(&txn{WriteTx: tx, now: st.now()})
	})
	if errors.Is(err, errNoChange) {
		return nil
	}
	return err
}

// txn is a write transaction at the level of entities. put and remove are
// the only ways entity records are written, and each records its change.
type txn struct {
	*boltstore.WriteTx
	now time.Time
}

// doc is implemented by every record type, through the embedded docMeta.
type doc interface{ setRev(uint64) }

// docMeta is embedded in every record.
type docMeta struct {
	// Rev is the revision the record was last written at.
	Rev uint64 `json:"rev"`
}

func (m *docMeta) setRev(rev uint64) { m.Rev = rev }

// put stores d as the record of entity (kind, model, id) and records the
// change with fields.
func (tx *txn) put(kind watcher.Kind, model, id string, d doc, fields ...string) error {
	if u, ok := d.(*unitDoc); ok {
		if err := tx.indexUnit(model, id, u.ProviderID()); err != nil {
			return err
		}
	}
	d.setRev(tx.Revision())
	b, err := json.Marshal(d)
	if err != nil {
		return errors.Annotatef(err, "encoding %s %q", kind, id)
	}
	if err := tx.Put(string(kind), entityKey(kind, model, id), b); err != nil {
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

// remove deletes the record of entity (kind, model, id) and records its
// removal. Removing the last entity of a dying model removes the model too,
// in the same transaction.
func (tx *txn) remove(kind watcher.Kind, model, id string) error {
	if kind == KindUnit {
		if err := tx.indexUnit(model, id, ""); err != nil {
			return err
		}
	}
	if err := tx.Delete(string(kind), entityKey(kind, model, id)); err != nil {
		return errors.Trace(err)
	}
	tx.Record(change(kind, model, id, watcher.FieldRemoved))
	if kind != KindModel && model != "" {
		return tx.removeModelIfDone(model)
	}
	return nil
}

// nextSequence returns the next number of the named per-model sequence,
// starting at 0.
func (tx *txn) nextSequence(model, name string) (int, error) {
	key := model + "/" + name
	next := 0
	if b, ok := tx.Get(bucketSequence, key); ok {
		if err := json.Unmarshal(b, &next); err != nil {
			return 0, errors.Annotatef(err, "decoding sequence %q", key)
		}
	}
	b, _ := json.Marshal(next + 1)
	if err := tx.Put(bucketSequence, key, b); err != nil {
		return 0, errors.Trace(err)
	}
	return next, nil
}

// entityKey is the key of an entity's record within its kind's bucket.
func entityKey(kind watcher.Kind, model, id string) string {
	if kind == KindModel || model == "" {
		return id
	}
	return model + "/" + id
}

// get decodes the record of (kind, model, id) into d and reports whether it
// exists.
func get(r reader, kind watcher.Kind, model, id string, d any) (bool, error) {
	b, ok := r.Get(string(kind), entityKey(kind, model, id))
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(b, d); err != nil {
		return false, errors.Annotatef(err, "decoding %s %q", kind, id)
	}
	return true, nil
}

// listPrefix decodes every record of kind in model whose id starts with
// prefix, in key order.
func listPrefix[T any](r reader, kind watcher.Kind, model, prefix string) ([]T, error) {
	var out []T
	err := r.ForEachPrefix(string(kind), entityKey(kind, model, prefix), func(key string, b []byte) error {
		var d T
		if err := json.Unmarshal(b, &d); err != nil {
			return errors.Annotatef(err, "decoding %s %q", kind, key)
		}
		out = append(out, d)
		return nil
	})
	return out, errors.Trace(err)
}

// list decodes every record of kind in model ("" for all of a
// controller-wide kind), in key order.
func list[T any](r reader, kind watcher.Kind, model string) ([]T, error) {
	prefix := ""
	if kind != KindModel && model != "" {
		prefix = model + "/"
	}
	var out []T
	err := r.ForEachPrefix(string(kind), prefix, func(key string, b []byte) error {
		var d T
		if err := json.Unmarshal(b, &d); err != nil {
			return errors.Annotatef(err, "decoding %s %q", kind, key)
		}
		out = append(out, d)
		return nil
	})
	return out, errors.Trace(err)
}
