package state_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
)

func TestParseConstraints(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string // want: the String form
	}{
		{"", ""},
		{"cores=2 mem=4G", "cores=2 mem=4096M"},
		{"  mem=1.5G   root-disk=10T ", "mem=1536M root-disk=10485760M"},
		{"mem=0.1 root-disk=512M", "mem=1M root-disk=512M"},
		{"mem=1P", "mem=1073741824M"},
		{"cpu-cores=4 cpu-power=100", "cores=4 cpu-power=100"},
		{"arch=arm64 container=lxd virt-type=kvm instance-type=m5.large", "arch=arm64 container=lxd instance-type=m5.large virt-type=kvm"},
		{"container=none arch=", "arch= container=none"},
		{"tags=a,b,,c zones=z1,z2 spaces=db,^dmz", "spaces=db,^dmz tags=a,b,c zones=z1,z2"},
		{"tags=", "tags="},
		{"allocate-public-ip=true image-id=img-1 root-disk-source=ssd instance-role=auto",
			"image-id=img-1 instance-role=auto root-disk-source=ssd allocate-public-ip=true"},
	} {
		c, err := state.ParseConstraints(tc.in)
		if err != nil {
			t.Errorf("ParseConstraints(%q): %v", tc.in, err)
			continue
		}
		if got := c.String(); got != tc.want {
			t.Errorf("ParseConstraints(%q).String() = %q, want %q", tc.in, got, tc.want)
		}
		back, err := state.ParseConstraints(c.String())
		if err != nil || !reflect.DeepEqual(back, c) {
			t.Errorf("%q does not read back: %+v, %v", c.String(), back, err)
		}
	}
	for _, tc := range []struct{ in, msg string }{
		{"cores", `malformed constraint "cores"`},
		{"cores=2 cores=3", `bad "cores" constraint: already set`},
		{"cores=2 cpu-cores=3", `bad "cores" constraint: already set`},
		{"cores=-1", `bad "cores" constraint: must be a non-negative integer`},
		{"cores=two", `bad "cores" constraint: must be a non-negative integer`},
		{"mem=4X", `bad "mem" constraint: size "4X": unknown unit "X"; want a number of MiB, or with a unit M, G, T, P, E, Z or Y (powers of 1024; B or iB may follow): 512M, 1G, 1.5GiB`},
		{"mem=-1G", `bad "mem" constraint: size "-1G": not a number; want a number of MiB, or with a unit M, G, T, P, E, Z or Y (powers of 1024; B or iB may follow): 512M, 1G, 1.5GiB`},
		{"mem=Inf", `bad "mem" constraint`},
		{"mem=NaN", `bad "mem" constraint`},
		{"root-disk=1e400", `bad "root-disk" constraint`},
		{"root-disk=99999999999999999999P", `bad "root-disk" constraint`},
		{"arch=sparc", `bad "arch" constraint: "sparc" not recognized`},
		{"container=docker", `bad "container" constraint: invalid container type "docker"`},
		{"spaces=Bad_Space", `bad "spaces" constraint: "Bad_Space" is not a valid space name`},
		{"spaces=db,^db", `bad "spaces" constraint: space "db" is both included and excluded`},
		{"allocate-public-ip=maybe", `bad "allocate-public-ip" constraint: must be 'true' or 'false'`},
		{"gpus=1", `unknown constraint "gpus"`},
	} {
		_, err := state.ParseConstraints(tc.in)
		if !errors.Is(err, errors.NotValid) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("ParseConstraints(%q) = %v, want NotValid %q", tc.in, err, tc.msg)
		}
	}
}

func FuzzParseMachineConstraints(f *testing.F) {
	for _, s := range []string{"cores=2 mem=4G", "spaces=a,^b tags=x", "mem=1.5T arch=amd64", "container=none", "root-disk=.5G"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := state.ParseConstraints(s)
		if err != nil {
			return
		}
		back, err := state.ParseConstraints(c.String())
		if err != nil || !reflect.DeepEqual(back, c) {
			t.Fatalf("%q -> %q does not read back: %+v, %v", s, c.String(), back, err)
		}
	})
}

