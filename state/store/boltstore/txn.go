package boltstore

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/watcher"
)

// A key "<kind>/<rest>" is kept under rest in the bucket named kind, the
// layout state/db had: a file written before the store seam opens as it is.

// split returns key's bucket and key within it, refusing a key without a
// kind.
func split(key string) (kind, rest string, err error) {
	kind, rest, ok := strings.Cut(key, "/")
	if !ok || kind == "" {
		return "", "", fmt.Errorf("boltstore: %w: %q has no kind", store.ErrBadKey, key)
	}
	return kind, rest, nil
}

// errTxnDone is returned by a Txn used after its function returned.
var errTxnDone = errors.New("boltstore: transaction used after its function returned")

// reader reads one bbolt transaction, through w's write set when w is not
// nil (a txn's own writes).
type reader struct {
	btx *bolt.Tx
	w   *txn
}

func (r *reader) bucket(kind string) *bolt.Bucket {
	if kind == store.MetaKind {
		return nil // the store's own keys are not records ("meta/..." buckets are no kind's)
	}
	return r.btx.Bucket([]byte(kind))
}

// Get returns a copy of the value under key.
func (r *reader) Get(key string) ([]byte, bool, error) {
	var out []byte
	ok, err := r.GetFunc(key, func(v []byte) { out = bytes.Clone(v) })
	return out, ok, err
}

// GetFunc calls fn with the value under key in place: in bbolt's memory
// map, or in the transaction's write set. A key without a kind holds
// nothing.
func (r *reader) GetFunc(key string, fn func(val []byte)) (bool, error) {
	if r.w != nil {
		if r.w.done {
			return false, errTxnDone
		}
		if w, ok := r.w.writes[key]; ok {
			if w.del {
				return false, nil
			}
			fn(w.val)
			return true, nil
		}
	}
	kind, rest, ok := strings.Cut(key, "/")
	if !ok || kind == "" || rest == "" {
		return false, nil
	}
	b := r.bucket(kind)
	if b == nil {
		return false, nil
	}
	v := b.Get([]byte(rest))
	if v == nil {
		return false, nil
	}
	fn(v)
	return true, nil
}

// Revision is the revision the transaction reads.
func (r *reader) Revision() uint64 {
	if r.w != nil {
		return r.w.rev
	}
	rev, _ := decodeU64(r.btx.Bucket(metaBucket).Get(keyRevision))
	return rev
}

// Scan visits, in key order, at most limit keys that start with prefix
// and sort after start, merging the transaction's write set over the
// buckets. A prefix that names a kind ("<kind>/...", the usual) reads one
// bucket; one without a "/" ("", "mach") covers every kind it is a prefix
// of, bucket after bucket in key order.
func (r *reader) Scan(prefix, start string, limit int, fn func(key string, val []byte) error) (string, bool, error) {
	if r.w != nil && r.w.done {
		return "", false, errTxnDone
	}
	if limit <= 0 || limit > store.MaxScan {
		limit = store.MaxScan
	}
	if kind, rest, ok := strings.Cut(prefix, "/"); ok {
		if kind == "" {
			return "", false, nil // no key has an empty kind
		}
		last, _, more, err := r.scanKind(kind, rest, start, limit, fn)
		return last, more, err
	}
	kinds := r.kindsWithPrefix(prefix)
	last := ""
	for i, kind := range kinds {
		l, n, more, err := r.scanKind(kind, "", start, limit, fn)
		if n > 0 {
			last = l
		}
		if err != nil {
			return l, false, err
		}
		if limit -= n; limit == 0 {
			if more {
				return last, true, nil
			}
			// This kind is done: is there a key in a later one?
			for _, k := range kinds[i+1:] {
				if _, n, _, _ := r.scanKind(k, "", start, 1, func(string, []byte) error { return nil }); n > 0 {
					return last, true, nil
				}
			}
			return last, false, nil
		}
	}
	return last, false, nil
}

// kindsWithPrefix returns the kinds a prefix without "/" covers: those of
// the buckets and of the write set that start with it (the store's own
// excluded), ordered as their keys are ("model-name/" before "model/").
func (r *reader) kindsWithPrefix(prefix string) []string {
	seen := map[string]bool{}
	var kinds []string
	add := func(kind string) {
		if strings.HasPrefix(kind, prefix) && kind != store.MetaKind && !seen[kind] {
			seen[kind] = true
			kinds = append(kinds, kind)
		}
	}
	_ = r.btx.ForEach(func(name []byte, _ *bolt.Bucket) error {
		if !ownBucket(name) {
			add(string(name))
		}
		return nil
	})
	if r.w != nil {
		for k := range r.w.writes {
			kind, _, _ := strings.Cut(k, "/")
			add(kind)
		}
	}
	slices.SortFunc(kinds, func(a, b string) int { return strings.Compare(a+"/", b+"/") })
	return kinds
}

