package modeladmin_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/internal/buildinfo"
	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// ModelAdmin's methods behind provisionctl's operator verbs,
// through the real websocket: ControllerInfo, models by UUID, the
// removals, remove-machine --no-wait and ModelEntities.

func TestModelAdminControllerInfo(t *testing.T) {
	d := testkit.Start(t, nil)
	c := testkit.LoginAdmin(t, d, "")
	// The keys on the wire, present even when empty.
	raw := testkit.AdminCall[map[string]json.RawMessage](t, c, "ControllerInfo", nil)
	for _, k := range []string{"controller-uuid", "controller-model-uuid", "api-addresses", "api-version", "version",
		"revision", "go-version", "models", "store"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("ControllerInfo lacks %q: %s", k, raw)
		}
	}
	var store map[string]json.RawMessage
	if err := json.Unmarshal(raw["store"], &store); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"engine", "schema-version", "revision", "size-bytes"} {
		if _, ok := store[k]; !ok {
			t.Errorf("store lacks %q: %s", k, raw["store"])
		}
	}
	info := testkit.AdminCall[params.ControllerInfo](t, c, "ControllerInfo", nil)
	creds := d.Credentials()
	if info.ControllerUUID != creds.ControllerUUID || info.ControllerModelUUID != creds.ControllerModelUUID ||
		!slices.Equal(info.APIAddresses, []string{d.Addr()}) || info.APIVersion != "3.3.0" ||
		info.Version != buildinfo.Version || info.Models != 2 || info.Store.Engine != "bbolt" ||
		info.Store.SchemaVersion == 0 || info.Store.Revision != d.State().Revision() || info.Store.SizeBytes <= 0 ||
		info.Store.InUseBytes <= 0 || info.Store.InUseBytes > info.Store.SizeBytes || info.Store.QuotaBytes != 0 || info.Store.Members != nil {
		t.Fatalf("ControllerInfo = %+v", info)
	}
	metrics := testkit.MetricsText(t, d, nil)
	for _, want := range []string{"provisiond_store_size_bytes ", "provisiond_store_size_in_use_bytes "} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(metrics, "provisiond_store_etcd_") || strings.Contains(metrics, "provisiond_store_quota_bytes") {
		t.Error("/metrics of a bbolt daemon has etcd's figures")
	}
}

