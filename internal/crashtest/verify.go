package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// Kinds of Violation.
const (
	// ViolationLostWrite: an acknowledged write is not on disk after a
	// kill (or a value is there that was never written).
	ViolationLostWrite = "lost acknowledged write"
	// ViolationCheck: the bbolt file fails the consistency check or cannot
	// be opened.
	ViolationCheck = "consistency check failed"
	// ViolationRevision: the revision went backwards.
	ViolationRevision = "revision went backwards"
	// ViolationAPIView: after the restart, an agent sees something other
	// than what is on disk, or cannot log in.
	ViolationAPIView = "agents see an inconsistent model"
	// ViolationRefused: the daemon refused a write that the acknowledged
	// ones made valid (read-your-writes broken).
	ViolationRefused = "valid write refused"
)

// Violation is a crash-safety failure found by Run.
type Violation struct {
	Cycle  int
	Kind   string // one of the Violation* constants
	Detail string
	// Log is the tail of the daemon's log of that cycle.
	Log string
}

func (v *Violation) Error() string {
	return fmt.Sprintf("cycle %d: %s: %s", v.Cycle, v.Kind, v.Detail)
}

// checkReport is the part of `provisiond check --format json` we read.
type checkReport struct {
	OK       bool   `json:"ok"`
	Error    string `json:"error"`
	Revision uint64 `json:"revision"`
}

// checkFile runs `provisiond check` on the data dir, as an operator would.
func (h *harness) checkFile(ctx context.Context) (checkReport, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, h.cfg.Binary, "check", "--data-dir", h.cfg.DataDir, "--format", "json").Output()
	var rep checkReport
	if jerr := json.Unmarshal(out, &rep); jerr != nil {
		return rep, fmt.Errorf("provisiond check: %v (output %q, %v)", err, out, jerr)
	}
	if rep.OK != (err == nil) {
		return rep, fmt.Errorf("provisiond check: ok=%v but exit %v", rep.OK, err)
	}
	return rep, nil
}

// observe reads the value of r from the stopped daemon's state.
func (h *harness) observe(st *state.State, r *register) (string, error) {
	switch r.kind {
	case regModel:
		m, err := st.ModelByName(context.Background(), r.name)
		if errors.Is(err, errors.NotFound) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		if m.Life == state.Alive {
			return "present", nil
		}
		return string(m.Life), nil
	case regConfig:
		m, err := st.Model(context.Background(), h.creds.DefaultModelUUID)
		if err != nil {
			return "", err
		}
		v, ok := m.Config[r.name]
		if !ok {
			return "", nil
		}
		return fmt.Sprint(v), nil
	case regUnits:
		return h.observeUnits(st, r.name)
	case regPassword:
		for _, pw := range r.candidates() {
			ok, err := st.MachinePasswordValid(context.Background(), h.creds.ControllerModelUUID, r.name, pw)
			if err != nil {
				return "", err
			}
			if ok {
				return pw, nil
			}
		}
		if r.pending != nil {
			return "(neither the acknowledged nor the in-flight password)", nil
		}
		return "(not the acknowledged password)", nil
	}
	m, err := st.Machine(context.Background(), h.creds.ControllerModelUUID, r.name)
	if r.kind == regLife && errors.Is(err, errors.NotFound) {
		return lifeRemoved, nil
	}
	if err != nil {
		return "", err
	}
	switch r.kind {
	case regStatus:
		return m.Status.Status + "|" + m.Status.Message, nil
	case regInstanceStatus:
		return m.InstanceStatus.Status + "|" + m.InstanceStatus.Message, nil
	}
	return machineLife(m), nil
}

// observeUnits reads a CAAS application as unitsValue writes it.
func (h *harness) observeUnits(st *state.State, app string) (string, error) {
	a, err := st.Application(context.Background(), h.caasModel, app)
	if err != nil {
		return "", err
	}
	op, err := st.OperatorStatus(context.Background(), h.caasModel, app)
	if err != nil {
		return "", err
	}
	units, err := st.CAASUnits(context.Background(), h.caasModel, app)
	if err != nil {
		return "", err
	}
	var pods, others []string
	for _, u := range units {
		if u.Life != state.Alive || u.Container == nil || u.Container.ProviderID == "" {
			others = append(others, "unit "+u.Name+" "+string(u.Life))
			continue
		}
		pods = append(pods, podValue(u.Container.ProviderID, u.Container.Address, u.ContainerStatus.Status, u.ContainerStatus.Message))
	}
	return unitsValue(a.Scale, op, pods, others), nil
}

