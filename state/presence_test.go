package state_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
	"github.com/provisiond/provisiond/watcher"
)

// TestPresenceRecords: a published record reads back, a later publish of
// the same server and model replaces it (the earlier release then does
// nothing), release removes it, and each put and removal reaches the hub.
func TestPresenceRecords(t *testing.T) {
	hub := watcher.NewHub()
	changes := make(chan watcher.Change, 64)
	defer hub.Subscribe(watcher.Filter{Kind: state.KindPresence}, func(_ uint64, c watcher.Change) { changes <- c })()
	st := statetest.NewWithOptions(t, statetest.Options{Hub: hub})
	ctx := t.Context()
	rec := state.PresenceRecord{Server: "host-1", Model: statetest.DefaultModelUUID, Machines: []string{"0", "1"}}
	rel1, err := st.PublishPresence(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	ctrl := state.PresenceRecord{Server: "host-1", Model: statetest.ControllerModelUUID, Provisioner: true}
	relCtrl, err := st.PublishPresence(ctx, ctrl)
	if err != nil {
		t.Fatal(err)
	}
	defer relCtrl()
	rec.Machines = []string{"1"}
	rel2, err := st.PublishPresence(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	rel1()
	got, err := st.PresenceRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []state.PresenceRecord{ctrl, rec}
	slices.SortFunc(got, func(a, b state.PresenceRecord) int { return strings.Compare(a.Model, b.Model) })
	slices.SortFunc(want, func(a, b state.PresenceRecord) int { return strings.Compare(a.Model, b.Model) })
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("records %+v, want %+v", got, want)
	}
	rel2()
	if got, _ := st.PresenceRecords(t.Context()); len(got) != 1 || got[0].Model != statetest.ControllerModelUUID {
		t.Fatalf("records after release: %+v", got)
	}
	var ids []string
	for len(changes) > 0 {
		c := <-changes
		ids = append(ids, c.ID+" "+c.Fields[0])
	}
	id := "host-1/" + statetest.DefaultModelUUID
	if wantIDs := []string{id + " created", "host-1/" + statetest.ControllerModelUUID + " created", id + " created", id + " removed"}; !reflect.DeepEqual(ids, wantIDs) {
		t.Errorf("hub changes %q, want %q", ids, wantIDs)
	}

	for _, bad := range []state.PresenceRecord{
		{Server: "", Model: statetest.DefaultModelUUID},
		{Server: "a/b", Model: statetest.DefaultModelUUID},
		{Server: "host-1", Model: "not-a-uuid"},
	} {
		if _, err := st.PublishPresence(ctx, bad); !errors.Is(err, errors.NotValid) {
			t.Errorf("PublishPresence(%+v) = %v, want not valid", bad, err)
		}
	}
}
