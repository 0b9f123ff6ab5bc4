package migrate

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/store"
)

// This file copies the records of one store into another, empty one
// (provisiond migrate, restore into etcd, backup in etcd mode): a dump of
// the source at one revision (store.Dumper) streamed into the target's
// load (store.Loader), and the digests that verify the copy.

// Keys migrate handles itself: the controller record, which goes first so
// that a daemon meeting a half-loaded etcd prefix finds a controller and
// the load's mark together (and refuses it); and the identity record,
// which only a shared store holds (a bbolt data dir keeps the identity in
// files). They are state's keys (entityKey, identityKey there): a test
// checks that the controller and its identity are found after a copy.
var (
	controllerKey = store.Key(string(state.KindController), state.ControllerID)
	identityKey   = store.Key("identity", "controller")
)

// record is one key and value of a dump.
type record struct {
	key string
	val []byte
}

// digest sums a set of records independently of their order (the XOR of
// each record's SHA-256), counts them and notes whether they came in
// strictly ascending key order, as a dump must give them.
type digest struct {
	n         int
	sum       [sha256.Size]byte
	last      string
	unordered bool
}

func (d *digest) add(key string, val []byte) {
	if d.n > 0 && key <= d.last {
		d.unordered = true
	}
	d.last = key
	d.n++
	h := sha256.New()
	var l [binary.MaxVarintLen64]byte
	h.Write(l[:binary.PutUvarint(l[:], uint64(len(key)))])
	io.WriteString(h, key)
	h.Write(val)
	var s [sha256.Size]byte
	h.Sum(s[:0])
	for i := range s {
		d.sum[i] ^= s[i]
	}
}

func (d *digest) same(o *digest) bool { return d.n == o.n && d.sum == o.sum }

// dumpDigest reads every record of src at one revision and sums them.
func dumpDigest(ctx context.Context, src store.Dumper) (digest, uint64, error) {
	var d digest
	rev, err := src.Dump(ctx, func(key string, val []byte) error {
		d.add(key, val)
		return nil
	})
	return d, rev, err
}

// copyResult is what copyRecords did.
type copyResult struct {
	source digest // every record the dump gave, skipped ones included
	loaded digest // what went into the target
	rev    uint64 // the source's revision the dump read
}

// dumperLoader returns the Dumper of src and the Loader of dst, or says
// which store cannot.
func dumperLoader(src, dst *state.State) (store.Dumper, store.Loader, error) {
	d, ok := src.Store().(store.Dumper)
	if !ok {
		return nil, nil, fmt.Errorf("a %s store cannot be dumped", src.Store().Info().Engine)
	}
	l, ok := dst.Store().(store.Loader)
	if !ok {
		return nil, nil, fmt.Errorf("a %s store cannot be loaded", dst.Store().Info().Engine)
	}
	return d, l, nil
}

// copyRecords loads into dst (empty) first's records and then every
// record src dumps (at one revision) but those skip names. progress, if
// not nil, is told how many records have gone in so far. The dump runs on
// its own goroutine, handing records over in batches; it ends before
// copyRecords returns.
func copyRecords(ctx context.Context, src store.Dumper, dst store.Loader, first []record, skip func(key string) bool, progress func(n int)) (copyResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	const batch = 256
	var (
		res     copyResult
		dumpErr error
		batches = make(chan []record, 4)
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		defer close(batches)
		b := make([]record, 0, batch)
		send := func() error {
			select {
			case batches <- b:
				b = make([]record, 0, batch)
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		res.rev, dumpErr = src.Dump(ctx, func(key string, val []byte) error {
			res.source.add(key, val)
			if skip(key) {
				return nil
			}
			if b = append(b, record{key, val}); len(b) == batch {
				return send()
			}
			return nil
		})
		if dumpErr == nil && len(b) > 0 {
			dumpErr = send()
		}
	}()
	pending := first
	next := func() (string, []byte, error) {
		for len(pending) == 0 {
			b, ok := <-batches
			if !ok {
				<-done
				if dumpErr != nil {
					return "", nil, fmt.Errorf("dumping the source: %w", dumpErr)
				}
				return "", nil, io.EOF
			}
			pending = b
		}
		r := pending[0]
		pending = pending[1:]
		res.loaded.add(r.key, r.val)
		if progress != nil {
			progress(res.loaded.n)
		}
		return r.key, r.val, nil
	}
	n, err := dst.Load(ctx, next)
	cancel()
	<-done
	if err != nil {
		return res, err
	}
	if n != res.loaded.n {
		return res, fmt.Errorf("the target took %d records of %d", n, res.loaded.n)
	}
	return res, nil
}
