package state_test

import (
	"errors"
	"strings"
	"testing"

	jujuerrors "github.com/juju/errors"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
)

// overData is status data of many small values, over MaxStatusData in
// all (each value is far under the wire's per-value bound).
func overData() map[string]any {
	d := map[string]any{}
	for i := range state.MaxStatusData / 100 {
		d[strings.Repeat("k", 8)+string(rune('a'+i%26))+strings.Repeat("x", i/26)] = strings.Repeat("v", 100)
	}
	return d
}

// Every status an agent sets is bounded: its message and its data, on
// machines (each status kind, and the 2015 UpdateStatus merge), CAAS
// operators, and pods with their filesystems and volumes. Over a bound:
// NotValid, naming the entity and the limit, and nothing written; at the
// bound: stored.
func TestStatusSizeLimits(t *testing.T) {
	st := statetest.New(t)
	model := statetest.AddModel(t, st, "m", state.ModelTypeIAAS).UUID
	m := statetest.AddMachine(t, st, model, "nonce")
	long := strings.Repeat("m", state.MaxStatusMessage+1)
	refused := func(what string, err error, want string) {
		t.Helper()
		if !errors.Is(err, jujuerrors.NotValid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want NotValid %q", what, err, want)
		}
	}
	rev := st.Revision()
	for _, kind := range []state.StatusKind{state.AgentStatus, state.InstanceStatus, state.ModificationStatus} {
		status := map[state.StatusKind]string{state.AgentStatus: "started", state.InstanceStatus: "running", state.ModificationStatus: "idle"}[kind]
		refused(string(kind)+" message", st.SetMachineStatus(t.Context(), model, m.ID, kind, state.Status{Status: status, Message: long}),
			"status message of machine "+m.ID+": 16385 bytes (limit 16384)")
		refused(string(kind)+" data", st.SetMachineStatus(t.Context(), model, m.ID, kind, state.Status{Status: status, Data: overData()}),
			"status data of machine "+m.ID+": ")
	}
	errs := st.SetMachineStatuses(t.Context(), model, []state.MachineStatusArg{
		{ID: m.ID, Kind: state.AgentStatus, Status: state.Status{Status: "started", Data: overData()}}})
	refused("bulk", errs[0], "(limit 16384)")
	if got := st.Revision(); got != rev {
		t.Errorf("refused statuses moved the revision %d -> %d", rev, got)
	}
	atBound := state.Status{Status: "error", Message: strings.Repeat("m", state.MaxStatusMessage),
		Data: map[string]any{"k": strings.Repeat("v", state.MaxStatusData-len(`{"k":""}`))}}
	if err := st.SetMachineStatus(t.Context(), model, m.ID, state.AgentStatus, atBound); err != nil {
		t.Fatalf("a status at the bounds: %v", err)
	}
	// UpdateStatus merges into the data: the merged data is bounded.
	refused("merge", st.UpdateMachineStatusData(t.Context(), model, m.ID, map[string]any{"more": "x"}), "status data of machine "+m.ID)

	caas := statetest.AddModel(t, st, "k8s", state.ModelTypeCAAS).UUID
	meta, err := charm.ParseMeta([]byte("name: web\nstorage:\n  data:\n    type: filesystem\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddCAASApplication(t.Context(), caas, state.CAASApplicationParams{Name: "web",
		Charm: state.Charm{URL: "local:web-0", Meta: meta}, Scale: 1}); err != nil {
		t.Fatal(err)
	}
	rev = st.Revision()
	refused("operator", st.SetOperatorStatus(t.Context(), caas, "web", state.Status{Status: "active", Message: long}),
		"status message of the operator of application web")
	one := 1
	for _, tt := range []struct {
		name string
		pod  state.Pod
		want string
	}{
		{"pod message", state.Pod{ProviderID: "p0", Status: "running", Info: long}, `status message of pod "p0"`},
		{"pod data", state.Pod{ProviderID: "p0", Status: "error", Data: overData()}, `status data of pod "p0"`},
		{"filesystem", state.Pod{ProviderID: "p0", Status: "running", Filesystems: []state.PodFilesystem{
			{StorageName: "data", FilesystemID: "fs0", Status: "attached", Data: overData()}}}, `status data of filesystem "fs0" of pod "p0"`},
		{"volume", state.Pod{ProviderID: "p0", Status: "running", Filesystems: []state.PodFilesystem{
			{StorageName: "data", FilesystemID: "fs0", Status: "attached", Volume: &state.PodVolume{VolumeID: "v0", Info: long}}}},
			`status message of volume "v0" of pod "p0"`},
	} {
		_, err := st.UpdateCAASUnits(t.Context(), caas, "web", state.UnitsUpdate{Scale: &one, Pods: []state.Pod{tt.pod}})
		refused(tt.name, err, tt.want)
	}
	if got := st.Revision(); got != rev {
		t.Errorf("refused CAAS statuses moved the revision %d -> %d", rev, got)
	}
}
