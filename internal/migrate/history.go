package migrate

import (
	"bytes"
	"context"
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
	// Elided counts the records an etcd target keeps as the keys they
	// wrote only: their revision's records would take a transaction
	// past its request limit (as a commit that large keeps on etcd).
	Elided int
}

// historyReader pulls the records of h after revision 0 up to through,
// page by page, in revision order.
type historyReader struct {
	h       store.Historian
	through uint64
	after   uint64
	more    bool
	buf     []histRec
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
	if r.out.Records == 0 {
		r.out.Oldest, r.out.OldestTime = h.rev, h.t
	}
	r.out.Records++
	r.out.Newest = h.rev
	return h.rev, h.rec, nil
}

// carryHistory loads src's history up to through into dst (empty of
// history). Before dst's Load on etcd (its revisions must come
// after the records'); on bbolt before or after it. It does nothing when
// src keeps no history or dst cannot take one.
func carryHistory(ctx context.Context, src, dst *state.State, through uint64) (History, error) {
	h, ok := src.Store().(store.Historian)
	l, ok2 := dst.Store().(store.HistoryLoader)
	if !ok || !ok2 {
		return History{}, nil
	}
	r := newHistoryReader(h, through)
	n, err := l.LoadHistory(ctx, through, func() (uint64, []byte, error) { return r.next(ctx) })
	if err != nil {
		return r.out, fmt.Errorf("carrying the history: %w", err)
	}
	if n != r.out.Records {
		return r.out, fmt.Errorf("carrying the history: the target took %d records of %d", n, r.out.Records)
	}
	r.out.Carried = true
	return r.out, nil
}

// verifyHistory reads dst's history up to through beside src's and
// compares them record by record: the same revisions, each record the
// same bytes, or (an etcd target, for a revision over its request limit)
// the keys the source's wrote; and dst holds as many as were carried. A
// live source (live) may have pruned its oldest records since they were
// carried: those of dst are only counted. It returns how many records
// were elided.
func verifyHistory(ctx context.Context, src, dst *state.State, through uint64, carried History, live bool) (elided int, err error) {
	if !carried.Carried {
		return 0, nil
	}
	hs, _ := src.Store().(store.Historian)
	hd, _ := dst.Store().(store.Historian)
	rs, rd := newHistoryReader(hs, through), newHistoryReader(hd, through)
	fail := func(format string, args ...any) (int, error) {
		return elided, fmt.Errorf("verifying the history: "+format, args...)
	}
	read := func(r *historyReader) (uint64, []byte, bool, error) {
		rev, rec, err := r.next(ctx)
		if errors.Is(err, io.EOF) {
			return 0, nil, false, nil
		}
		return rev, rec, err == nil, err
	}
	srev, srec, sok, err := read(rs)
	if err != nil {
		return fail("%w", err)
	}
	for {
		drev, drec, dok, err := read(rd)
		if err != nil {
			return fail("%w", err)
		}
		switch {
		case !dok && !sok:
			if rd.out.Records != carried.Records {
				return fail("the target holds %d records up to revision %d, %d were carried", rd.out.Records, through, carried.Records)
			}
			return elided, nil
		case !dok || !sok && !live:
			return fail("the target holds %d records up to revision %d, %d were carried", rd.out.Records, through, carried.Records)
		case live && (!sok || drev < srev):
			continue // pruned from the source since
		case drev != srev:
			return fail("the target's record %d is of revision %d, the source's of %d", rd.out.Records, drev, srev)
		case !bytes.Equal(srec, drec):
			c, err := store.DecodeCommit(srev, srec)
			if err != nil || !bytes.Equal(drec, store.ElideCommit(c)) {
				return fail("the target's record of revision %d differs from the source's", srev)
			}
			elided++
		}
		if srev, srec, sok, err = read(rs); err != nil {
			return fail("%w", err)
		}
	}
}