// adoptMachines checks the controller model's machines on disk against
// the registers: a machine no register names must be one of those the
// AddMachines call in flight at the kill asked for. Those become regLife
// registers (they must be unprovisioned), spare for the agent writers.
func (h *harness) adoptMachines(st *state.State) (lost []string, err error) {
	ms, err := st.Machines(context.Background(), h.creds.ControllerModelUUID)
	if err != nil {
		return nil, err
	}
	known := h.machineRegs()
	for _, id := range h.machines {
		known[id] = true
	}
	var unknown []state.Machine
	for _, m := range ms {
		if !known[m.ID] {
			unknown = append(unknown, m)
		}
	}
	pending := h.adder.addPending
	h.adder.addPending = 0
	if len(unknown) > pending {
		var ids []string
		for _, m := range unknown {
			ids = append(ids, m.ID)
		}
		return []string{fmt.Sprintf("machines %v are on disk; %d were in flight (AddMachines), the others never added", ids, pending)}, nil
	}
	if pending > 0 {
		h.res.InFlight++
		if len(unknown) > 0 {
			h.res.InFlightLanded++
		}
	}
	for _, m := range unknown {
		r := &register{kind: regLife, name: m.ID, truth: machineLife(m)}
		if m.IsContainer() || r.truth != lifeUnprovisioned {
			lost = append(lost, fmt.Sprintf("machine %s added by the AddMachines in flight is %s (container: %v); want %s",
				m.ID, r.truth, m.IsContainer(), lifeUnprovisioned))
			continue
		}
		h.regs = append(h.regs, r)
		h.spare = append(h.spare, r)
		h.res.MachinesAdded++
	}
	return lost, nil
}

func machineLife(m state.Machine) string {
	switch {
	case m.Life == state.Dead:
		return lifeDead
	case m.Life != state.Alive:
		return string(m.Life)
	case m.InstanceID == "":
		return lifeUnprovisioned
	case m.InstanceID == instanceID(m.ID) && m.Nonce == nonceOf(m.ID):
		return lifeProvisioned
	}
	return fmt.Sprintf("provisioned as %q/%q", m.InstanceID, m.Nonce)
}

// candidates are the values r may hold after a kill.
func (r *register) candidates() []string {
	if r.pending == nil || *r.pending == r.truth {
		return []string{r.truth}
	}
	return []string{r.truth, *r.pending}
}

