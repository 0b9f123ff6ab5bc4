package modeladmin

import (
	"time"

	"github.com/provisiond/provisiond/internal/presence"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// Agent presence in status, as Juju's status reports it
// (apiserver/common/machinestatus.go, ModelPresenceContext.MachineStatus):
// a machine whose agent is not connected shows agent status "down" with
// the message "agent is not communicating with the server", unless its
// recorded status is "pending" or "stopped" (still being provisioned, or
// stopped on purpose) or the machine is dead. provisiond adds, beside
// Juju's fields, each machine's presence (alive or down) and the model's
// provisioner agent's; and where it saw the agent go, the down status's
// since is that time (Juju keeps the recorded status's).

// agentDownMessage is Juju's message for a machine agent that is down.
const agentDownMessage = "agent is not communicating with the server"

// addPresence adds the presence pr knows to out (nothing when pr is nil).
func addPresence(pr *presence.Recorder, out *params.ModelStatus) {
	if pr == nil {
		return
	}
	out.ProvisionerAgent = presenceOf(pr.Provisioner(out.UUID))
	for i := range out.Machines {
		machinePresence(pr, out.UUID, &out.Machines[i])
	}
}

func machinePresence(pr *presence.Recorder, model string, m *params.MachineStatus) {
	p := pr.Machine(model, m.ID)
	m.AgentPresence = presenceOf(p)
	if !p.Alive && canBeDown(m.AgentStatus.Status) && m.Life != string(state.Dead) {
		m.AgentStatus.Status = "down"
		m.AgentStatus.Message = agentDownMessage
		if !p.Since.IsZero() {
			m.AgentStatus.Since = p.Since.UTC().Format(time.RFC3339)
		}
	}
	for i := range m.Containers {
		machinePresence(pr, model, &m.Containers[i])
	}
}

// canBeDown is Juju's canMachineBeDown: a machine still being
// provisioned, or stopped, is not reported down.
func canBeDown(status string) bool {
	switch status {
	case "pending", "stopped":
		return false
	}
	return true
}

func presenceOf(p presence.Status) *params.AgentPresence {
	if p.Alive {
		return &params.AgentPresence{Status: "alive"}
	}
	out := &params.AgentPresence{Status: "down"}
	if !p.Since.IsZero() {
		out.Since = p.Since.UTC().Format(time.RFC3339)
	}
	return out
}