func TestParseBase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want state.Base
		str  string
	}{
		{"ubuntu@22.04", state.Base{Name: "ubuntu", Channel: "22.04/stable"}, "ubuntu@22.04"},
		{"ubuntu@24.04/edge", state.Base{Name: "ubuntu", Channel: "24.04/edge"}, "ubuntu@24.04/edge"},
		{"centos@9", state.Base{Name: "centos", Channel: "9/stable"}, "centos@9"},
	} {
		b, err := state.ParseBase(tc.in)
		if err != nil || b != tc.want || b.String() != tc.str {
			t.Errorf("ParseBase(%q) = %+v (%q), %v", tc.in, b, b.String(), err)
		}
	}
	for _, tc := range []struct{ in, msg string }{
		{"", `base "" not valid: want OS@CHANNEL`},
		{"jammy", `base "jammy" not valid: want OS@CHANNEL, for example "ubuntu@22.04"`},
		{"ubuntu@", `want OS@CHANNEL`},
		{"@22.04", `want OS@CHANNEL`},
		{"windows@10", `OS "windows" is not one of ubuntu, centos`},
		{"ubuntu@jammy", `channel track "jammy" is not a version such as 22.04`},
		{"ubuntu@22.04/risky", `channel risk "risky" is not one of stable, candidate, beta, edge`},
		// Versions Juju has no series for (core/base/supported.go).
		{"ubuntu@99.99", `ubuntu 99.99 is not a version Juju knows (ubuntu: every release from 12.04 to 24.04)`},
		{"ubuntu@22.05", `ubuntu 22.05 is not a version Juju knows`},
		{"centos@8", `centos 8 is not a version Juju knows (centos: 7, 9)`},
	} {
		_, err := state.ParseBase(tc.in)
		if !errors.Is(err, errors.NotValid) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("ParseBase(%q) = %v, want NotValid %q", tc.in, err, tc.msg)
		}
	}
	if s := (state.Base{}).String(); s != "" {
		t.Errorf("zero Base formats as %q", s)
	}
}

func lives(t *testing.T, st *state.State, model string) map[string]state.Life {
	t.Helper()
	ms, err := st.Machines(t.Context(), model)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]state.Life{}
	for _, m := range ms {
		out[m.ID] = m.Life
	}
	us, err := st.Units(t.Context(), model)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range us {
		out[u.Name] = u.Life
	}
	return out
}

