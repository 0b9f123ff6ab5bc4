package daemon_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/watcher/watchertest"
)

// The Provisioner tests share one daemon per top-level test, with this
// fixture in the default model:
//
//	machine 0      provisioned (i-0, zone-a), base ubuntu@22.04 (jammy to
//	               2015 clients), unit wordpress/0;
//	               its agent is fixture.agent
//	0/lxd/0        container of 0
//	0/lxd/0/lxd/0  grandchild of 0
//	machine 1      unprovisioned: constraints (mem, spaces=db), a builtin
//	               volume, requested network net1, unit mysql/0
//	1/lxd/0        container of 1
//
// plus space db with subnet 10.0.0.0/24 (subnet-0, zone-a, allocatable
// .10-.20) and agent binaries 3.3.0 and 1.25.0. Subtests that change
// machines add their own.
const (
	m0Password = "machine-0-agent-password-xyz"
	m0Nonce    = "nonce-0"
)

type provFixture struct {
	d     *daemon.Daemon
	st    *state.State
	model string
	clock *watchertest.FakeClock
	ctrl  *client.Conn // the controller agent on the default model
	agent *client.Conn // machine 0's agent
	admin *client.Conn // user admin
}

func newProvFixture(t *testing.T) *provFixture { return newProvFixtureWith(t, nil) }

// newProvFixtureWith is newProvFixture with mod applied to the daemon's
// config.
func newProvFixtureWith(t *testing.T, mod func(*daemon.Config)) *provFixture {
	t.Helper()
	clock := watchertest.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	d := start(t, func(c *daemon.Config) {
		c.Clock = clock
		if mod != nil {
			mod(c)
		}
	})
	f := &provFixture{d: d, st: d.State(), model: d.Credentials().DefaultModelUUID, clock: clock}
	st, model := f.st, f.model
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mem := uint64(2048)
	spaces := []string{"db"}
	_, err := st.AddSpace(t.Context(), model, "db", "space-db")
	must(err)
	_, err = st.AddSubnet(t.Context(), model, state.Subnet{CIDR: "10.0.0.0/24", ProviderID: "subnet-0", SpaceName: "db",
		Zones: []string{"zone-a"}, AllocatableIPLow: "10.0.0.10", AllocatableIPHigh: "10.0.0.20",
		DNSServers: []string{"10.0.0.2"}})
	must(err)
	m0, err := st.AddMachine(t.Context(), model, state.MachineParams{Base: state.Base{Name: "ubuntu", Channel: "22.04"},
		Placement: "zone=zone-a", Password: m0Password})
	must(err)
	zone, arch := "zone-a", "amd64"
	must(st.SetInstanceInfo(t.Context(), model, m0.ID, state.InstanceInfo{InstanceID: "i-0", Nonce: m0Nonce,
		Hardware: &state.HardwareCharacteristics{AvailabilityZone: &zone, Arch: &arch}}))
	_, err = st.AddMachine(t.Context(), model, state.MachineParams{Base: state.Base{Name: "ubuntu", Channel: "22.04"},
		Constraints: state.Constraints{Mem: &mem, Spaces: &spaces}, RequestedNetworks: []string{"net1"},
		Volumes: []state.VolumeParams{{Pool: "builtin", Size: 1024}}})
	must(err)
	for _, p := range []string{"0", "0/lxd/0", "1"} {
		_, err = st.AddMachine(t.Context(), model, state.MachineParams{ParentID: p, ContainerType: "lxd"})
		must(err)
	}
	_, err = st.AddApplication(t.Context(), model, state.ApplicationParams{Name: "wordpress", CharmRevision: 3,
		LXDProfile: &state.LXDProfile{Config: map[string]string{"security.nesting": "true"}, Description: "wp"}})
	must(err)
	_, err = st.AddApplication(t.Context(), model, state.ApplicationParams{Name: "mysql", EndpointBindings: map[string]string{"db": "db"}})
	must(err)
	_, err = st.AddUnit(t.Context(), model, "wordpress", "0", "")
	must(err)
	_, err = st.AddUnit(t.Context(), model, "mysql", "1", "")
	must(err)
	must(st.AddAgentBinaries(t.Context(),
		state.AgentBinary{Version: "3.3.0-ubuntu-amd64", SHA256: "sha-330", Size: 330},
		state.AgentBinary{Version: "1.25.0-trusty-amd64", SHA256: "sha-125", Size: 125},
	))
	must(st.UpdateModelConfig(t.Context(), model, map[string]any{"agent-version": "3.3.0", "authorized-keys": "ssh-rsa AAA"}, nil))

	f.ctrl = loginController(t, d, model)
	f.agent = dial(t, d, model)
	if _, err := f.agent.LoginAgent(ctxT(t), "machine-0", m0Password, m0Nonce); err != nil {
		t.Fatal(err)
	}
	f.admin = loginAdmin(t, d, model)
	return f
}

// call calls Provisioner version v and decodes the result.
func call[R any](t *testing.T, c *client.Conn, v int, method string, args any) (R, error) {
	t.Helper()
	var r R
	err := c.Call(ctxT(t), "Provisioner", v, "", method, args, &r)
	return r, err
}

// mustCall is call failing the test on a call-level error.
func mustCall[R any](t *testing.T, c *client.Conn, v int, method string, args any) R {
	t.Helper()
	r, err := call[R](t, c, v, method, args)
	if err != nil {
		t.Fatalf("%s v%d: %v", method, v, err)
	}
	return r
}

func ents(tags ...string) params.Entities {
	out := params.Entities{Entities: []params.Entity{}}
	for _, tag := range tags {
		out.Entities = append(out.Entities, params.Entity{Tag: tag})
	}
	return out
}

func v1ents(tags ...string) params.V1Entities {
	out := params.V1Entities{Entities: []params.V1Entity{}}
	for _, tag := range tags {
		out.Entities = append(out.Entities, params.V1Entity{Tag: tag})
	}
	return out
}

// itemErr is what one result item's error should be; zero for none.
type itemErr struct{ msg, code string }

var (
	noErr   = itemErr{}
	permErr = itemErr{"permission denied", params.CodeUnauthorized}
)

func notFound(id string) itemErr { return itemErr{"machine " + id + " not found", params.CodeNotFound} }

func checkItem(t *testing.T, what string, got *params.Error, want itemErr) {
	t.Helper()
	switch {
	case got == nil && want == noErr:
	case got == nil:
		t.Errorf("%s: no error; want %q (%q)", what, want.msg, want.code)
	case want == noErr:
		t.Errorf("%s: error %q (%q); want none", what, got.Message, got.Code)
	case got.Message != want.msg || got.Code != want.code:
		t.Errorf("%s: error %q (%q); want %q (%q)", what, got.Message, got.Code, want.msg, want.code)
	}
}

func checkV1Item(t *testing.T, what string, got *params.V1Error, want itemErr) {
	t.Helper()
	var e *params.Error
	if got != nil {
		e = &params.Error{Message: got.Message, Code: got.Code}
	}
	checkItem(t, what, e, want)
}

// rawCall returns the raw JSON result of a call.
func rawCall(t *testing.T, c *client.Conn, v int, method string, args any) json.RawMessage {
	t.Helper()
	var raw json.RawMessage
	if err := c.Call(ctxT(t), "Provisioner", v, "", method, args, &raw); err != nil {
		t.Fatalf("%s v%d: %v", method, v, err)
	}
	return raw
}

func isCode(err error, code string) bool {
	var pe *params.Error
	return errors.As(err, &pe) && pe.Code == code
}