// ControllerInfo on an etcd controller (what provisionctl version and
// show-controller call): the store's figures are etcd's, in the same
// engine-neutral keys, with etcd's member; and /metrics exports them.
func TestModelAdminControllerInfoOnEtcd(t *testing.T) {
	srv := provisiondtest.Start(t, provisiondtest.WithStore(provisiondtest.StoreEtcd))
	d := testkit.Daemon(srv)
	c := testkit.LoginAdmin(t, d, "")
	endpoints, _ := srv.Etcd()
	var info params.ControllerInfo
	// The member watch probes at once; its first answer may still be on
	// its way.
	testkit.WaitFor(t, "the etcd member's first status", func() bool {
		info = testkit.AdminCall[params.ControllerInfo](t, c, "ControllerInfo", nil)
		return len(info.Store.Members) == 1 && info.Store.Members[0].SizeBytes > 0
	})
	s := info.Store
	if info.ControllerUUID != d.Credentials().ControllerUUID || info.Models != 2 || s.Engine != "etcd" || s.SchemaVersion != 0 ||
		s.Revision == 0 || s.Revision > d.State().Revision() || s.SizeBytes <= 0 || s.InUseBytes <= 0 || s.InUseBytes > s.SizeBytes ||
		s.Members[0].Endpoint != endpoints[0] || !s.Members[0].Up || s.Members[0].SizeBytes != s.SizeBytes {
		t.Fatalf("ControllerInfo on etcd = %+v", info)
	}
	raw := testkit.AdminCall[map[string]json.RawMessage](t, c, "ControllerInfo", nil)
	var store map[string]json.RawMessage
	if err := json.Unmarshal(raw["store"], &store); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"engine", "schema-version", "revision", "size-bytes", "in-use-bytes", "members"} {
		if _, ok := store[k]; !ok {
			t.Errorf("store lacks %q: %s", k, raw["store"])
		}
	}
	metrics := testkit.MetricsText(t, d, nil)
	for _, want := range []string{"provisiond_store_size_bytes ", "provisiond_store_size_in_use_bytes ",
		`provisiond_store_etcd_member_up{endpoint="` + endpoints[0] + `"} 1`, `provisiond_store_etcd_db_size_bytes{endpoint="` + endpoints[0] + `"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// -m takes a UUID as well as a name.
func TestModelAdminModelByUUID(t *testing.T) {
	d := testkit.Start(t, nil)
	c := testkit.LoginAdmin(t, d, "")
	uuid := d.Credentials().DefaultModelUUID
	st := testkit.AdminCall[params.ModelStatus](t, c, "Status", params.ModelArgs{Model: uuid})
	if st.Model != "default" || st.UUID != uuid {
		t.Fatalf("Status by UUID = %+v", st)
	}
	added := testkit.AdminCall[params.ModelSummary](t, c, "AddModel", params.AddModelArgs{Name: "edge"})
	res := testkit.AdminCall[params.RemoveModelResult](t, c, "RemoveModel", params.RemoveModelArgs{Model: added.UUID})
	if !res.Removed || res.Name != "edge" {
		t.Fatalf("RemoveModel by UUID = %+v", res)
	}
	// A UUID that is no model's (any more) is not found, whatever it
	// looks like as a name.
	for _, u := range []string{added.UUID, "0" + added.UUID[1:], "a" + added.UUID[1:]} {
		testkit.WantErr(t, testkit.ModelAdmin(t, c, "Status", params.ModelArgs{Model: u}, nil), `model "`+u+`" not found`, params.CodeNotFound)
	}
	// ModelEntities of a removed model, by UUID: its record is gone.
	gone := testkit.AdminCall[params.ModelEntitiesResult](t, c, "ModelEntities", params.ModelEntitiesArgs{Model: added.UUID,
		Entities: []string{"model/" + added.UUID}})
	if len(gone.Entities) != 1 || !gone.Entities[0].Removed {
		t.Errorf("ModelEntities of a removed model = %+v", gone)
	}
	// A model whose name looks like a UUID is found by name.
	look := "a" + added.UUID[1:]
	testkit.AdminCall[params.ModelSummary](t, c, "AddModel", params.AddModelArgs{Name: look})
	if st := testkit.AdminCall[params.ModelStatus](t, c, "Status", params.ModelArgs{Model: look}); st.Model != look {
		t.Fatalf("Status of a model named like a UUID = %+v", st)
	}
}

func TestModelAdminRemovals(t *testing.T) {
	d := testkit.Start(t, nil)
	c := testkit.LoginAdmin(t, d, "")
	testkit.AdminCall[params.SpaceInfo](t, c, "AddSpace", params.AddSpaceArgs{Name: "db"})
	testkit.AdminCall[params.SpaceInfo](t, c, "AddSpace", params.AddSpaceArgs{Name: "spare", ProviderID: "sp-1"})
	testkit.AdminCall[params.SubnetInfo](t, c, "AddSubnet", params.AddSubnetArgs{CIDR: "10.0.0.0/24", Space: "db",
		Zones: []string{"z"}, ProviderID: "s0", AllocatableRange: "10.0.0.10-10.0.0.20"})
	host := testkit.AdminCall[params.AddMachinesResult](t, c, "AddMachines", params.AddMachinesArgs{Placement: "zone=z"}).Machines[0]
	ctr := testkit.AdminCall[params.AddMachinesResult](t, c, "AddMachines", params.AddMachinesArgs{Placement: "lxd:" + host}).Machines[0]
	m := d.Credentials().DefaultModelUUID
	if _, err := d.State().AllocateAddress(t.Context(), m, "10.0.0.0/24", ctr, "eth0", "00:16:3e:00:00:01", 0); err != nil {
		t.Fatal(err)
	}
	bin := params.AddAgentBinariesArgs{Version: "3.3.0", OS: "ubuntu", Arch: "amd64", URL: "https://example.com/a.tgz",
		SHA256: strings.Repeat("ab", 32), Size: 1024}
	testkit.AdminCall[params.AgentBinaryInfo](t, c, "AddAgentBinaries", bin)

	nv, nf := params.CodeNotValid, params.CodeNotFound
	runBadInput(t, d, c, []badInputCase{
		{"space with subnets", "RemoveSpace", params.RemoveSpaceArgs{Name: "db"}, `space "db" holds subnets 10.0.0.0/24: remove them first`, nv},
		{"unknown space", "RemoveSpace", params.RemoveSpaceArgs{Name: "nope"}, `space "nope" not found`, nf},
		{"no space", "RemoveSpace", params.RemoveSpaceArgs{}, "space name is required", nv},
		{"subnet in use", "RemoveSubnet", params.RemoveSubnetArgs{CIDR: "10.0.0.0/24"}, `subnet "10.0.0.0/24" has 1 address(es) in use (10.0.0.`, nv},
		{"unknown subnet", "RemoveSubnet", params.RemoveSubnetArgs{CIDR: "10.9.0.0/24"}, `subnet "10.9.0.0/24" not found`, nf},
		{"no subnet", "RemoveSubnet", params.RemoveSubnetArgs{}, "subnet CIDR is required", nv},
		{"unknown binaries", "RemoveAgentBinaries", params.RemoveAgentBinariesArgs{Version: "9.9.9-ubuntu-amd64"}, `agent binaries "9.9.9-ubuntu-amd64" not found`, nf},
		{"no binaries", "RemoveAgentBinaries", params.RemoveAgentBinariesArgs{}, "agent binaries version is required", nv},
		{"unknown model", "RemoveSpace", params.RemoveSpaceArgs{Model: "nope", Name: "spare"}, `model "nope" not found`, nf},
	})

	sp := testkit.AdminCall[params.SpaceInfo](t, c, "RemoveSpace", params.RemoveSpaceArgs{Name: "spare"})
	if sp.Name != "spare" || sp.ProviderID != "sp-1" {
		t.Errorf("RemoveSpace = %+v", sp)
	}
	b := testkit.AdminCall[params.AgentBinaryInfo](t, c, "RemoveAgentBinaries", params.RemoveAgentBinariesArgs{Version: "3.3.0-ubuntu-amd64"})
	if b.Version != "3.3.0-ubuntu-amd64" || b.Size != 1024 {
		t.Errorf("RemoveAgentBinaries = %+v", b)
	}
	if cat := testkit.AdminCall[params.AgentBinariesResult](t, c, "AgentBinaries", nil); len(cat.AgentBinaries) != 0 {
		t.Errorf("catalog after removal = %+v", cat)
	}

	// remove-machine --force --no-wait: the container and its host go at
	// once, deepest first, and the address is released; then the subnet
	// and its space can go.
	testkit.WantErr(t, testkit.ModelAdmin(t, c, "RemoveMachines", params.RemoveMachinesArgs{Machines: []string{host}, NoWait: true}, nil),
		"no-wait needs force: it removes what the machines host", nv)
	rm := testkit.AdminCall[params.RemoveMachinesResult](t, c, "RemoveMachines", params.RemoveMachinesArgs{Machines: []string{host}, Force: true, NoWait: true})
	if !slices.Equal(rm.Removed, []string{ctr, host}) || rm.Dying == nil || len(rm.Dying) != 0 {
		t.Fatalf("RemoveMachines no-wait = %+v; want removed [%s %s]", rm, ctr, host)
	}
	if ms, err := d.State().Machines(t.Context(), m); err != nil || len(ms) != 0 {
		t.Fatalf("machines after no-wait removal: %v %v", ms, err)
	}
	sn := testkit.AdminCall[params.SubnetInfo](t, c, "RemoveSubnet", params.RemoveSubnetArgs{CIDR: "10.0.0.0/24"})
	if sn.CIDR != "10.0.0.0/24" || sn.Space != "db" {
		t.Errorf("RemoveSubnet = %+v", sn)
	}
	testkit.AdminCall[params.SpaceInfo](t, c, "RemoveSpace", params.RemoveSpaceArgs{Name: "db"})
	if st := testkit.AdminCall[params.ModelStatus](t, c, "Status", params.ModelArgs{}); len(st.Spaces) != 0 || len(st.Subnets) != 0 {
		t.Errorf("status after the removals: spaces %v subnets %v", st.Spaces, st.Subnets)
	}
	// Without no-wait the result still has both keys.
	again := testkit.AdminCall[map[string]json.RawMessage](t, c, "RemoveMachines", params.RemoveMachinesArgs{
		Machines: testkit.AdminCall[params.AddMachinesResult](t, c, "AddMachines", params.AddMachinesArgs{}).Machines})
	if string(again["dying"]) == "" || string(again["removed"]) != "[]" {
		t.Errorf("RemoveMachines keys = %s", again)
	}
}

// The messages of bad operator input name the rule.
func TestModelAdminMessagesNameTheRule(t *testing.T) {
	d := testkit.Start(t, nil)
	c := testkit.LoginAdmin(t, d, "")
	testkit.AdminCall[params.SpaceInfo](t, c, "AddSpace", params.AddSpaceArgs{Name: "db"})
	sub := func(cidr, rng string) params.AddSubnetArgs {
		return params.AddSubnetArgs{CIDR: cidr, Space: "db", Zones: []string{"z"}, ProviderID: "s0", AllocatableRange: rng}
	}
	nv := params.CodeNotValid
	runBadInput(t, d, c, []badInputCase{
		{"model name", "AddModel", params.AddModelArgs{Name: "My_Model"},
			`model name "My_Model" not valid: lowercase letters, digits and hyphens, starting with a letter, at most 63 characters`, nv},
		{"CIDR not canonical", "AddSubnet", sub("10.0.0.1/24", ""),
			`invalid CIDR "10.0.0.1/24": not canonical, its network address is 10.0.0.0 (want 10.0.0.0/24)`, nv},
		{"CIDR garbage", "AddSubnet", sub("10.0.0.0", ""), `invalid CIDR "10.0.0.0": want ADDRESS/BITS, such as 10.0.0.0/24`, nv},
		{"reversed range", "AddSubnet", sub("10.0.0.0/24", "10.0.0.200-10.0.0.10"),
			"allocatable range 10.0.0.200-10.0.0.10 is reversed: LOW must not be above HIGH (10.0.0.10-10.0.0.200)", nv},
		{"range outside", "AddSubnet", sub("10.0.0.0/24", "10.0.1.1-10.0.1.2"), "allocatable range 10.0.1.1-10.0.1.2 is not inside 10.0.0.0/24", nv},
		{"size unit", "AddMachines", params.AddMachinesArgs{Constraints: "mem=4X"}, `size "4X": unknown unit "X"; want`, nv},
	})
}

func TestModelAdminModelEntities(t *testing.T) {
	d := testkit.Start(t, nil)
	c := testkit.LoginAdmin(t, d, "")
	id := testkit.AdminCall[params.AddMachinesResult](t, c, "AddMachines", params.AddMachinesArgs{Constraints: "mem=1GiB"}).Machines[0]
	uuid := d.Credentials().DefaultModelUUID
	res := testkit.AdminCall[params.ModelEntitiesResult](t, c, "ModelEntities", params.ModelEntitiesArgs{
		Entities: []string{"machine/" + id, "model/" + uuid, "machine/99"}})
	if len(res.Entities) != 3 {
		t.Fatalf("ModelEntities = %+v", res)
	}
	mc, md, gone := res.Entities[0], res.Entities[1], res.Entities[2]
	if mc.Kind != "machine" || mc.ID != id || mc.Removed || mc.Value["id"] != id || mc.Value["life"] != "alive" {
		t.Errorf("machine = %+v", mc)
	}
	for k := range mc.Value {
		if strings.Contains(k, "password") {
			t.Errorf("machine value holds %q", k)
		}
	}
	if md.Kind != "model" || md.Value["name"] != "default" {
		t.Errorf("model = %+v", md)
	}
	if !gone.Removed || gone.Value != nil {
		t.Errorf("missing machine = %+v", gone)
	}
	// On the wire a removed entity has "value": null and "removed": true.
	raw := testkit.AdminCall[map[string][]map[string]json.RawMessage](t, c, "ModelEntities", params.ModelEntitiesArgs{Entities: []string{"machine/99"}})
	if e := raw["entities"][0]; string(e["removed"]) != "true" || string(e["value"]) != "null" {
		t.Errorf("removed entity on the wire = %s", e)
	}
	runBadInput(t, d, c, []badInputCase{
		{"bad entity", "ModelEntities", params.ModelEntitiesArgs{Entities: []string{"machine"}}, `entity "machine" not valid: want KIND/ID`, params.CodeNotValid},
		{"controller kind", "ModelEntities", params.ModelEntitiesArgs{Entities: []string{string(state.KindUser) + "/admin"}}, `kind "user" not valid`, params.CodeNotValid},
	})
}
