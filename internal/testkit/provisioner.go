package testkit

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

// M0Password and M0Nonce are machine 0's agent credentials in a
// ProvFixture.
const (
	M0Password = "machine-0-agent-password-xyz"
	M0Nonce    = "nonce-0"
)

// ProvFixture is a daemon for the Provisioner tests (one per top-level
// test), with this fixture in the default model:
//
//	machine 0      provisioned (i-0, zone-a), base ubuntu@22.04 (jammy to
//	               2015 clients), unit wordpress/0;
//	               its agent is fixture.Agent
//	0/lxd/0        container of 0
//	0/lxd/0/lxd/0  grandchild of 0
//	machine 1      unprovisioned: constraints (mem, spaces=db), a builtin
//	               volume, requested network net1, unit mysql/0
//	1/lxd/0        container of 1
//
// plus space db with subnet 10.0.0.0/24 (subnet-0, zone-a, allocatable
// .10-.20) and agent binaries 3.3.0 and 1.25.0. Subtests that change
// machines add their own.
type ProvFixture struct {
	D     *daemon.Daemon
	St    *state.State
	Model string
	Clock *watchertest.FakeClock
	Ctrl  *client.Conn // the controller agent on the default model
	Agent *client.Conn // machine 0's agent
	Admin *client.Conn // user admin
}

// NewProvFixture starts a daemon with the fixture, its clock a fake one.
func NewProvFixture(t *testing.T) *ProvFixture { return NewProvFixtureWith(t, nil) }

// NewProvFixtureWith is NewProvFixture with mod applied to the daemon's
// config.
func NewProvFixtureWith(t *testing.T, mod func(*daemon.Config)) *ProvFixture {
	t.Helper()
	clock := watchertest.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	d := Start(t, func(c *daemon.Config) {
		c.Clock = clock
		if mod != nil {
			mod(c)
		}
	})
	f := &ProvFixture{D: d, St: d.State(), Model: d.Credentials().DefaultModelUUID, Clock: clock}
	st, model := f.St, f.Model
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
		Placement: "zone=zone-a", Password: M0Password})
	must(err)
	zone, arch := "zone-a", "amd64"
	must(st.SetInstanceInfo(t.Context(), model, m0.ID, state.InstanceInfo{InstanceID: "i-0", Nonce: M0Nonce,
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

	f.Ctrl = LoginController(t, d, model)
	f.Agent = Dial(t, d, model)
	if _, err := f.Agent.LoginAgent(Ctx(t), "machine-0", M0Password, M0Nonce); err != nil {
		t.Fatal(err)
	}
	f.Admin = LoginAdmin(t, d, model)
	return f
}

// Call calls Provisioner version v and decodes the result.
func Call[R any](t *testing.T, c *client.Conn, v int, method string, args any) (R, error) {
	t.Helper()
	var r R
	err := c.Call(Ctx(t), "Provisioner", v, "", method, args, &r)
	return r, err
}

// MustCall is Call failing the test on a call-level error.
func MustCall[R any](t *testing.T, c *client.Conn, v int, method string, args any) R {
	t.Helper()
	r, err := Call[R](t, c, v, method, args)
	if err != nil {
		t.Fatalf("%s v%d: %v", method, v, err)
	}
	return r
}

// Ents is Entities of tags.
func Ents(tags ...string) params.Entities {
	out := params.Entities{Entities: []params.Entity{}}
	for _, tag := range tags {
		out.Entities = append(out.Entities, params.Entity{Tag: tag})
	}
	return out
}

// V1Ents is the 2015 Entities of tags.
func V1Ents(tags ...string) params.V1Entities {
	out := params.V1Entities{Entities: []params.V1Entity{}}
	for _, tag := range tags {
		out.Entities = append(out.Entities, params.V1Entity{Tag: tag})
	}
	return out
}

// RawCall returns the raw JSON result of a call.
func RawCall(t *testing.T, c *client.Conn, v int, method string, args any) json.RawMessage {
	t.Helper()
	var raw json.RawMessage
	if err := c.Call(Ctx(t), "Provisioner", v, "", method, args, &raw); err != nil {
		t.Fatalf("%s v%d: %v", method, v, err)
	}
	return raw
}

// IsCode says whether err is a *params.Error with code.
func IsCode(err error, code string) bool {
	var pe *params.Error
	return errors.As(err, &pe) && pe.Code == code
}
