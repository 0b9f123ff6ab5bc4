package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/provisiond/provisiond/state/store"
)

// testHistory: every commit keeps its history record, in revision order,
// with the origin its Update's context carried, each key's creation,
// removal and the members of a JSON object that changed; paging goes on
// where it stopped.
func testHistory(t *testing.T, s Suite) {
	st, _ := s.open(t)
	h, ok := st.(store.Historian)
	if !ok {
		t.Skip("the store keeps no history")
	}
	ctx := s.ctx(t)
	o := store.Origin{Who: "user-admin", Addr: "192.0.2.1:5000", Daemon: "d0", Call: "ModelAdmin.AddMachines"}
	octx := store.WithOrigin(ctx, o)
	start := st.Revision()
	r1 := update(t, octx, st, func(tx store.Txn) error {
		return tx.Put("machine/m/0", []byte(`{"id":"0","status":"pending","life":"alive"}`))
	})
	r2 := update(t, ctx, st, func(tx store.Txn) error {
		if err := tx.Put("machine/m/0", []byte(`{"id":"0","status":"started","life":"alive","addr":"10.0.0.1"}`)); err != nil {
			return err
		}
		return tx.Put("raw/x", []byte("plain"))
	})
	r3 := update(t, octx, st, func(tx store.Txn) error {
		if err := tx.Delete("machine/m/0"); err != nil {
			return err
		}
		return tx.Put("raw/x", []byte("other"))
	})
	var got []string
	last, more, err := h.History(ctx, start, 0, func(c store.Commit) error {
		if c.Time.IsZero() {
			t.Errorf("revision %d has no time", c.Rev)
		}
		got = append(got, fmt.Sprintf("%d %+v", c.Rev, c.Origin))
		for _, w := range c.Writes {
			got = append(got, fmt.Sprintf("  %s %d %q %q", w.Key, w.Op, w.Before, w.After))
			for _, m := range w.Members {
				got = append(got, fmt.Sprintf("    %s %v %s -> %v %s", m.Name, m.Before != nil, m.Before, m.After != nil, m.After))
			}
		}
		return nil
	})
	if err != nil || more || last != r3 {
		t.Fatalf("History = %d, %v, %v; want %d, false", last, more, err, r3)
	}
	want := []string{
		fmt.Sprintf("%d %+v", r1, o),
		`  machine/m/0 1 "" "{\"id\":\"0\",\"status\":\"pending\",\"life\":\"alive\"}"`,
		fmt.Sprintf("%d %+v", r2, store.Origin{}),
		`  machine/m/0 4 "" ""`,
		`    status true "pending" -> true "started"`,
		`    addr false  -> true "10.0.0.1"`,
		`  raw/x 1 "" "plain"`,
		fmt.Sprintf("%d %+v", r3, o),
		`  machine/m/0 2 "{\"id\":\"0\",\"status\":\"started\",\"life\":\"alive\",\"addr\":\"10.0.0.1\"}" ""`,
		`  raw/x 3 "plain" "other"`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("history:\n%q\nwant\n%q", got, want)
	}
	// Paged one revision at a time.
	var revs []uint64
	for after := start; ; {
		l, more, err := h.History(ctx, after, 1, func(c store.Commit) error {
			revs = append(revs, c.Rev)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		after = l
		if !more {
			break
		}
	}
	if fmt.Sprint(revs) != fmt.Sprint([]uint64{r1, r2, r3}) {
		t.Errorf("paged: %v, want %v", revs, []uint64{r1, r2, r3})
	}
	stats, err := h.HistoryStats(context.Background())
	if err != nil || stats.Oldest == 0 || stats.Oldest > r1 || stats.OldestTime.IsZero() {
		t.Errorf("HistoryStats = %+v, %v", stats, err)
	}
}
