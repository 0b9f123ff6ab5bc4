package etcdstore

import (
	"testing"
)

// TestRecentHistoryBounds: the recent history answers a range only when it
// holds every revision of it; past recentMaxBytes the oldest records go
// first and the ranges that began before them are no longer answered; a
// reset (the replica reloaded) empties it, so that nothing from before the
// reload is served.
func TestRecentHistoryBounds(t *testing.T) {
	var r recentHistory
	r.reset(100)
	if _, ok := r.get(100, 101); ok {
		t.Error("a revision not applied yet answered")
	}
	if rs, ok := r.get(100, 100); !ok || len(rs) != 0 {
		t.Errorf("the empty range: %v, %v; want none, true", rs, ok)
	}
	const size = 128 << 10
	rec := make([]byte, 8)
	// Revisions 101..300: the odd ones with a record of size bytes, the
	// even ones with none (another prefix's commit).
	for rev := int64(101); rev <= 300; rev++ {
		if rev%2 == 1 {
			r.add(rev, [][]byte{rec}, size)
		} else {
			r.advance(rev)
		}
		if r.bytes > recentMaxBytes {
			t.Fatalf("after revision %d it holds %d bytes; bound %d", rev, r.bytes, recentMaxBytes)
		}
	}
	kept := recentMaxBytes / size // records of size bytes that fit
	if len(r.recs) != kept {
		t.Fatalf("it holds %d records; want %d", len(r.recs), kept)
	}
	oldest := r.recs[0].rev
	if r.lo != oldest-2 {
		t.Errorf("lo %d; want %d (the last record let go)", r.lo, oldest-2)
	}
	if _, ok := r.get(r.lo-1, 300); ok {
		t.Error("a range beginning before the records let go answered")
	}
	rs, ok := r.get(r.lo, 300)
	if !ok || len(rs) != kept || rs[0].rev != oldest || rs[len(rs)-1].rev != 299 {
		t.Errorf("(lo, 300]: %d records, %v; want %d from %d to 299", len(rs), ok, kept, oldest)
	}
	rs, ok = r.get(250, 260)
	if !ok || len(rs) != 5 || rs[0].rev != 251 || rs[4].rev != 259 {
		t.Errorf("(250, 260]: %+v, %v; want revisions 251, 253, ..., 259", rs, ok)
	}
	if rs, ok := r.get(299, 300); !ok || len(rs) != 0 {
		t.Errorf("(299, 300]: %v, %v; want none (300 had no record), true", rs, ok)
	}
	r.add(250, [][]byte{rec}, size) // not after hi: ignored
	if r.hi != 300 || len(r.recs) != kept {
		t.Errorf("a revision at or below hi was added: hi %d, %d records", r.hi, len(r.recs))
	}

	r.reset(400) // the replica reloaded at 400
	if _, ok := r.get(290, 300); ok {
		t.Error("a range from before the reload answered after it")
	}
	if r.bytes != 0 || len(r.recs) != 0 {
		t.Errorf("after reset: %d bytes, %d records", r.bytes, len(r.recs))
	}
	r.add(401, [][]byte{rec}, size)
	if rs, ok := r.get(400, 401); !ok || len(rs) != 1 {
		t.Errorf("(400, 401] after reset: %v, %v", rs, ok)
	}
}
