package modeladmin_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// badInputCase is a ModelAdmin call that must fail with code and a message
// containing msg.
type badInputCase struct {
	name   string
	method string
	args   any
	msg    string
	code   string
}

// runBadInput runs the cases and checks that none of them wrote.
func runBadInput(t *testing.T, d *daemon.Daemon, c *client.Conn, cases []badInputCase) {
	t.Helper()
	rev := d.State().Revision()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testkit.WantErrContaining(t, testkit.ModelAdmin(t, c, tc.method, tc.args, nil), tc.msg, tc.code)
		})
	}
	if got := d.State().Revision(); got != rev {
		t.Errorf("refused calls wrote: revision %d -> %d", rev, got)
	}
}

func TestModelAdminNetwork(t *testing.T) {
	d := testkit.Start(t, nil)
	c := testkit.LoginAdmin(t, d, "")
	model := d.Credentials().DefaultModelUUID

	sp := testkit.AdminCall[params.SpaceInfo](t, c, "AddSpace", params.AddSpaceArgs{Name: "db", ProviderID: "sp-1"})
	if sp.Name != "db" || sp.ProviderID != "sp-1" {
		t.Errorf("AddSpace = %+v", sp)
	}
	testkit.AdminCall[params.SpaceInfo](t, c, "AddSpace", params.AddSpaceArgs{Name: "public"})
	sn := testkit.AdminCall[params.SubnetInfo](t, c, "AddSubnet", params.AddSubnetArgs{CIDR: "10.0.0.0/24", Space: "db",
		Zones: []string{"z1", "z2"}, ProviderID: "sn-0", VLANTag: 42, AllocatableRange: "10.0.0.10-10.0.0.20"})
	if sn.CIDR != "10.0.0.0/24" || sn.Space != "db" || !slices.Equal(sn.Zones, []string{"z1", "z2"}) || sn.VLANTag != 42 ||
		sn.AllocatableIPLow != "10.0.0.10" || sn.AllocatableIPHigh != "10.0.0.20" || sn.Gateway != "10.0.0.1" || sn.Life != "alive" {
		t.Errorf("AddSubnet = %+v", sn)
	}
	testkit.AdminCall[params.SubnetInfo](t, c, "AddSubnet", params.AddSubnetArgs{Model: "default", CIDR: "192.168.0.0/16",
		Space: "public", Zones: []string{"z3"}, ProviderID: "sn-1"})

	// Addresses in use show under their subnet, in address order.
	host, err := d.State().AddMachine(t.Context(), model, state.MachineParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, start := range []uint64{0, 0, 9} {
		if _, err := d.State().AllocateAddress(t.Context(), model, "10.0.0.0/24", host.ID, "eth0", "00:16:3e:00:00:01", start); err != nil {
			t.Fatal(err)
		}
	}
	subnets := testkit.AdminCall[params.SubnetsResult](t, c, "Subnets", params.ModelArgs{})
	if len(subnets.Subnets) != 2 || subnets.Subnets[0].CIDR != "10.0.0.0/24" || subnets.Subnets[1].CIDR != "192.168.0.0/16" {
		t.Fatalf("Subnets = %+v", subnets)
	}
	var used []string
	for _, a := range subnets.Subnets[0].Addresses {
		used = append(used, a.Value+"@"+a.Machine+":"+a.State)
	}
	if want := []string{"10.0.0.10@0:allocated", "10.0.0.11@0:allocated", "10.0.0.19@0:allocated"}; !slices.Equal(used, want) {
		t.Errorf("addresses in use %v, want %v", used, want)
	}
	if a := subnets.Subnets[1].Addresses; a == nil || len(a) != 0 {
		t.Errorf("unused subnet addresses = %#v", a)
	}
	spaces := testkit.AdminCall[params.SpacesResult](t, c, "Spaces", params.ModelArgs{})
	if len(spaces.Spaces) != 2 || !slices.Equal(spaces.Spaces[0].Subnets, []string{"10.0.0.0/24"}) ||
		!slices.Equal(spaces.Spaces[1].Subnets, []string{"192.168.0.0/16"}) {
		t.Errorf("Spaces = %+v", spaces)
	}

	// A dying model takes no new spaces or subnets.
	testkit.AdminCall[params.ModelSummary](t, c, "AddModel", params.AddModelArgs{Name: "going"})
	goingModel, err := d.State().ModelByName(t.Context(), "going")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.State().AddMachine(t.Context(), goingModel.UUID, state.MachineParams{}); err != nil {
		t.Fatal(err)
	}
	testkit.AdminCall[params.RemoveModelResult](t, c, "RemoveModel", params.RemoveModelArgs{Model: "going"})

	ok := params.AddSubnetArgs{CIDR: "172.16.0.0/24", Space: "db", Zones: []string{"z1"}, ProviderID: "sn-2"}
	with := func(f func(*params.AddSubnetArgs)) params.AddSubnetArgs { a := ok; f(&a); return a }
	runBadInput(t, d, c, []badInputCase{
		{"unknown model", "AddSpace", params.AddSpaceArgs{Model: "nope", Name: "x"}, `model "nope" not found`, params.CodeNotFound},
		{"dying model space", "AddSpace", params.AddSpaceArgs{Model: "going", Name: "x"}, `adding a space to dying model "going"`, params.CodeNotValid},
		{"dying model subnet", "AddSubnet", with(func(a *params.AddSubnetArgs) { a.Model = "going" }), `adding a subnet to dying model "going"`, params.CodeNotValid},
		{"duplicate space", "AddSpace", params.AddSpaceArgs{Name: "db"}, `space "db" already exists`, params.CodeAlreadyExists},
		{"bad space name", "AddSpace", params.AddSpaceArgs{Name: "Bad_Name"}, `space name "Bad_Name" not valid`, params.CodeNotValid},
		{"bad space provider id", "AddSpace", params.AddSpaceArgs{Name: "x", ProviderID: "a b"}, `space provider id "a b" not valid`, params.CodeNotValid},
		{"subnet unknown model", "AddSubnet", with(func(a *params.AddSubnetArgs) { a.Model = "nope" }), `model "nope" not found`, params.CodeNotFound},
		{"duplicate subnet", "AddSubnet", with(func(a *params.AddSubnetArgs) { a.CIDR = "10.0.0.0/24" }), `subnet "10.0.0.0/24" already exists`, params.CodeAlreadyExists},
		{"overlapping subnet", "AddSubnet", with(func(a *params.AddSubnetArgs) { a.CIDR = "10.0.0.128/25" }), `subnet "10.0.0.128/25" overlaps subnet "10.0.0.0/24"`, params.CodeNotValid},
		{"duplicate provider id", "AddSubnet", with(func(a *params.AddSubnetArgs) { a.ProviderID = "sn-0" }), `subnet with provider id "sn-0" already exists`, params.CodeAlreadyExists},
		{"bad CIDR", "AddSubnet", with(func(a *params.AddSubnetArgs) { a.CIDR = "172.16.0.300/24" }), `invalid CIDR "172.16.0.300/24"`, params.CodeNotValid},
		{"CIDR not canonical", "AddSubnet", with(func(a *params.AddSubnetArgs) { a.CIDR = "172.16.0.1/24" }), `invalid CIDR "172.16.0.1/24"`, params.CodeNotValid},
		{"range outside", "AddSubnet", with(func(a *params.AddSubnetArgs) { a.AllocatableRange = "172.16.0.10-172.16.1.10" }),
			"allocatable range 172.16.0.10-172.16.1.10 is not inside 172.16.0.0/24", params.CodeNotValid},
		{"range reversed", "AddSubnet", with(func(a *params.AddSubnetArgs) { a.AllocatableRange = "172.16.0.20-172.16.0.10" }), "is reversed: LOW must not be above HIGH", params.CodeNotValid},
		{"range malformed", "AddSubnet", with(func(a *params.AddSubnetArgs) { a.AllocatableRange = "172.16.0.10" }), `allocatable range "172.16.0.10" not valid: want LOW-HIGH`, params.CodeNotValid},
		{"range not addresses", "AddSubnet", with(func(a *params.AddSubnetArgs) { a.AllocatableRange = "a-b" }), `invalid allocatable range "a"-"b"`, params.CodeNotValid},
		{"unknown space", "AddSubnet", with(func(a *params.AddSubnetArgs) { a.Space = "nope" }), `space "nope" not found`, params.CodeNotFound},
		{"no space", "AddSubnet", with(func(a *params.AddSubnetArgs) { a.Space = "" }), "subnet needs a space", params.CodeNotValid},
		{"no zone", "AddSubnet", with(func(a *params.AddSubnetArgs) { a.Zones = nil }), "subnet needs at least one availability zone", params.CodeNotValid},
		{"bad zone", "AddSubnet", with(func(a *params.AddSubnetArgs) { a.Zones = []string{"z 1"} }), `zone "z 1" not valid`, params.CodeNotValid},
		{"zone twice", "AddSubnet", with(func(a *params.AddSubnetArgs) { a.Zones = []string{"z1", "z1"} }), `zone "z1" given twice`, params.CodeNotValid},
		{"no provider id", "AddSubnet", with(func(a *params.AddSubnetArgs) { a.ProviderID = "" }), "subnet needs a provider id", params.CodeNotValid},
		{"bad VLAN", "AddSubnet", with(func(a *params.AddSubnetArgs) { a.VLANTag = 4095 }), "VLAN tag 4095: want 0 to 4094", params.CodeNotValid},
		{"negative VLAN", "AddSubnet", with(func(a *params.AddSubnetArgs) { a.VLANTag = -1 }), "VLAN tag -1", params.CodeNotValid},
		{"subnets unknown model", "Subnets", params.ModelArgs{Model: "nope"}, `model "nope" not found`, params.CodeNotFound},
	})
}

func TestModelAdminAddMachines(t *testing.T) {
	d := testkit.Start(t, nil)
	c := testkit.LoginAdmin(t, d, "")
	st := d.State()
	model := d.Credentials().DefaultModelUUID
	testkit.AdminCall[params.SpaceInfo](t, c, "AddSpace", params.AddSpaceArgs{Name: "db"})
	testkit.AdminCall[params.SubnetInfo](t, c, "AddSubnet", params.AddSubnetArgs{CIDR: "10.0.0.0/24", Space: "db", Zones: []string{"z1"}, ProviderID: "sn-0"})
	if err := st.AddStoragePool(t.Context(), model, "fast", "loop", nil); err != nil {
		t.Fatal(err)
	}
	if err := st.AddStoragePool(t.Context(), model, "files", "rootfs", nil); err != nil {
		t.Fatal(err)
	}

	res := testkit.AdminCall[params.AddMachinesResult](t, c, "AddMachines", params.AddMachinesArgs{Base: "ubuntu@22.04",
		Constraints: "cores=2 mem=4G spaces=db zones=z1", Count: 2, Disks: []string{"fast,2G,2", "ebs,10G"}})
	if !slices.Equal(res.Machines, []string{"0", "1"}) {
		t.Fatalf("AddMachines = %v", res.Machines)
	}
	m, err := st.Machine(t.Context(), model, "1")
	if err != nil {
		t.Fatal(err)
	}
	if m.Base != (state.Base{Name: "ubuntu", Channel: "22.04/stable"}) || m.Constraints.String() != "cores=2 mem=4096M spaces=db zones=z1" ||
		m.Life != state.Alive || m.IsContainer() {
		t.Errorf("machine 1 = %+v", m)
	}
	vols, err := st.MachineVolumes(t.Context(), model, "1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vols {
		got = append(got, v.Pool+":"+strconv.FormatUint(v.Size, 10))
	}
	if want := []string{"fast:2048", "fast:2048", "ebs:10240"}; !slices.Equal(got, want) {
		t.Errorf("machine 1 volumes %v, want %v", got, want)
	}
	// A disk without a pool is the default block source; loop without one.
	res = testkit.AdminCall[params.AddMachinesResult](t, c, "AddMachines", params.AddMachinesArgs{Disks: []string{"3G"}, Placement: "zone=z1"})
	if vols, err := st.MachineVolumes(t.Context(), model, res.Machines[0]); err != nil || len(vols) != 1 || vols[0].Pool != "loop" || vols[0].Size != 3072 {
		t.Errorf("default pool volumes %+v, %v", vols, err)
	}
	if m, _ := st.Machine(t.Context(), model, res.Machines[0]); m.Placement != "zone=z1" {
		t.Errorf("placement %q", m.Placement)
	}
	// Containers: on a machine whose agent has not reported, any type.
	res = testkit.AdminCall[params.AddMachinesResult](t, c, "AddMachines", params.AddMachinesArgs{Placement: "lxd:0", Count: 2})
	if !slices.Equal(res.Machines, []string{"0/lxd/0", "0/lxd/1"}) {
		t.Errorf("containers = %v", res.Machines)
	}
	res = testkit.AdminCall[params.AddMachinesResult](t, c, "AddMachines", params.AddMachinesArgs{Placement: "kvm:0/lxd/0"})
	if !slices.Equal(res.Machines, []string{"0/lxd/0/kvm/0"}) {
		t.Errorf("nested container = %v", res.Machines)
	}
	if err := st.SetSupportedContainers(t.Context(), model, "1", []string{"lxd"}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetMachineDying(t.Context(), model, "2"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddModel(t.Context(), "k8s", state.ModelTypeCAAS, nil); err != nil {
		t.Fatal(err)
	}

	runBadInput(t, d, c, []badInputCase{
		{"unknown model", "AddMachines", params.AddMachinesArgs{Model: "nope"}, `model "nope" not found`, params.CodeNotFound},
		{"caas model", "AddMachines", params.AddMachinesArgs{Model: "k8s"}, `model "k8s" is a caas model: machines need an iaas model`, params.CodeNotSupported},
		{"bad base", "AddMachines", params.AddMachinesArgs{Base: "jammy"}, `base "jammy" not valid: want OS@CHANNEL`, params.CodeNotValid},
		{"bad base OS", "AddMachines", params.AddMachinesArgs{Base: "windows@10"}, `OS "windows" is not one of ubuntu, centos`, params.CodeNotValid},
		{"bad constraint", "AddMachines", params.AddMachinesArgs{Constraints: "cores=two"}, `bad "cores" constraint: must be a non-negative integer`, params.CodeNotValid},
		{"bad mem", "AddMachines", params.AddMachinesArgs{Constraints: "mem=4X"}, `bad "mem" constraint`, params.CodeNotValid},
		{"unknown constraint", "AddMachines", params.AddMachinesArgs{Constraints: "gpus=1"}, `unknown constraint "gpus"`, params.CodeNotValid},
		{"unknown space", "AddMachines", params.AddMachinesArgs{Constraints: "spaces=^nope"}, `"spaces" constraint: space "nope" not found`, params.CodeNotFound},
		{"unknown zone", "AddMachines", params.AddMachinesArgs{Constraints: "zones=z9"}, `"zones" constraint: zone "z9" is not a zone of any subnet (known: z1)`, params.CodeNotValid},
		{"zero count", "AddMachines", params.AddMachinesArgs{Count: -1}, "count -1: want 1 to 100", params.CodeNotValid},
		{"big count", "AddMachines", params.AddMachinesArgs{Count: 101}, "count 101: want 1 to 100", params.CodeNotValid},
		{"bad placement", "AddMachines", params.AddMachinesArgs{Placement: "3"}, `placement "3" not valid: want TYPE:MACHINE (lxd:3, kvm:3) or zone=ZONE`, params.CodeNotValid},
		{"bad container type", "AddMachines", params.AddMachinesArgs{Placement: "docker:0"}, `placement "docker:0" not valid: container type "docker" is not one of lxd, kvm`, params.CodeNotValid},
		{"lxc placement", "AddMachines", params.AddMachinesArgs{Placement: "lxc:0"}, `placement "lxc:0" not valid: container type "lxc" is not one of lxd, kvm`, params.CodeNotValid},
		{"bad host id", "AddMachines", params.AddMachinesArgs{Placement: "lxd:x"}, `placement "lxd:x" not valid: "x" is not a machine id`, params.CodeNotValid},
		{"unknown host", "AddMachines", params.AddMachinesArgs{Placement: "lxd:9"}, "machine 9 not found", params.CodeNotFound},
		{"dying host", "AddMachines", params.AddMachinesArgs{Placement: "lxd:2"}, "machine 2 is dying: it takes no new containers", params.CodeNotValid},
		{"unsupported container", "AddMachines", params.AddMachinesArgs{Placement: "kvm:1", Count: 3}, "machine 1 cannot host kvm containers", params.CodeNotSupported},
		{"unknown zone placement", "AddMachines", params.AddMachinesArgs{Placement: "zone=z9"}, `zone "z9" is not a zone of any subnet`, params.CodeNotValid},
		{"unknown pool", "AddMachines", params.AddMachinesArgs{Disks: []string{"nope,1G"}}, `disks "nope,1G": storage pool "nope" not found`, params.CodeNotFound},
		{"filesystem pool", "AddMachines", params.AddMachinesArgs{Disks: []string{"files,1G"}}, `storage pool "files" (provider rootfs) makes no block storage`, params.CodeNotValid},
		{"bad disks", "AddMachines", params.AddMachinesArgs{Disks: []string{"fast,1X"}}, `disks "fast,1X"`, params.CodeNotValid},
		{"too many disks", "AddMachines", params.AddMachinesArgs{Disks: []string{"fast,1G,10", "fast,1G,7"}}, "at most 16 volumes per machine", params.CodeNotValid},
	})
}

func TestModelAdminRemoveMachines(t *testing.T) {
	d := testkit.Start(t, nil)
	c := testkit.LoginAdmin(t, d, "")
	st := d.State()
	model := d.Credentials().DefaultModelUUID
	testkit.AdminCall[params.AddMachinesResult](t, c, "AddMachines", params.AddMachinesArgs{Count: 3})
	testkit.AdminCall[params.AddMachinesResult](t, c, "AddMachines", params.AddMachinesArgs{Placement: "lxd:1"})
	if _, err := st.AddApplication(t.Context(), model, state.ApplicationParams{Name: "app"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddUnit(t.Context(), model, "app", "2", ""); err != nil {
		t.Fatal(err)
	}

	runBadInput(t, d, c, []badInputCase{
		{"unknown model", "RemoveMachines", params.RemoveMachinesArgs{Model: "nope", Machines: []string{"0"}}, `model "nope" not found`, params.CodeNotFound},
		{"no machines", "RemoveMachines", params.RemoveMachinesArgs{}, "no machines given", params.CodeNotValid},
		{"unknown machine", "RemoveMachines", params.RemoveMachinesArgs{Machines: []string{"0", "9"}}, "machine 9 not found", params.CodeNotFound},
		{"bad id", "RemoveMachines", params.RemoveMachinesArgs{Machines: []string{"0", "lxd"}}, `machine id "lxd" not valid`, params.CodeNotValid},
		{"hosting containers", "RemoveMachines", params.RemoveMachinesArgs{Machines: []string{"0", "1"}}, `machine 1 is hosting containers "1/lxd/0"`, params.CodeHasContainers},
		{"assigned units", "RemoveMachines", params.RemoveMachinesArgs{Machines: []string{"0", "2"}}, `machine 2 has unit "app/0" assigned`, params.CodeHasAssignedUnits},
		{"controller machine", "RemoveMachines", params.RemoveMachinesArgs{Model: "controller", Machines: []string{"0"}, Force: true}, "machine 0 is required by the model", ""},
	})

	r := testkit.AdminCall[params.RemoveMachinesResult](t, c, "RemoveMachines", params.RemoveMachinesArgs{Machines: []string{"0"}})
	if !slices.Equal(r.Dying, []string{"0"}) {
		t.Errorf("RemoveMachines(0) = %v", r)
	}
	r = testkit.AdminCall[params.RemoveMachinesResult](t, c, "RemoveMachines", params.RemoveMachinesArgs{Machines: []string{"0"}})
	if r.Dying == nil || len(r.Dying) != 0 {
		t.Errorf("RemoveMachines(0) again = %#v", r)
	}
	r = testkit.AdminCall[params.RemoveMachinesResult](t, c, "RemoveMachines", params.RemoveMachinesArgs{Machines: []string{"2", "1"}, Force: true})
	if !slices.Equal(r.Dying, []string{"1", "1/lxd/0", "2"}) {
		t.Errorf("RemoveMachines(force) = %v", r)
	}
	// The units on them went (no unit agent would take a dying unit off
	// its machine).
	if u, err := st.Units(t.Context(), model); err != nil || len(u) != 0 {
		t.Errorf("units after force: %+v, %v", u, err)
	}
}

func TestModelAdminAgentBinaries(t *testing.T) {
	d := testkit.Start(t, nil)
	c := testkit.LoginAdmin(t, d, "")
	sum := strings.Repeat("0f", 32)
	b := testkit.AdminCall[params.AgentBinaryInfo](t, c, "AddAgentBinaries", params.AddAgentBinariesArgs{Version: "3.3.0", OS: "ubuntu",
		Arch: "amd64", URL: "https://example.com/juju-3.3.0-ubuntu-amd64.tgz", SHA256: strings.ToUpper(sum), Size: 1234})
	if b.Version != "3.3.0-ubuntu-amd64" || b.SHA256 != sum || b.Size != 1234 || b.URL != "https://example.com/juju-3.3.0-ubuntu-amd64.tgz" {
		t.Errorf("AddAgentBinaries = %+v", b)
	}
	testkit.AdminCall[params.AgentBinaryInfo](t, c, "AddAgentBinaries", params.AddAgentBinariesArgs{Version: "2.9.1", OS: "ubuntu",
		Arch: "arm64", URL: "http://mirror/x", SHA256: sum, Size: 1})
	list := testkit.AdminCall[params.AgentBinariesResult](t, c, "AgentBinaries", nil)
	if len(list.AgentBinaries) != 2 || list.AgentBinaries[0].Version != "2.9.1-ubuntu-arm64" || list.AgentBinaries[1] != b {
		t.Errorf("AgentBinaries = %+v", list)
	}
	// The Provisioner's view of the catalog has them.
	if tools, err := d.State().AgentBinaries(t.Context()); err != nil || len(tools) != 2 {
		t.Errorf("catalog for FindTools = %v, %v", tools, err)
	}

	ok := params.AddAgentBinariesArgs{Version: "3.4.0", OS: "ubuntu", Arch: "amd64", URL: "https://h/x", SHA256: sum, Size: 1}
	with := func(f func(*params.AddAgentBinariesArgs)) params.AddAgentBinariesArgs { a := ok; f(&a); return a }
	runBadInput(t, d, c, []badInputCase{
		{"duplicate", "AddAgentBinaries", with(func(a *params.AddAgentBinariesArgs) { a.Version = "3.3.0" }), "agent binaries 3.3.0-ubuntu-amd64 already exists", params.CodeAlreadyExists},
		{"bad version", "AddAgentBinaries", with(func(a *params.AddAgentBinariesArgs) { a.Version = "3.x" }), `invalid version "3.x": want a version number such as 3.3.0`, params.CodeNotValid},
		{"no OS", "AddAgentBinaries", with(func(a *params.AddAgentBinariesArgs) { a.OS = "" }), "agent binaries need an OS and an architecture", params.CodeNotValid},
		{"bad OS", "AddAgentBinaries", with(func(a *params.AddAgentBinariesArgs) { a.OS = "Ubuntu" }), `invalid binary version "3.4.0-Ubuntu-amd64"`, params.CodeNotValid},
		{"bad arch", "AddAgentBinaries", with(func(a *params.AddAgentBinariesArgs) { a.Arch = "sparc" }), `architecture "sparc" not valid`, params.CodeNotValid},
		{"bad sha256", "AddAgentBinaries", with(func(a *params.AddAgentBinariesArgs) { a.SHA256 = "xyz" }), `sha256 "xyz" is not 64 lowercase hex digits`, params.CodeNotValid},
		{"bad size", "AddAgentBinaries", with(func(a *params.AddAgentBinariesArgs) { a.Size = 0 }), "size 0 is not positive", params.CodeNotValid},
		{"bad url", "AddAgentBinaries", with(func(a *params.AddAgentBinariesArgs) { a.URL = "file:///x" }), `url "file:///x" is not an absolute http or https URL`, params.CodeNotValid},
	})
}

func TestModelAdminStatus(t *testing.T) {
	d := testkit.Start(t, nil)
	c := testkit.LoginAdmin(t, d, d.Credentials().DefaultModelUUID)
	st := d.State()
	model := d.Credentials().DefaultModelUUID
	testkit.AdminCall[params.SpaceInfo](t, c, "AddSpace", params.AddSpaceArgs{Name: "db"})
	testkit.AdminCall[params.SubnetInfo](t, c, "AddSubnet", params.AddSubnetArgs{CIDR: "10.0.0.0/24", Space: "db", Zones: []string{"z1"},
		ProviderID: "sn-0", AllocatableRange: "10.0.0.10-10.0.0.20"})
	testkit.AdminCall[params.AddMachinesResult](t, c, "AddMachines", params.AddMachinesArgs{Base: "ubuntu@22.04", Constraints: "mem=4G", Count: 2, Disks: []string{"loop,1G"}})
	testkit.AdminCall[params.AddMachinesResult](t, c, "AddMachines", params.AddMachinesArgs{Placement: "lxd:0"})
	testkit.AdminCall[params.AddMachinesResult](t, c, "AddMachines", params.AddMachinesArgs{Placement: "kvm:0/lxd/0"})
	testkit.AdminCall[params.AddMachinesResult](t, c, "AddMachines", params.AddMachinesArgs{Placement: "lxd:0"})
	arch, mem, zone := "amd64", uint64(4096), "z1"
	if err := st.SetInstanceInfo(t.Context(), model, "0", state.InstanceInfo{InstanceID: "i-0", Nonce: "n",
		Hardware: &state.HardwareCharacteristics{Arch: &arch, Mem: &mem, AvailabilityZone: &zone}}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetMachineStatus(t.Context(), model, "0", state.InstanceStatus, state.Status{Status: "running", Message: "up"}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetMachineStatus(t.Context(), model, "0", state.AgentStatus, state.Status{Status: "started"}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetSupportedContainers(t.Context(), model, "0", []string{"lxd", "kvm"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AllocateAddress(t.Context(), model, "10.0.0.0/24", "0/lxd/0", "eth0", "00:16:3e:00:00:01", 0); err != nil {
		t.Fatal(err)
	}
	// Machine 0's agent is connected, so its recorded status shows
	// (presence_test.go has the agents that are not).
	const agentPassword = "machine-0-agent-password-for-tests"
	if err := st.SetMachinePassword(t.Context(), model, "0", agentPassword); err != nil {
		t.Fatal(err)
	}
	if _, err := testkit.Dial(t, d, model).LoginAgent(testkit.Ctx(t), "machine-0", agentPassword, "n"); err != nil {
		t.Fatal(err)
	}

	s := testkit.AdminCall[params.ModelStatus](t, c, "Status", params.ModelArgs{})
	if s.Model != "default" || s.UUID != model || s.Type != "iaas" || s.Life != "alive" || len(s.Machines) != 2 {
		t.Fatalf("Status = %+v", s)
	}
	m0 := s.Machines[0]
	if m0.ID != "0" || m0.InstanceID != "i-0" || m0.Base != "ubuntu@22.04" || m0.Constraints != "mem=4096M" ||
		m0.AgentStatus.Status != "started" || m0.InstanceStatus.Status != "running" || m0.InstanceStatus.Message != "up" ||
		m0.InstanceStatus.Since == "" || m0.Hardware != "arch=amd64 mem=4096M availability-zone=z1" ||
		m0.SupportedContainers == nil || !slices.Equal(*m0.SupportedContainers, []string{"lxd", "kvm"}) ||
		len(m0.Volumes) != 1 || m0.Volumes[0].Pool != "loop" || m0.Volumes[0].Size != 1024 {
		t.Errorf("machine 0 = %+v", m0)
	}
	var tree []string
	var walk func(ms []params.MachineStatus, depth int)
	walk = func(ms []params.MachineStatus, depth int) {
		for _, m := range ms {
			tree = append(tree, strings.Repeat(">", depth)+m.ID)
			walk(m.Containers, depth+1)
		}
	}
	walk(s.Machines, 0)
	if want := []string{"0", ">0/lxd/0", ">>0/lxd/0/kvm/0", ">0/lxd/1", "1"}; !slices.Equal(tree, want) {
		t.Errorf("machine tree %v, want %v", tree, want)
	}
	if c0 := m0.Containers[0]; !slices.Equal(c0.Addresses, []string{"10.0.0.10"}) || c0.AgentStatus.Status != "pending" || c0.SupportedContainers != nil {
		t.Errorf("container 0/lxd/0 = %+v", c0)
	}
	if len(s.Subnets) != 1 || len(s.Subnets[0].Addresses) != 1 || s.Subnets[0].Addresses[0].Machine != "0/lxd/0" ||
		len(s.Spaces) != 1 || s.Spaces[0].Name != "db" {
		t.Errorf("status networking = %+v / %+v", s.Subnets, s.Spaces)
	}

	// An empty model, and an unknown one.
	testkit.AdminCall[params.ModelSummary](t, c, "AddModel", params.AddModelArgs{Name: "empty"})
	if e := testkit.AdminCall[params.ModelStatus](t, c, "Status", params.ModelArgs{Model: "empty"}); e.Machines == nil || e.Subnets == nil || e.Spaces == nil {
		t.Errorf("empty model status has nulls: %+v", e)
	}
	testkit.WantErr(t, testkit.ModelAdmin(t, c, "Status", params.ModelArgs{Model: "nope"}, nil), `model "nope" not found`, params.CodeNotFound)
}
