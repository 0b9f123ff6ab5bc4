package modeladmin_test

import (
	"slices"
	"testing"

	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// ModelAdmin.WatchModels reports every model at first, then models added,
// made dying and removed, by UUID; a model's config changes are not
// reported.
func TestWatchModels(t *testing.T) {
	d := testkit.Start(t, nil)
	creds := d.Credentials()
	op := testkit.LoginAdmin(t, d, "")
	var wr params.StringsWatchResult
	if err := op.Call(testkit.Ctx(t), "ModelAdmin", 1, "", "WatchModels", nil, &wr); err != nil {
		t.Fatal(err)
	}
	initial := slices.Clone(wr.Changes)
	slices.Sort(initial)
	want := []string{creds.ControllerModelUUID, creds.DefaultModelUUID}
	slices.Sort(want)
	if !slices.Equal(initial, want) {
		t.Fatalf("initial = %v; want %v", initial, want)
	}
	w := client.NewStringsWatcher(op, wr.StringsWatcherId)

	next := testkit.PendingStrings(t, w)
	var added params.ModelSummary
	if err := op.Call(testkit.Ctx(t), "ModelAdmin", 1, "", "AddModel", params.AddModelArgs{Name: "edge"}, &added); err != nil {
		t.Fatal(err)
	}
	testkit.WantIDs(t, next, added.UUID)

	next = testkit.PendingStrings(t, w)
	if err := op.Call(testkit.Ctx(t), "ModelAdmin", 1, "", "SetModelConfig",
		params.SetModelConfigArgs{Model: "edge", Config: map[string]any{"k": "v"}}, nil); err != nil {
		t.Fatal(err)
	}
	testkit.NotYet(t, next)
	// A machine keeps the model dying: the life change, then the removal.
	if err := op.Call(testkit.Ctx(t), "ModelAdmin", 1, "", "AddMachines", params.AddMachinesArgs{Model: "edge"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := op.Call(testkit.Ctx(t), "ModelAdmin", 1, "", "RemoveModel", params.RemoveModelArgs{Model: "edge"}, nil); err != nil {
		t.Fatal(err)
	}
	testkit.WantIDs(t, next, added.UUID)
	next = testkit.PendingStrings(t, w)
	st := d.State()
	if err := st.EnsureMachineDead(t.Context(), added.UUID, "0"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RemoveMachine(t.Context(), added.UUID, "0"); err != nil {
		t.Fatal(err)
	}
	testkit.WantIDs(t, next, added.UUID)
	if _, err := st.Model(t.Context(), added.UUID); err == nil {
		t.Fatal("model still there after its last machine went")
	}
}
