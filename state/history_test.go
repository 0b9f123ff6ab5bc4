package state_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
	"github.com/provisiond/provisiond/state/store"
)

// TestHistory: the writes state makes with a call's origin on the context
// read back as changes of entities (created, then the members that
// changed, before -> after), in revision order, with that origin;
// filtered by model, kind, entity, who and revision range; paged; with
// secrets redacted.
func TestHistory(t *testing.T) {
	st := statetest.New(t)
	ctx := t.Context()
	start := st.Revision()
	o := state.Origin{Who: "user-admin", Addr: "192.0.2.9:4000", Daemon: "d1", Call: "ModelAdmin.AddMachines"}
	m := statetest.AddMachine(t, st, statetest.DefaultModelUUID, "")
	octx := context.WithValue(ctx, state.OriginKey{}, o)
	if err := st.SetMachineStatus(octx, statetest.DefaultModelUUID, m.ID, state.InstanceStatus, state.Status{Status: "running", Message: "up"}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetMachinePassword(octx, statetest.DefaultModelUUID, m.ID, "sekrit-password-of-24chars"); err != nil {
		t.Fatal(err)
	}
	f := state.HistoryFilter{After: start, Model: statetest.DefaultModelUUID, Kind: "machine", Entity: m.ID}
	all, next, more, err := st.History(ctx, f, 0)
	if err != nil || more || next != st.Revision() {
		t.Fatalf("History = %d changes, next %d, more %v, %v (revision %d)", len(all), next, more, err, st.Revision())
	}
	var lines []string
	for _, c := range all {
		lines = append(lines, fmt.Sprintf("%s %s/%s %s %s: %s -> %s", c.Origin.Who, c.Kind, c.ID, c.Op, c.Field, c.Before, c.After))
		if strings.Contains(c.Before+c.After, "sekrit") {
			t.Errorf("a secret in the history: %+v", c)
		}
	}
	text := strings.Join(lines, "\n")
	for _, want := range []string{
		" machine/" + m.ID + " created : ",
		"user-admin machine/" + m.ID + " changed ",
		`"[redacted]"`,
		`"running"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("history lacks %q:\n%s", want, text)
		}
	}
	// By who: the two calls with the origin only.
	f.Who = "user-admin"
	mine, _, _, err := st.History(ctx, f, 0)
	if err != nil || len(mine) == 0 || len(mine) >= len(all) {
		t.Fatalf("by who: %d of %d, %v", len(mine), len(all), err)
	}
	for _, c := range mine {
		if c.Origin != o {
			t.Errorf("by who: %+v", c)
		}
	}
	// Another entity's: none.
	f = state.HistoryFilter{After: start, Kind: "machine", Entity: "no-such"}
	if none, _, _, err := st.History(ctx, f, 0); err != nil || len(none) != 0 {
		t.Errorf("another entity: %+v, %v", none, err)
	}
	// Paged one change at a time: the same changes (a commit is never
	// split, so a page may hold more than one).
	var paged int
	f = state.HistoryFilter{After: start, Model: statetest.DefaultModelUUID, Kind: "machine", Entity: m.ID}
	for i := 0; ; i++ {
		page, next, more, err := st.History(ctx, f, 1)
		if err != nil || i > 100 {
			t.Fatalf("page %d: %v", i, err)
		}
		paged += len(page)
		if !more {
			break
		}
		f.After = next
	}
	if paged != len(all) {
		t.Errorf("paged %d changes, want %d", paged, len(all))
	}
	// Until bounds the revisions.
	f = state.HistoryFilter{After: start, Until: start + 1}
	if first, next, more, err := st.History(ctx, f, 0); err != nil || more || next > start+1 || len(first) == 0 {
		t.Errorf("until: %d changes, next %d, more %v, %v", len(first), next, more, err)
	}
}

// TestMigrateToHistorySchema: a store of schema version 4 (written before
// the engines kept history) is migrated to 5 when it opens, in one
// transaction with nothing to do but the stamp; its history goes on
// (the stamp's own commit keeps a record). A store of a version newer
// than this build's is refused with the message an earlier build gives
// a store this build wrote.
func TestMigrateToHistorySchema(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	if err := state.StampSchema(st, 4); err != nil {
		t.Fatal(err)
	}
	rev := st.Revision()
	if err := state.Migrate(st); err != nil {
		t.Fatal(err)
	}
	if !revisionsAfter(st, rev, 1) {
		t.Errorf("the migration took revisions %d -> %d; want one transaction", rev, st.Revision())
	}
	if v, err := state.StoredSchemaVersion(st); err != nil || v != 5 || state.SchemaVersion != 5 {
		t.Errorf("schema version after the migration: %d, %v (this build's: %d)", v, err, state.SchemaVersion)
	}
	h, ok := st.Store().(store.Historian)
	if !ok {
		t.Fatal("the store keeps no history")
	}
	var kept []string
	if _, _, err := h.History(t.Context(), rev, 0, func(c store.Commit) error {
		for _, w := range c.Writes {
			// On etcd another prefix's writes may take revisions
			// between: the record need only be after rev.
			kept = append(kept, fmt.Sprintf("after:%v %s %s -> %s", c.Rev > rev, w.Key, w.Before, w.After))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"after:true schema/state 4 -> 5"}; !slices.Equal(kept, want) {
		t.Errorf("history of the migration: %q, want %q", kept, want)
	}
	if err := state.StampSchema(st, state.SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	err := state.Migrate(st)
	if !errors.Is(err, state.ErrNewerSchema) || !strings.Contains(err.Error(), "the store has a newer state schema version; use a newer provisiond") {
		t.Errorf("a newer store: %v, want ErrNewerSchema", err)
	}
}