// verify checks the data dir after a kill and makes what it finds the
// truth for the next cycle. baseline is the revision on disk before the
// daemon started, acked the writes acknowledged since, sawMin and sawMax
// the least and greatest revision a client saw on /metrics (0: none).
func (h *harness) verify(ctx context.Context, cycle int, baseline uint64, acked int, sawMin, sawMax uint64) error {
	var rep checkReport
	if e := h.cfg.Etcd; e != nil {
		// etcd keeps its own consistency; there is no file to check. The
		// writes in flight at the kill are decided first.
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := e.Settle(sctx)
		cancel()
		if err != nil {
			return fmt.Errorf("cycle %d: etcd did not settle the killed daemon's requests: %w", cycle, err)
		}
	} else {
		var err error
		if rep, err = h.checkFile(ctx); err != nil {
			return err
		}
		if !rep.OK {
			return &Violation{Cycle: cycle, Kind: ViolationCheck, Detail: rep.Error}
		}
	}
	// credentials.yaml is rewritten at every start: a kill then must
	// leave the old or the new file, never a torn one.
	creds, err := daemon.ReadCredentials(filepath.Join(h.cfg.DataDir, daemon.CredentialsFile))
	if err != nil || creds.AdminPassword != h.creds.AdminPassword || creds.ControllerAgent != h.creds.ControllerAgent ||
		creds.ControllerUUID != h.creds.ControllerUUID || creds.CACert != h.creds.CACert {
		return &Violation{Cycle: cycle, Kind: ViolationCheck, Detail: fmt.Sprintf("credentials.yaml lost or changed (%v)", err)}
	}
	st, err := h.openState()
	if err != nil {
		return &Violation{Cycle: cycle, Kind: ViolationCheck, Detail: err.Error()}
	}
	defer st.Close()
	var lost []string
	inFlight, landed := 0, 0
	for _, r := range h.regs {
		got, err := h.observe(st, r)
		if err != nil {
			return &Violation{Cycle: cycle, Kind: ViolationCheck, Detail: fmt.Sprintf("reading %s: %v", r, err)}
		}
		if !slices.Contains(r.candidates(), got) {
			want := fmt.Sprintf("%q", r.truth)
			if r.pending != nil {
				want += fmt.Sprintf(" (or %q in flight)", *r.pending)
			}
			lost = append(lost, fmt.Sprintf("%s is %q; acknowledged %s", r, got, want))
			continue
		}
		if r.pending != nil && *r.pending != r.truth {
			inFlight++
			if got == *r.pending {
				landed++
			}
		}
		r.truth, r.pending = got, nil
	}
	more, err := h.adoptMachines(st)
	if err != nil {
		return &Violation{Cycle: cycle, Kind: ViolationCheck, Detail: fmt.Sprintf("reading machines: %v", err)}
	}
	lost = append(lost, more...)
	h.res.InFlight += inFlight
	h.res.InFlightLanded += landed
	if len(lost) > 0 {
		return &Violation{Cycle: cycle, Kind: ViolationLostWrite,
			Detail: fmt.Sprintf("%d of them:\n  %s", len(lost), strings.Join(lost, "\n  "))}
	}
	rev := st.Revision()
	if h.cfg.Etcd == nil && rev != rep.Revision {
		return fmt.Errorf("provisiond check says revision %d, state says %d", rep.Revision, rev)
	}
	// On bbolt every acknowledged write has a revision of its own; on
	// etcd, writes that went in one group commit share one.
	least := baseline + uint64(acked)
	if h.cfg.Etcd != nil && acked > 0 {
		least = baseline + 1
	}
	switch {
	case rev < least:
		return &Violation{Cycle: cycle, Kind: ViolationRevision, Detail: fmt.Sprintf(
			"revision %d on disk; it was %d before the start and %d writes were acknowledged since", rev, baseline, acked)}
	case rev < sawMax:
		return &Violation{Cycle: cycle, Kind: ViolationRevision, Detail: fmt.Sprintf(
			"revision %d on disk; a client saw %d on /metrics", rev, sawMax)}
	case sawMin != 0 && sawMin < baseline:
		return &Violation{Cycle: cycle, Kind: ViolationRevision, Detail: fmt.Sprintf(
			"a client saw revision %d on /metrics after a start from revision %d", sawMin, baseline)}
	}
	h.res.Revision = rev
	for _, r := range h.regs {
		if r.kind == regLife && r.truth == lifeRemoved {
			h.res.MachinesRemoved++
		}
	}
	// Machines removed for good leave the workload.
	h.regs = slices.DeleteFunc(h.regs, func(r *register) bool { return r.kind == regLife && r.truth == lifeRemoved })
	for _, w := range h.writers {
		w.regs = slices.DeleteFunc(w.regs, func(r *register) bool { return r.kind == regLife && r.truth == lifeRemoved })
	}
	return nil
}

