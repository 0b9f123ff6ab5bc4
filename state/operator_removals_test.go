package state_test

import (
	"strings"
	"testing"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
)

func TestRemoveSpace(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	m := statetest.DefaultModelUUID
	for _, name := range []string{"db", "dmz", "free"} {
		if _, err := st.AddSpace(t.Context(), m, name, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.AddSubnet(t.Context(), m, state.Subnet{CIDR: "10.0.0.0/24", SpaceName: "db", Zones: []string{"z"}, ProviderID: "s0"}); err != nil {
		t.Fatal(err)
	}
	cons, err := state.ParseConstraints("spaces=^dmz")
	if err != nil {
		t.Fatal(err)
	}
	mc, err := st.AddMachine(t.Context(), m, state.MachineParams{Constraints: cons})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ space, msg string }{
		{"db", `space "db" holds subnets 10.0.0.0/24: remove them first`},
		{"dmz", `space "dmz" is named by the constraints of machine ` + mc.ID},
	} {
		err := st.RemoveSpace(t.Context(), m, tc.space)
		if !errors.Is(err, errors.NotValid) || err.Error() != tc.msg {
			t.Errorf("RemoveSpace(%s) = %v; want NotValid %q", tc.space, err, tc.msg)
		}
	}
	if err := st.RemoveSpace(t.Context(), m, "free"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Space(t.Context(), m, "free"); !errors.Is(err, errors.NotFound) {
		t.Fatalf("space after removal: %v", err)
	}
	if err := st.RemoveSpace(t.Context(), m, "free"); !errors.Is(err, errors.NotFound) {
		t.Fatalf("second removal: %v", err)
	}
	// Once the subnet is gone, its space goes too.
	if err := st.RemoveSubnet(t.Context(), m, "10.0.0.0/24"); err != nil {
		t.Fatal(err)
	}
	if err := st.RemoveSpace(t.Context(), m, "db"); err != nil {
		t.Fatal(err)
	}
}

func TestRemoveSubnet(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	m := statetest.DefaultModelUUID
	if _, err := st.AddSpace(t.Context(), m, "db", ""); err != nil {
		t.Fatal(err)
	}
	sn := state.Subnet{CIDR: "10.0.0.0/24", SpaceName: "db", Zones: []string{"z"}, ProviderID: "s0",
		AllocatableIPLow: "10.0.0.10", AllocatableIPHigh: "10.0.0.20"}
	if _, err := st.AddSubnet(t.Context(), m, sn); err != nil {
		t.Fatal(err)
	}
	host := statetest.AddMachine(t, st, m, "n0")
	c, err := st.AddMachine(t.Context(), m, state.MachineParams{ParentID: host.ID, ContainerType: "lxd"})
	if err != nil {
		t.Fatal(err)
	}
	addr, err := st.AllocateAddress(t.Context(), m, sn.CIDR, c.ID, "eth0", "00:16:3e:00:00:01", 0)
	if err != nil {
		t.Fatal(err)
	}
	err = st.RemoveSubnet(t.Context(), m, sn.CIDR)
	if !errors.Is(err, errors.NotValid) || !strings.Contains(err.Error(), "1 address(es) in use ("+addr.Value+")") {
		t.Fatalf("RemoveSubnet with an address in use = %v", err)
	}
	if _, err := st.ReleaseMachineAddresses(t.Context(), m, c.ID); err != nil {
		t.Fatal(err)
	}
	if err := st.RemoveSubnet(t.Context(), m, sn.CIDR); err != nil {
		t.Fatal(err)
	}
	if subnets, err := st.Subnets(t.Context(), m); err != nil || len(subnets) != 0 {
		t.Fatalf("subnets after removal: %v %v", subnets, err)
	}
	if err := st.RemoveSubnet(t.Context(), m, sn.CIDR); !errors.Is(err, errors.NotFound) {
		t.Fatalf("second removal: %v", err)
	}
}

func TestRemoveAgentBinary(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	b := state.AgentBinary{Version: "3.3.0-ubuntu-amd64", SHA256: strings.Repeat("a", 64), Size: 10, URL: "https://example.com/a.tgz"}
	if err := st.AddAgentBinary(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	if err := st.RemoveAgentBinary(t.Context(), b.Version); err != nil {
		t.Fatal(err)
	}
	if cat, err := st.AgentBinaryCatalog(t.Context()); err != nil || len(cat) != 0 {
		t.Fatalf("catalog after removal: %v %v", cat, err)
	}
	if err := st.RemoveAgentBinary(t.Context(), b.Version); !errors.Is(err, errors.NotFound) {
		t.Fatalf("second removal: %v", err)
	}
}

func TestEntityFields(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	m := statetest.DefaultModelUUID
	mc := statetest.AddMachine(t, st, m, "n0")
	f, ok, err := st.EntityFields(t.Context(), state.KindMachine, m, mc.ID)
	if err != nil || !ok {
		t.Fatalf("EntityFields(machine) = %v, %v, %v", f, ok, err)
	}
	if f["id"] != mc.ID || f["life"] != "alive" || f["instance-id"] != "inst-n0" {
		t.Errorf("machine fields = %v", f)
	}
	for k := range f {
		if strings.Contains(k, "password") {
			t.Errorf("machine fields hold %q", k)
		}
	}
	if f, ok, err := st.EntityFields(t.Context(), state.KindModel, m, m); err != nil || !ok || f["name"] != "default" {
		t.Errorf("EntityFields(model) = %v, %v, %v", f, ok, err)
	}
	if _, ok, err := st.EntityFields(t.Context(), state.KindMachine, m, "99"); err != nil || ok {
		t.Errorf("EntityFields(missing machine) = %v, %v", ok, err)
	}
	if _, _, err := st.EntityFields(t.Context(), state.KindUser, "", "admin"); !errors.Is(err, errors.NotValid) {
		t.Errorf("EntityFields(user) = %v; want NotValid (not a model kind)", err)
	}
}
