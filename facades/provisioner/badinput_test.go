package provisioner_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/rpc/params"
)

// Bad input answers per item with the spec's code and message, keeps the
// request's length and order, and changes nothing else: a call whose items
// all fail commits no revision.
func TestProvisionerBadInputChangesNothing(t *testing.T) {
	f := testkit.NewProvFixture(t)
	bad := []string{"machine-42", "machine-0-lxd-0", "unit-wordpress-0", "bad", ""}
	tests := []struct {
		name   string
		v      int
		method string
		args   any
		n      int // items
	}{
		{"Remove alive", 11, "Remove", testkit.Ents(append(bad, "machine-1")...), 6},
		{"EnsureDead with units", 11, "EnsureDead", testkit.Ents(append(bad, "machine-1")...), 6},
		{"SetPasswords short", 11, "SetPasswords", params.EntityPasswords{Changes: []params.EntityPassword{
			{Tag: "machine-1", Password: "short"}, {Tag: "machine-42", Password: "long-enough-password-1234"}, {Tag: "bad", Password: "long-enough-password-1234"}}}, 3},
		{"SetStatus invalid", 11, "SetStatus", params.SetStatus{Entities: []params.EntityStatusArgs{
			{Tag: "machine-1", Status: "bogus"}, {Tag: "machine-1", Status: "error"}, {Tag: "application-wordpress", Status: "started"}, {Tag: "x", Status: "started"}}}, 4},
		{"SetInstanceStatus invalid", 11, "SetInstanceStatus", params.SetStatus{Entities: []params.EntityStatusArgs{
			{Tag: "machine-1", Status: "started"}, {Tag: "machine-0-lxd-0", Status: "running"}}}, 2},
		{"SetModificationStatus invalid", 11, "SetModificationStatus", params.SetStatus{Entities: []params.EntityStatusArgs{
			{Tag: "machine-1", Status: "running"}}}, 1},
		{"SetSupportedContainers unknown type", 11, "SetSupportedContainers", params.MachineContainersParams{Params: []params.MachineContainers{
			{MachineTag: "machine-1", ContainerTypes: []string{"lxd", "docker"}}, {MachineTag: "machine-42"}, {MachineTag: "bad"}}}, 3},
		{"SetInstanceInfo twice", 11, "SetInstanceInfo", params.InstancesInfo{Machines: []params.InstanceInfo{
			{Tag: "machine-0", InstanceId: "i-again", Nonce: "n"}, {Tag: "machine-1", InstanceId: "", Nonce: "n"},
			{Tag: "machine-1", InstanceId: "i-1", Nonce: "n", Volumes: []params.Volume{{VolumeTag: "bad"}}}, {Tag: "bad"}}}, 4},
		{"MarkMachinesForRemoval alive", 11, "MarkMachinesForRemoval", testkit.Ents("machine-1", "machine-42", "bad"), 3},
		{"SetCharmProfiles bad tags", 11, "SetCharmProfiles", params.SetProfileArgs{Args: []params.SetProfileArg{
			{Entity: params.Entity{Tag: "unit-x-0"}}, {Entity: params.Entity{Tag: "machine-42"}}}}, 2},
		{"ReleaseContainerAddresses", 11, "ReleaseContainerAddresses", testkit.Ents(bad...), 5},
		{"v1 SetProvisioned", 1, "SetProvisioned", params.V1SetProvisioned{Machines: []params.V1MachineSetProvisioned{
			{Tag: "machine-0", InstanceId: "i", Nonce: "n"}, {Tag: "bad"}}}, 2},
		{"v1 UpdateStatus", 1, "UpdateStatus", params.V1SetStatus{Entities: []params.V1EntityStatusArgs{
			{Tag: "machine-1", Data: map[string]any{"a": 1}}, {Tag: "bad"}}}, 2},
		{"v0 Remove", 0, "Remove", testkit.V1Ents(bad...), 5},
		{"v1 EnsureDead", 1, "EnsureDead", testkit.V1Ents("machine-1", "bad"), 2},
		{"v1 SetInstanceInfo network tag", 1, "SetInstanceInfo", params.V1InstancesInfo{Machines: []params.V1InstanceInfo{
			{Tag: "machine-1", InstanceId: "i", Nonce: "n", Networks: []params.V1Network{{Tag: "net"}}}}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rev := f.St.Revision()
			raw := testkit.RawCall(t, f.Ctrl, tt.v, tt.method, tt.args)
			var res map[string][]map[string]json.RawMessage
			if err := json.Unmarshal(raw, &res); err != nil {
				t.Fatal(err)
			}
			items := res["results"]
			if tt.v != 11 {
				items = res["Results"]
			}
			if len(items) != tt.n {
				t.Fatalf("%d results; want %d: %s", len(items), tt.n, raw)
			}
			for i, it := range items {
				e := it["error"]
				if tt.v != 11 {
					e = it["Error"]
				}
				if len(e) == 0 || string(e) == "null" {
					t.Errorf("item %d has no error: %s", i, raw)
				}
			}
			if got := f.St.Revision(); got != rev {
				t.Errorf("revision %d -> %d: a failed call changed state", rev, got)
			}
		})
	}

	// Null or missing params of every kind: empty results, no error.
	for _, c := range []struct {
		v      int
		method string
		key    string
	}{
		{11, "SetPasswords", "results"}, {11, "SetStatus", "results"}, {11, "SetInstanceInfo", "results"},
		{11, "SetSupportedContainers", "results"}, {11, "WatchContainers", "results"}, {11, "WatchAllContainers", "results"},
		{11, "SetCharmProfiles", "results"}, {11, "PrepareContainerInterfaceInfo", "results"},
		{11, "GetContainerProfileInfo", "results"}, {11, "HostChangesForContainers", "results"},
		{11, "ControllerAPIInfoForModels", "results"}, {11, "SetInstanceStatus", "results"},
		{1, "Life", "Results"}, {1, "SetProvisioned", "Results"}, {1, "SetInstanceInfo", "Results"},
		{1, "WatchContainers", "Results"}, {0, "Series", "Results"}, {1, "RequestedNetworks", "Results"},
		{1, "ProvisioningInfo", "Results"}, {1, "Tools", "Results"}, {1, "UpdateStatus", "Results"},
	} {
		for _, args := range []any{nil, json.RawMessage(`{}`)} {
			raw := testkit.RawCall(t, f.Agent, c.v, c.method, args)
			if !strings.Contains(string(raw), `"`+c.key+`":[]`) {
				t.Errorf("%s v%d(%s) = %s; want empty %s", c.method, c.v, args, raw, c.key)
			}
		}
	}
	// Params of the wrong JSON type are a call error; the connection stays.
	err := f.Agent.Call(testkit.Ctx(t), "Provisioner", 11, "", "Life", json.RawMessage(`{"entities":"machine-0"}`), nil)
	if err == nil {
		t.Error("Life with a string for entities succeeded")
	}
	if err := f.Agent.Ping(testkit.Ctx(t)); err != nil {
		t.Errorf("connection after bad params: %v", err)
	}
}