// agentsSeeModel logs in again after a restart, as the controller agent,
// a machine agent and the admin, and checks that what they see through
// the API is what is on disk (the truth verify established; the daemon has
// taken no writes since it started). machines are the top-level machine
// ids of the controller model.
func (h *harness) agentsSeeModel(ctx context.Context, cycle int, addr string, machines []string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	bad := func(format string, args ...any) error {
		return &Violation{Cycle: cycle, Kind: ViolationAPIView, Detail: fmt.Sprintf(format, args...)}
	}

	ctrl, err := h.dial(ctx, addr, false, "")
	if err != nil {
		return bad("controller agent: %v", err)
	}
	defer ctrl.Close()
	var watch params.StringsWatchResult
	if err := ctrl.Call(ctx, "Provisioner", 11, "", "WatchModelMachines", nil, &watch); err != nil {
		return bad("WatchModelMachines: %v", err)
	}
	got := slices.Clone(watch.Changes)
	state.SortMachineIDs(got)
	if !slices.Equal(got, machines) {
		return bad("WatchModelMachines initial ids %v; on disk %v", got, machines)
	}
	if err := client.NewStringsWatcher(ctrl, watch.StringsWatcherId).Stop(ctx); err != nil {
		return bad("stopping the machines watcher: %v", err)
	}

	var status, instStatus, life []*register
	for _, r := range h.regs {
		switch r.kind {
		case regStatus:
			status = append(status, r)
		case regInstanceStatus:
			instStatus = append(instStatus, r)
		case regLife:
			life = append(life, r)
		}
	}
	for _, q := range []struct {
		method string
		regs   []*register
	}{{"Status", status}, {"InstanceStatus", instStatus}} {
		var res params.StatusResults
		if err := ctrl.Call(ctx, "Provisioner", 11, "", q.method, entities(q.regs), &res); err != nil {
			return bad("%s: %v", q.method, err)
		}
		if len(res.Results) != len(q.regs) {
			return bad("%s: %d results for %d machines", q.method, len(res.Results), len(q.regs))
		}
		for i, r := range q.regs {
			if res.Results[i].Error != nil {
				return bad("%s of machine %s: %v", q.method, r.name, res.Results[i].Error)
			}
			if v := res.Results[i].Status + "|" + res.Results[i].Info; v != r.truth {
				return bad("%s of machine %s is %q; on disk %q", q.method, r.name, v, r.truth)
			}
		}
	}
	var lifeRes params.LifeResults
	if err := ctrl.Call(ctx, "Provisioner", 11, "", "Life", entities(life), &lifeRes); err != nil {
		return bad("Life: %v", err)
	}
	var ids params.StringResults
	if err := ctrl.Call(ctx, "Provisioner", 11, "", "InstanceId", entities(life), &ids); err != nil {
		return bad("InstanceId: %v", err)
	}
	if len(lifeRes.Results) != len(life) || len(ids.Results) != len(life) {
		return bad("Life/InstanceId: wrong number of results")
	}
	for i, r := range life {
		wantLife, wantID, wantCode := "alive", instanceID(r.name), ""
		switch r.truth {
		case lifeUnprovisioned:
			wantID, wantCode = "", params.CodeNotProvisioned
		case lifeDead:
			wantLife = "dead"
		}
		if e := lifeRes.Results[i].Error; e != nil || lifeRes.Results[i].Life != wantLife {
			return bad("Life of machine %s: %q, %v; on disk %s", r.name, lifeRes.Results[i].Life, e, r.truth)
		}
		gotCode := ""
		if e := ids.Results[i].Error; e != nil {
			gotCode = e.Code
		}
		if ids.Results[i].Result != wantID || gotCode != wantCode {
			return bad("InstanceId of machine %s: %q (error code %q); on disk %s", r.name, ids.Results[i].Result, gotCode, r.truth)
		}
	}

	// A machine agent reconnects with its last acknowledged password.
	for _, r := range h.regs {
		if r.kind != regPassword {
			continue
		}
		agent, err := client.Dial(ctx, h.clientConfig(addr, h.creds.ControllerModelUUID))
		if err != nil {
			return bad("machine agent dial: %v", err)
		}
		_, err = agent.LoginAgent(ctx, machineTag(r.name), r.truth, nonceOf(r.name))
		if err == nil {
			var res params.LifeResults
			err = agent.Call(ctx, "Provisioner", 11, "", "Life", params.Entities{Entities: []params.Entity{{Tag: machineTag(r.name)}}}, &res)
			if err == nil && (len(res.Results) != 1 || res.Results[0].Life != "alive") {
				err = fmt.Errorf("own life %+v", res.Results)
			}
		}
		agent.Close()
		if err != nil {
			return bad("machine agent %s with its acknowledged password: %v", r.name, err)
		}
		break // one per cycle is enough: the others are checked offline
	}

	admin, err := h.dial(ctx, addr, true, "")
	if err != nil {
		return bad("admin: %v", err)
	}
	defer admin.Close()
	var models params.ListModelsResult
	if err := admin.Call(ctx, "ModelAdmin", 1, "", "ListModels", nil, &models); err != nil {
		return bad("ListModels: %v", err)
	}
	var cfg params.ModelConfigInfo
	if err := admin.Call(ctx, "ModelAdmin", 1, "", "ModelConfig", params.ModelArgs{Model: "default"}, &cfg); err != nil {
		return bad("ModelConfig: %v", err)
	}
	listed := map[string]string{}
	for _, m := range models.Models {
		listed[m.Name] = m.Life
	}
	for _, r := range h.regs {
		switch r.kind {
		case regModel:
			got := ""
			if l, ok := listed[r.name]; ok {
				got = "present"
				if l != "alive" {
					got = l
				}
			}
			if got != r.truth {
				return bad("ListModels: %s is %q; on disk %q", r, got, r.truth)
			}
		case regConfig:
			got := ""
			if v, ok := cfg.Config[r.name]; ok {
				got = fmt.Sprint(v)
			}
			if got != r.truth {
				return bad("ModelConfig: %s is %q; on disk %q (keys %v)", r, got, r.truth, slices.Sorted(maps.Keys(cfg.Config)))
			}
		}
	}
	return nil
}

func entities(regs []*register) params.Entities {
	out := params.Entities{Entities: make([]params.Entity, len(regs))}
	for i, r := range regs {
		out.Entities[i].Tag = machineTag(r.name)
	}
	return out
}