// scanKind is Scan within one kind: the keys "<kind>/<restPrefix>..."
// after start. It returns the last key visited, how many it visited and
// whether more follow in the kind.
func (r *reader) scanKind(kind, restPrefix, start string, limit int, fn func(key string, val []byte) error) (string, int, bool, error) {
	head := kind + "/"
	prefix := head + restPrefix
	seek, after := restPrefix, ""
	if start >= prefix {
		r, ok := strings.CutPrefix(start, head)
		if !ok {
			return "", 0, false, nil // start sorts after every key of the kind
		}
		seek, after = r, start
	}
	// The write set's keys in the range, sorted.
	var own []string
	if r.w != nil {
		for k := range r.w.writes {
			if strings.HasPrefix(k, prefix) && (after == "" || k > after) {
				own = append(own, k)
			}
		}
		slices.Sort(own)
	}
	var cur *bolt.Cursor
	var bk, bv []byte
	if b := r.bucket(kind); b != nil {
		cur = b.Cursor()
		bk, bv = cur.Seek([]byte(seek))
	}
	// nextBolt is the bucket's next key in range ("" at the end).
	nextBolt := func() (string, []byte) {
		for bk != nil {
			if !bytes.HasPrefix(bk, []byte(restPrefix)) {
				bk = nil
				break
			}
			k, v := head+string(bk), bv
			if bv == nil || (after != "" && k <= after) { // a nested bucket, or start itself
				bk, bv = cur.Next()
				continue
			}
			return k, v
		}
		return "", nil
	}
	// next returns the merged view's next key and value and advances.
	next := func() (string, []byte, bool) {
		for {
			k, v := nextBolt()
			switch {
			case len(own) > 0 && (k == "" || own[0] <= k):
				ok := own[0]
				own = own[1:]
				if ok == k {
					bk, bv = cur.Next()
				}
				w := r.w.writes[ok]
				if w.del {
					continue
				}
				return ok, w.val, true
			case k != "":
				bk, bv = cur.Next()
				return k, bytes.Clone(v), true
			default:
				return "", nil, false
			}
		}
	}
	last := ""
	for n := 0; n < limit; n++ {
		k, v, ok := next()
		if !ok {
			return last, n, false, nil
		}
		if err := fn(k, v); err != nil {
			return k, n + 1, false, err
		}
		last = k
	}
	_, _, more := next()
	return last, limit, more, nil
}

// write is one buffered write of a txn.
type write struct {
	val []byte
	del bool
}

// undoEntry restores a key's write-set entry when a Nest fails.
type undoEntry struct {
	key  string
	prev write
	had  bool
}

// txn is one Update function's transaction: a write set over the batch's
// bbolt transaction, which holds what the functions before it in the
// batch wrote. Nothing reaches bbolt unless the function succeeds (apply).
type txn struct {
	reader
	rev     uint64
	writes  map[string]write
	meta    []metaOp // the store's own writes (this package's functions only)
	changes []watcher.Change
	nest    int         // Nest depth
	undo    []undoEntry // while nest > 0
	done    bool        // the function returned
}

var _ store.Txn = (*txn)(nil)

func newTxn(btx *bolt.Tx, rev uint64) *txn {
	t := &txn{rev: rev, writes: map[string]write{}}
	t.reader = reader{btx: btx, w: t}
	return t
}

// checkWrite refuses keys and values bbolt cannot store, and the meta kind.
func checkWrite(key string, val []byte) error {
	if err := store.CheckKey(key); err != nil {
		return fmt.Errorf("boltstore: %w", err)
	}
	kind, rest, _ := strings.Cut(key, "/")
	switch {
	case rest == "":
		return fmt.Errorf("boltstore: %w: %q has nothing after its kind", store.ErrBadKey, key)
	case len(kind) > bolt.MaxKeySize || len(rest) > bolt.MaxKeySize:
		return fmt.Errorf("boltstore: %w: a key of %d bytes", store.ErrTooLarge, len(key))
	case len(val) > bolt.MaxValueSize:
		return fmt.Errorf("boltstore: %w: a value of %d bytes", store.ErrTooLarge, len(val))
	}
	return nil
}

func (t *txn) set(key string, w write) {
	if t.nest > 0 {
		prev, had := t.writes[key]
		t.undo = append(t.undo, undoEntry{key: key, prev: prev, had: had})
	}
	t.writes[key] = w
}

