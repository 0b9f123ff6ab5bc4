package migrate

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/store"
)

// This file carries the history of commits (provisionctl history) from
// the source to the target: every record the source keeps, up to the
// revision its records were dumped at, goes into the target under its own
// revision (store.HistoryLoader), and the target's revisions continue
// after it. So the history reads on across a migration, a backup of a
// store on etcd and a restore: the same revisions, times and origins, and
// status --at or a resumed watch from a point before the copy finds it.

// historyPage is how many revisions one read of the source's history
// asks for.
const historyPage = 1000

// History is what a copy did with the history of commits.
type History struct {
	Records        int       // records carried
	Oldest, Newest uint64    // the revisions of the oldest and newest carried (0: none)
	OldestTime     time.Time // the time of the oldest carried
	// Carried is false when the source keeps no history or the target
	// cannot take it (then Records is 0).
	Carried bool
}

// historyDigest sums history records independently of their order (as
// digest sums the store's records), over the revision and the bytes.
type historyDigest struct {
	n   int
	sum [sha256.Size]byte
}

func (d *historyDigest) add(rev uint64, rec []byte) {
	h := sha256.New()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], rev)
	h.Write(b[:])
	h.Write(rec)
	var s [sha256.Size]byte
	h.Sum(s[:0])
	for i := range s {
		d.sum[i] ^= s[i]
	}
	d.n++
}

// historyReader pulls the records of h after revision 0 up to through,
// page by page, in revision order.
type historyReader struct {
	h       store.Historian
	through uint64
	after   uint64
	more    bool
	buf     []histRec
	digest  historyDigest
	out     History
}

type histRec struct {
	rev uint64
	t   time.Time
	rec []byte
}

func newHistoryReader(h store.Historian, through uint64) *historyReader {
	return &historyReader{h: h, through: through, more: true}
}

// next returns the next record, io.EOF after the last.
func (r *historyReader) next(ctx context.Context) (uint64, []byte, error) {
	for len(r.buf) == 0 {
		if !r.more || r.after >= r.through {
			return 0, nil, io.EOF
		}
		last, more, err := r.h.History(ctx, r.after, historyPage, func(c store.Commit) error {
			if c.Rev <= r.through {
				r.buf = append(r.buf, histRec{c.Rev, c.Time, store.EncodeCommit(c)})
			}
			return nil
		})
		if err != nil {
			return 0, nil, fmt.Errorf("reading the source's history: %w", err)
		}
		if more && last <= r.after {
			return 0, nil, fmt.Errorf("reading the source's history: no progress after revision %d", r.after)
		}
		r.after, r.more = last, more
	}
	h := r.buf[0]
	r.buf = r.buf[1:]
	r.digest.add(h.rev, h.rec)
	if r.out.Records == 0 {
		r.out.Oldest, r.out.OldestTime = h.rev, h.t
	}
	r.out.Records++
	r.out.Newest = h.rev
	return h.rev, h.rec, nil
}

// carryHistory loads src's history up to through into dst (empty of
// history), and reads it back from dst to compare: the count and digest
// of every record. Before dst's Load on etcd (its revisions must come
// after the records'); on bbolt before or after it. It does nothing when
// src keeps no history or dst cannot take one.
func carryHistory(ctx context.Context, src, dst *state.State, through uint64) (History, historyDigest, error) {
	h, ok := src.Store().(store.Historian)
	l, ok2 := dst.Store().(store.HistoryLoader)
	if !ok || !ok2 {
		return History{}, historyDigest{}, nil
	}
	r := newHistoryReader(h, through)
	n, err := l.LoadHistory(ctx, through, func() (uint64, []byte, error) { return r.next(ctx) })
	if err != nil {
		return r.out, r.digest, fmt.Errorf("carrying the history: %w", err)
	}
	if n != r.out.Records {
		return r.out, r.digest, fmt.Errorf("carrying the history: the target took %d records of %d", n, r.out.Records)
	}
	r.out.Carried = true
	return r.out, r.digest, nil
}

// verifyHistory reads dst's history up to through and compares it with
// what was carried.
func verifyHistory(ctx context.Context, dst *state.State, through uint64, carried History, want historyDigest) error {
	h, ok := dst.Store().(store.Historian)
	if !ok || !carried.Carried {
		return nil
	}
	r := newHistoryReader(h, through)
	for {
		if _, _, err := r.next(ctx); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("verifying the history: %w", err)
		}
	}
	if r.digest != want {
		return fmt.Errorf("verifying the history: the target holds %d records up to revision %d, %d were carried, and their digests differ",
			r.digest.n, through, want.n)
	}
	return nil
}
