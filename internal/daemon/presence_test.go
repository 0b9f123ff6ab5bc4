package daemon_test

import (
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// Agent presence, through the wire: an agent's login makes it alive in
// ModelAdmin.Status, its connection closing makes it down. The expected
// machine agent statuses are written from Juju's
// apiserver/common/machinestatus.go (ModelPresenceContext.MachineStatus
// and canMachineBeDown, at 1752b71fcf00): a machine whose agent is not
// alive shows agent status "down" with the message "agent is not
// communicating with the server", whatever it recorded (error included),
// unless its recorded status is "pending" or "stopped", or it is dead; a
// connected agent's recorded status shows as it is. The controller agent
// visiting a model is recorded apart (Juju's ControllerAgent connections,
// which core/presence's AgentStatus leaves out).

// agentDown is Juju's message for a machine agent that is down.
const agentDown = "agent is not communicating with the server"

// modelStatus reads model's status through the admin connection c.
func modelStatus(t *testing.T, c *client.Conn, model string) params.ModelStatus {
	t.Helper()
	st, err := client.NewModelAdmin(c).Status(ctxT(t), params.ModelArgs{Model: model})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// machineOf finds machine id (top-level or a container) in st.
func machineOf(t *testing.T, st params.ModelStatus, id string) params.MachineStatus {
	t.Helper()
	var find func([]params.MachineStatus) *params.MachineStatus
	find = func(ms []params.MachineStatus) *params.MachineStatus {
		for i := range ms {
			if ms[i].ID == id {
				return &ms[i]
			}
			if m := find(ms[i].Containers); m != nil {
				return m
			}
		}
		return nil
	}
	m := find(st.Machines)
	if m == nil {
		t.Fatalf("machine %s is not in the status", id)
	}
	return *m
}

// presenceOf is the presence status of an agent ("" when not reported).
func presenceOf(p *params.AgentPresence) string {
	if p == nil {
		return ""
	}
	return p.Status
}

// sinceBetween checks that since (RFC 3339, seconds) is within [from, to].
func sinceBetween(t *testing.T, what, since string, from, to time.Time) {
	t.Helper()
	at, err := time.Parse(time.RFC3339, since)
	if err != nil {
		t.Fatalf("%s since %q: %v", what, since, err)
	}
	if at.Before(from.Truncate(time.Second)) || at.After(to) {
		t.Errorf("%s since %s, want between %s and %s", what, at, from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
}

// gauges parses d's /metrics (the Prometheus text format, as promtool
// reads it) and returns the value of name's series with labels.
func gauge(t *testing.T, d *daemon.Daemon, name string, labels map[string]string) float64 {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(metricsText(t, d, nil)))
	if err != nil {
		t.Fatalf("/metrics is not in the text format: %v", err)
	}
	fam := fams[name]
	if fam == nil {
		t.Fatalf("/metrics has no %s", name)
	}
	for _, m := range fam.GetMetric() {
		if hasLabels(m, labels) {
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("/metrics has no %s%v", name, labels)
	return 0
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			n++
		}
	}
	return n == len(want)
}

// startedMachine provisions machine 0 of s's default model through the
// controller agent, which then records it started, as its agent would;
// it returns the agent's login.
func startedMachine(t *testing.T, s *provisiondtest.Server) provisiondtest.AgentLogin {
	t.Helper()
	model := s.DefaultModel()
	login := s.ProvisionMachine(t, model, "0")
	if err := client.NewProvisioner(s.ControllerAgent(t, model)).Machine(login.Tag).SetStatus(ctxT(t), "started", "", nil); err != nil {
		t.Fatal(err)
	}
	return login
}

// agentAt logs in to s as the agent of login; the connection is closed
// at cleanup.
func agentAt(t *testing.T, s *provisiondtest.Server, login provisiondtest.AgentLogin) *client.Conn {
	t.Helper()
	c := s.Dial(t, login.Model)
	if _, err := c.LoginAgent(ctxT(t), login.Tag, login.Password, login.Nonce); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAgentPresenceInStatus(t *testing.T) {
	srv := provisiondtest.Start(t)
	d := testkit.Daemon(srv)
	model := srv.AddModel(t, "presence", "iaas", nil) // nobody runs its provisioner yet
	admin := srv.Admin(t, model)
	machineAgents := func() float64 {
		return gauge(t, d, "provisiond_agents_connected", map[string]string{"kind": "machine"})
	}

	// The model's provisioner agent: down before the controller agent
	// logs in at the model's endpoint (not known since when), alive while
	// it is, down since it went.
	if p := modelStatus(t, admin, model).ProvisionerAgent; p == nil || *p != (params.AgentPresence{Status: "down"}) {
		t.Fatalf("provisioner agent before any login: %+v, want down with no time", p)
	}
	if n := gauge(t, d, "provisiond_models_without_provisioner", nil); n != 3 {
		t.Errorf("provisiond_models_without_provisioner = %v, want 3 (controller, default, presence)", n)
	}
	ctrl := srv.ControllerAgent(t, model)
	if p := modelStatus(t, admin, model).ProvisionerAgent; presenceOf(p) != "alive" || p.Since != "" {
		t.Fatalf("provisioner agent logged in: %+v", p)
	}
	if n := gauge(t, d, "provisiond_agents_connected", map[string]string{"kind": "provisioner"}); n != 1 {
		t.Errorf(`provisiond_agents_connected{kind="provisioner"} = %v, want 1`, n)
	}
	if m := machineOf(t, modelStatus(t, admin, srv.ControllerModel()), "0"); presenceOf(m.AgentPresence) != "down" {
		t.Errorf("the controller agent visiting a model made the controller machine's agent %+v", m.AgentPresence)
	}
	closed := time.Now()
	ctrl.Close()
	waitFor(t, "the provisioner agent down", func() bool {
		return presenceOf(modelStatus(t, admin, model).ProvisionerAgent) == "down"
	})
	sinceBetween(t, "provisioner agent", modelStatus(t, admin, model).ProvisionerAgent.Since, closed, time.Now())

	// Machines with their recorded statuses, set by their provisioner
	// (the controller agent); only machine 0's agent logs in.
	ctrl = srv.ControllerAgent(t, model)
	prov := client.NewProvisioner(ctrl)
	for _, id := range []string{"0", "1", "2", "3", "4"} {
		srv.ProvisionMachine(t, model, id)
	}
	for id, s := range map[string]string{"0": "started", "1": "error", "2": "stopped", "4": "started"} {
		info := ""
		if s == "error" {
			info = "it broke"
		}
		if err := prov.Machine(client.MachineTag(id)).SetStatus(ctxT(t), s, info, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := prov.Machine(client.MachineTag("4")).EnsureDead(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	before := machineAgents()
	agent := srv.MachineAgent(t, model, "0")
	if n := machineAgents(); n != before+1 {
		t.Errorf(`provisiond_agents_connected{kind="machine"} = %v after machine 0's login, want %v`, n, before+1)
	}
	st := modelStatus(t, admin, model)
	for _, tt := range []struct {
		id, presence, status, message string
	}{
		{"0", "alive", "started", ""},    // connected: as recorded
		{"1", "down", "down", agentDown}, // an error is down too
		{"2", "down", "stopped", ""},     // stopped: not down
		{"3", "down", "pending", ""},     // still being provisioned: not down
		{"4", "down", "started", ""},     // dead: not down
	} {
		m := machineOf(t, st, tt.id)
		if presenceOf(m.AgentPresence) != tt.presence || m.AgentStatus.Status != tt.status || m.AgentStatus.Message != tt.message {
			t.Errorf("machine %s: presence %+v, agent status %+v; want %s, %q %q", tt.id, m.AgentPresence, m.AgentStatus, tt.presence, tt.status, tt.message)
		}
	}
	recorded := machineOf(t, st, "1").AgentStatus.Since // never connected: Juju's since, the recorded status's
	if recorded == "" {
		t.Error("machine 1 is down with no since: want the recorded status's")
	}

	// Machine 0's agent goes: down, since it went.
	closed = time.Now()
	agent.Close()
	waitFor(t, "machine 0 down", func() bool {
		return machineOf(t, modelStatus(t, admin, model), "0").AgentStatus.Status == "down"
	})
	m := machineOf(t, modelStatus(t, admin, model), "0")
	if m.AgentStatus.Message != agentDown || presenceOf(m.AgentPresence) != "down" {
		t.Errorf("machine 0 after its agent went: %+v, presence %+v", m.AgentStatus, m.AgentPresence)
	}
	sinceBetween(t, "machine 0's agent status", m.AgentStatus.Since, closed, time.Now())
	if m.AgentPresence.Since != m.AgentStatus.Since {
		t.Errorf("machine 0's presence since %q, agent status since %q: want the same", m.AgentPresence.Since, m.AgentStatus.Since)
	}
	if n := machineAgents(); n != before {
		t.Errorf(`provisiond_agents_connected{kind="machine"} = %v after machine 0's agent went, want %v`, n, before)
	}
}

// TestAgentPresenceAfterRestart: on bbolt presence is who is connected to
// the daemon now: after a restart a machine whose agent was connected
// shows down (since its recorded status's time, as Juju's status shows a
// machine down) until its agent logs in again.
func TestAgentPresenceAfterRestart(t *testing.T) {
	dir := t.TempDir()
	a := provisiondtest.Start(t, provisiondtest.WithDataDir(dir))
	model := a.DefaultModel()
	login := startedMachine(t, a)
	agentAt(t, a, login)
	st := modelStatus(t, a.Admin(t, model), model)
	if m := machineOf(t, st, "0"); m.AgentStatus.Status != "started" || presenceOf(m.AgentPresence) != "alive" {
		t.Fatalf("machine 0 with its agent logged in: %+v, %+v", m.AgentStatus, m.AgentPresence)
	}
	recorded := machineOf(t, st, "0").AgentStatus.Since
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	b := provisiondtest.Start(t, provisiondtest.WithDataDir(dir))
	admin := b.Admin(t, model)
	m := machineOf(t, modelStatus(t, admin, model), "0")
	if m.AgentStatus.Status != "down" || m.AgentStatus.Message != agentDown || m.AgentStatus.Since != recorded ||
		m.AgentPresence == nil || *m.AgentPresence != (params.AgentPresence{Status: "down"}) {
		t.Fatalf("machine 0 after the restart: %+v, presence %+v; want down since %s (recorded), presence down with no time",
			m.AgentStatus, m.AgentPresence, recorded)
	}
	agentAt(t, b, login)
	if m := machineOf(t, modelStatus(t, admin, model), "0"); m.AgentStatus.Status != "started" || presenceOf(m.AgentPresence) != "alive" {
		t.Fatalf("machine 0 with its agent back: %+v, %+v", m.AgentStatus, m.AgentPresence)
	}
}

// TestAgentPresenceAcrossDaemons: two daemons on one etcd; an agent
// logged in to b is alive in a's status (each daemon publishes its agents
// under its lease) and goes down there when its connection closes, and
// when b stops (its records go with its lease; a SIGKILLed daemon's go
// when the lease expires: internal/e2e).
func TestAgentPresenceAcrossDaemons(t *testing.T) {
	a := startEtcd(t) // its etcd outlives b
	b := provisiondtest.Start(t, provisiondtest.Join(a))
	model := a.DefaultModel()
	login := startedMachine(t, a)
	admin := a.Admin(t, model)
	machine0 := func() params.MachineStatus { return machineOf(t, modelStatus(t, admin, model), "0") }

	agent := agentAt(t, b, login)
	waitFor(t, "machine 0 alive at a", func() bool { return presenceOf(machine0().AgentPresence) == "alive" })
	if m := machine0(); m.AgentStatus.Status != "started" {
		t.Errorf("machine 0 alive: agent status %+v", m.AgentStatus)
	}
	if n := gauge(t, testkit.Daemon(a), "provisiond_agents_connected", map[string]string{"kind": "machine"}); n != 1 {
		t.Errorf(`a's provisiond_agents_connected{kind="machine"} = %v, want 1 (machine 0 of the default model, at b)`, n)
	}
	closed := time.Now()
	agent.Close()
	waitFor(t, "machine 0 down at a", func() bool { return machine0().AgentStatus.Status == "down" })
	sinceBetween(t, "machine 0 at a", machine0().AgentStatus.Since, closed, time.Now())

	// Back, at b, and the controller agent at b runs the provisioner of
	// another model; then b stops.
	agentAt(t, b, login)
	other := a.AddModel(t, "other", "iaas", nil)
	b.ControllerAgent(t, other)
	provisioner := func() string { return presenceOf(modelStatus(t, admin, other).ProvisionerAgent) }
	waitFor(t, "machine 0 and the other model's provisioner alive at a", func() bool {
		return presenceOf(machine0().AgentPresence) == "alive" && provisioner() == "alive"
	})
	stopped := time.Now()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "machine 0 down at a once b stopped", func() bool { return machine0().AgentStatus.Status == "down" })
	sinceBetween(t, "machine 0 at a after b stopped", machine0().AgentPresence.Since, stopped, time.Now())
	if p := provisioner(); p != "down" {
		t.Errorf("the other model's provisioner agent at a once b stopped: %s", p)
	}
}