// Put buffers a write of a copy of val under key.
func (t *txn) Put(key string, val []byte) error {
	if t.done {
		return errTxnDone
	}
	if err := checkWrite(key, val); err != nil {
		return err
	}
	v := make([]byte, len(val)) // never nil: bbolt takes nil for a bucket
	copy(v, val)
	t.set(key, write{val: v})
	return nil
}

// Delete buffers the removal of key.
func (t *txn) Delete(key string) error {
	if t.done {
		return errTxnDone
	}
	if err := checkWrite(key, nil); err != nil {
		return err
	}
	t.set(key, write{del: true})
	return nil
}

// Record adds c to the transaction's change set.
func (t *txn) Record(c watcher.Change) {
	if !t.done {
		t.changes = append(t.changes, c)
	}
}

// Nest runs fn; if it fails, the writes and changes it made are undone.
func (t *txn) Nest(fn func() error) error {
	if t.done {
		return errTxnDone
	}
	mark, changes := len(t.undo), len(t.changes)
	t.nest++
	err := fn()
	t.nest--
	if err != nil {
		for i := len(t.undo) - 1; i >= mark; i-- {
			u := t.undo[i]
			if u.had {
				t.writes[u.key] = u.prev
			} else {
				delete(t.writes, u.key)
			}
		}
		t.undo = t.undo[:mark]
		t.changes = t.changes[:changes]
		return err
	}
	if t.nest == 0 {
		t.undo = t.undo[:0] // nothing outside can undo them any more
	}
	return nil
}

// metaOp is a write of the store's own keys: to the meta bucket, or to
// another of the store's own buckets (sub).
type metaOp struct {
	sub, key, val []byte
	del           bool
}

// metaPut buffers a write of the store's own key to the meta bucket, or to
// the store's own bucket sub when sub is not nil.
func (t *txn) metaPut(sub, key, val []byte) {
	t.meta = append(t.meta, metaOp{sub: sub, key: key, val: val})
}

// metaDelete buffers the removal of the store's own key.
func (t *txn) metaDelete(sub, key []byte) {
	t.meta = append(t.meta, metaOp{sub: sub, key: key, del: true})
}

// apply writes the write set to the bbolt transaction, making buckets as
// needed, and reports whether it changed a kind's key (a put, or a delete
// of a key that exists) and whether it wrote the store's own keys. When
// hist is not nil it appends to it what each write did (store.AppendWrite:
// the history record), reading each key's value before writing it. An
// error means the bbolt transaction can no longer be committed.
func (t *txn) apply(hist *[]byte) (wrote, meta bool, err error) {
	keys := make([]string, 0, len(t.writes))
	for k := range t.writes {
		keys = append(keys, k)
	}
	slices.Sort(keys) // bbolt writes sorted keys with fewer page splits
	var (
		lastKind string
		b        *bolt.Bucket
	)
	for _, k := range keys {
		w := t.writes[k]
		kind, rest, _ := strings.Cut(k, "/")
		if kind != lastKind || b == nil {
			lastKind = kind
			b = t.btx.Bucket([]byte(kind))
			if b == nil && !w.del {
				if b, err = t.btx.CreateBucket([]byte(kind)); err != nil {
					return false, false, fmt.Errorf("boltstore: creating bucket %q: %w: %w", kind, store.ErrUnavailable, err)
				}
			}
		}
		if w.del {
			var before []byte
			if b != nil {
				before = b.Get([]byte(rest))
			}
			if before == nil {
				continue
			}
			if hist != nil {
				*hist = store.AppendWrite(*hist, k, before, true, nil, false)
			}
			if err := b.Delete([]byte(rest)); err != nil {
				return false, false, fmt.Errorf("boltstore: delete %s: %w: %w", k, store.ErrUnavailable, err)
			}
			wrote = true
			continue
		}
		if hist != nil {
			before := b.Get([]byte(rest))
			*hist = store.AppendWrite(*hist, k, before, before != nil, w.val, true)
		}
		if err := b.Put([]byte(rest), w.val); err != nil {
			return false, false, fmt.Errorf("boltstore: put %s: %w: %w", k, store.ErrUnavailable, err)
		}
		wrote = true
	}
	if len(t.meta) > 0 {
		for _, op := range t.meta {
			mb := t.btx.Bucket(metaBucket)
			if op.sub != nil {
				mb = t.btx.Bucket(op.sub)
			}
			var err error
			if op.del {
				err = mb.Delete(op.key)
			} else {
				err = mb.Put(op.key, op.val)
			}
			if err != nil {
				return false, false, fmt.Errorf("boltstore: writing meta %s: %w: %w", op.key, store.ErrUnavailable, err)
			}
		}
		meta = true
	}
	return wrote, meta, nil
}