func TestDestroyMachines(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	model := statetest.DefaultModelUUID
	add := func(p state.MachineParams) string {
		t.Helper()
		m, err := st.AddMachine(t.Context(), model, p)
		if err != nil {
			t.Fatal(err)
		}
		return m.ID
	}
	m0 := add(state.MachineParams{})                                   // 0: bare
	m1 := add(state.MachineParams{})                                   // 1: hosts 1/lxd/0, which hosts 1/lxd/0/kvm/0
	c1 := add(state.MachineParams{ParentID: m1, ContainerType: "lxd"}) // 1/lxd/0
	c2 := add(state.MachineParams{ParentID: c1, ContainerType: "kvm"}) // 1/lxd/0/kvm/0
	m2 := add(state.MachineParams{})                                   // 2: has a unit
	if _, err := st.AddApplication(t.Context(), model, state.ApplicationParams{Name: "app"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddUnit(t.Context(), model, "app", m2, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddUnit(t.Context(), model, "app", c2, ""); err != nil {
		t.Fatal(err)
	}

	// Refusals change nothing, even for the machines listed before.
	rev := st.Revision()
	for _, tc := range []struct {
		model string
		ids   []string
		force bool
		kind  error
		msg   string
	}{
		{model, []string{m0, m1}, false, state.ErrHasContainers, `machine 1 is hosting containers "1/lxd/0"`},
		{model, []string{m0, m2}, false, state.ErrHasAssignedUnits, `machine 2 has unit "app/0" assigned`},
		{model, []string{m0, "9"}, true, errors.NotFound, "machine 9 not found"},
		{model, []string{m0, "x/y"}, true, errors.NotValid, `machine id "x/y" not valid`},
		{"nope", []string{m0}, false, errors.NotFound, `model "nope" not found`},
		{statetest.ControllerModelUUID, []string{"0"}, true, nil, "machine 0 is required by the model"},
	} {
		_, err := st.DestroyMachines(t.Context(), tc.model, tc.ids, tc.force)
		if err == nil || (tc.kind != nil && !errors.Is(err, tc.kind)) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("DestroyMachines(%v, force %v) = %v, want %v %q", tc.ids, tc.force, err, tc.kind, tc.msg)
		}
	}
	if st.Revision() != rev {
		t.Fatalf("refused DestroyMachines wrote: revision %d -> %d", rev, st.Revision())
	}

	// A container without containers or units goes alone; its host and
	// the unit's machine are untouched.
	if got, err := st.DestroyMachines(t.Context(), model, []string{m0}, false); err != nil || !slices.Equal(got, []string{m0}) {
		t.Fatalf("DestroyMachines(0) = %v, %v", got, err)
	}
	// Again: nothing to do, nothing written.
	rev = st.Revision()
	if got, err := st.DestroyMachines(t.Context(), model, []string{m0}, false); err != nil || len(got) != 0 || st.Revision() != rev {
		t.Fatalf("DestroyMachines(0) again = %v, %v (revision %d -> %d)", got, err, rev, st.Revision())
	}
	// Forced: the whole tree becomes dying and the units on it go (no
	// unit agent would ever take a dying unit off its machine).
	got, err := st.DestroyMachines(t.Context(), model, []string{m1, m2}, true)
	if err != nil || !slices.Equal(got, []string{m1, c1, c2, m2}) {
		t.Fatalf("DestroyMachines(1, 2, force) = %v, %v", got, err)
	}
	want := map[string]state.Life{m0: state.Dying, m1: state.Dying, c1: state.Dying, c2: state.Dying, m2: state.Dying}
	if l := lives(t, st, model); !reflect.DeepEqual(l, want) {
		t.Errorf("lives = %v, want %v", l, want)
	}
}

func TestAddContainerSupportedTypes(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	model := statetest.DefaultModelUUID
	host := statetest.AddMachine(t, st, model, "")
	// Unknown until the agent reports: any type goes.
	if _, err := st.AddMachine(t.Context(), model, state.MachineParams{ParentID: host.ID, ContainerType: "kvm"}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetSupportedContainers(t.Context(), model, host.ID, []string{"lxd"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddMachine(t.Context(), model, state.MachineParams{ParentID: host.ID, ContainerType: "lxd"}); err != nil {
		t.Fatal(err)
	}
	rev := st.Revision()
	_, err := st.AddMachine(t.Context(), model, state.MachineParams{ParentID: host.ID, ContainerType: "kvm"})
	if !errors.Is(err, errors.NotSupported) || err.Error() != "machine 0 cannot host kvm containers" {
		t.Errorf("kvm on an lxd-only machine: %v", err)
	}
	if st.Revision() != rev {
		t.Errorf("refused AddMachine of a kvm container wrote (revision %d, was %d)", st.Revision(), rev)
	}
	if err := st.SetSupportedContainers(t.Context(), model, host.ID, nil); err != nil {
		t.Fatal(err)
	}
	rev = st.Revision()
	if _, err := st.AddMachine(t.Context(), model, state.MachineParams{ParentID: host.ID, ContainerType: "lxd"}); err == nil {
		t.Error("container on a machine that supports none")
	}
	if st.Revision() != rev {
		t.Errorf("refused AddMachine of a container on a machine that supports none wrote (revision %d, was %d)", st.Revision(), rev)
	}
}

func TestAddSubnetOverlapsAndProviderIDs(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	model := statetest.DefaultModelUUID
	if _, err := st.AddSubnet(t.Context(), model, state.Subnet{CIDR: "10.0.0.0/24", ProviderID: "sn-0"}); err != nil {
		t.Fatal(err)
	}
	rev := st.Revision()
	for _, tc := range []struct {
		s    state.Subnet
		kind error
		msg  string
	}{
		{state.Subnet{CIDR: "10.0.0.0/24", ProviderID: "sn-1"}, errors.AlreadyExists, `subnet "10.0.0.0/24" already exists`},
		{state.Subnet{CIDR: "10.0.0.0/16", ProviderID: "sn-1"}, errors.NotValid, `subnet "10.0.0.0/16" overlaps subnet "10.0.0.0/24"`},
		{state.Subnet{CIDR: "10.0.0.128/25", ProviderID: "sn-1"}, errors.NotValid, `overlaps`},
		{state.Subnet{CIDR: "10.0.1.0/24", ProviderID: "sn-0"}, errors.AlreadyExists, `subnet with provider id "sn-0" already exists (10.0.0.0/24)`},
		{state.Subnet{CIDR: "10.0.1.1/24"}, errors.NotValid, `invalid CIDR "10.0.1.1/24"`},
		{state.Subnet{CIDR: "10.0.1.0/24", AllocatableIPLow: "10.0.1.10", AllocatableIPHigh: "10.0.2.1"}, errors.NotValid, `allocatable range 10.0.1.10-10.0.2.1 is not inside 10.0.1.0/24`},
		{state.Subnet{CIDR: "10.0.1.0/24", SpaceName: "nope"}, errors.NotFound, `space "nope" not found`},
	} {
		if _, err := st.AddSubnet(t.Context(), model, tc.s); !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("AddSubnet(%+v) = %v, want %v %q", tc.s, err, tc.kind, tc.msg)
		}
	}
	if st.Revision() != rev {
		t.Errorf("refused AddSubnet wrote")
	}
	if _, err := st.AddSubnet(t.Context(), model, state.Subnet{CIDR: "10.0.1.0/24", ProviderID: "sn-1"}); err != nil {
		t.Error(err)
	}
	// Another model may reuse both.
	other := statetest.AddModel(t, st, "other", state.ModelTypeIAAS)
	if _, err := st.AddSubnet(t.Context(), other.UUID, state.Subnet{CIDR: "10.0.0.0/24", ProviderID: "sn-0"}); err != nil {
		t.Error(err)
	}
}

func TestAgentBinaryCatalog(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	sum := strings.Repeat("ab", 32)
	ok := state.AgentBinary{Version: "3.3.0-ubuntu-amd64", SHA256: strings.ToUpper(sum), Size: 10, URL: "https://example.com/a.tgz"}
	if err := st.AddAgentBinary(t.Context(), ok); err != nil {
		t.Fatal(err)
	}
	if err := st.AddAgentBinary(t.Context(), state.AgentBinary{Version: "3.10.0-ubuntu-arm64", SHA256: sum, Size: 1, URL: "http://h/x"}); err != nil {
		t.Fatal(err)
	}
	if err := st.AddAgentBinary(t.Context(), state.AgentBinary{Version: "2.9-beta1-trusty-amd64", SHA256: sum, Size: 1, URL: "http://h/y"}); err != nil {
		t.Fatal(err)
	}
	rev := st.Revision()
	for _, tc := range []struct {
		b    state.AgentBinary
		kind error
		msg  string
	}{
		{ok, errors.AlreadyExists, "agent binaries 3.3.0-ubuntu-amd64 already exists"},
		{state.AgentBinary{Version: "3.3-ubuntu-amd64", SHA256: sum, Size: 1, URL: "http://h/"}, errors.NotValid, `invalid binary version "3.3-ubuntu-amd64"`},
		{state.AgentBinary{Version: "3.3.0-ubuntu-sparc", SHA256: sum, Size: 1, URL: "http://h/"}, errors.NotValid, `architecture "sparc" not valid`},
		{state.AgentBinary{Version: "3.3.1-ubuntu-amd64", SHA256: "abc", Size: 1, URL: "http://h/"}, errors.NotValid, `sha256 "abc" is not 64 lowercase hex digits`},
		{state.AgentBinary{Version: "3.3.1-ubuntu-amd64", SHA256: sum, Size: 0, URL: "http://h/"}, errors.NotValid, "size 0 is not positive"},
		{state.AgentBinary{Version: "3.3.1-ubuntu-amd64", SHA256: sum, Size: 1, URL: "ftp://h/"}, errors.NotValid, `url "ftp://h/" is not an absolute http or https URL`},
		{state.AgentBinary{Version: "3.3.1-ubuntu-amd64", SHA256: sum, Size: 1, URL: "/local"}, errors.NotValid, "is not an absolute"},
	} {
		if err := st.AddAgentBinary(t.Context(), tc.b); !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("AddAgentBinary(%+v) = %v, want %v %q", tc.b, err, tc.kind, tc.msg)
		}
	}
	if st.Revision() != rev {
		t.Errorf("refused AddAgentBinary wrote")
	}
	cat, err := st.AgentBinaryCatalog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var vs []string
	for _, b := range cat {
		vs = append(vs, b.Version)
	}
	if want := []string{"2.9-beta1-trusty-amd64", "3.3.0-ubuntu-amd64", "3.10.0-ubuntu-arm64"}; !slices.Equal(vs, want) {
		t.Errorf("catalog order %v, want %v", vs, want)
	}
	if cat[1].SHA256 != sum || cat[1].URL != "https://example.com/a.tgz" {
		t.Errorf("entry %+v", cat[1])
	}
	// The provider's view has them too.
	tools, err := st.AgentBinaries(t.Context())
	if err != nil || len(tools) != 3 {
		t.Errorf("AgentBinaries = %v, %v", tools, err)
	}
}

func TestSpaces(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	model := statetest.DefaultModelUUID
	for _, n := range []string{"public", "db"} {
		if _, err := st.AddSpace(t.Context(), model, n, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.AddSpace(t.Context(), model, "db", ""); !errors.Is(err, errors.AlreadyExists) {
		t.Errorf("duplicate space: %v", err)
	}
	sp, err := st.Spaces(t.Context(), model)
	if err != nil || len(sp) != 2 || sp[0].Name != "db" || sp[1].Name != "public" {
		t.Errorf("Spaces = %+v, %v", sp, err)
	}
	if _, err := st.Spaces(t.Context(), "nope"); !errors.Is(err, errors.NotFound) {
		t.Errorf("Spaces(unknown model) = %v", err)
	}
}
