package state

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/watcher"
)

// Errors of the machine life cycle, matched by the facades' error table.
var (
	// ErrHasAssignedUnits: a machine with units cannot die (code "machine
	// has assigned units").
	ErrHasAssignedUnits = errors.New("machine has assigned units")
	// ErrHasContainers: a machine hosting containers cannot die (code
	// "machine is hosting containers").
	ErrHasContainers = errors.New("machine is hosting containers")
)

// kindError is an error with its own text that matches a kind sentinel.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string        { return e.msg }
func (e *kindError) Is(target error) bool { return target == e.kind }

// lifeFields are the change fields of a move to life l.
func lifeFields(l Life) []string {
	if l == Dead {
		return []string{watcher.FieldLife, FieldDead}
	}
	return []string{watcher.FieldLife}
}

// SetMachineDying moves an alive machine (or container) to dying; a dying
// or dead one is left as it is. The controller machine refuses.
func (st *State) SetMachineDying(ctx context.Context, model, id string) error {
	return st.updateMachine(ctx, model, id, func(tx *txn, d *machineDoc) ([]string, error) {
		if d.Life != Alive {
			return nil, errNoChange
		}
		if IsController(d.Machine) {
			return nil, errors.Errorf("machine %s is required by the model", id)
		}
		d.Life = Dying
		return lifeFields(Dying), nil
	})
}

// EnsureMachineDead moves a machine to dead (idempotent). It refuses a
// controller machine, one with units assigned, and one hosting containers.
func (st *State) EnsureMachineDead(ctx context.Context, model, id string) error {
	return st.updateMachine(ctx, model, id, ensureMachineDead)
}

// EnsureMachinesDead is EnsureMachineDead of each machine, the items in one
// transaction (bulk); each keeps its error.
func (st *State) EnsureMachinesDead(ctx context.Context, model string, ids []string) []error {
	return st.updateMachines(ctx, model, ids, func(int) machineOp { return ensureMachineDead })
}

func ensureMachineDead(tx *txn, d *machineDoc) ([]string, error) {
	if d.Life == Dead {
		return nil, errNoChange
	}
	if IsController(d.Machine) {
		return nil, errors.Errorf("machine %s is required by the model", d.ID)
	}
	units, err := unitsOnMachine(tx, d.Model, d.ID)
	if err != nil {
		return nil, err
	}
	if len(units) > 0 {
		return nil, &kindError{fmt.Sprintf("machine %s has unit %q assigned", d.ID, units[0].Name), ErrHasAssignedUnits}
	}
	cs, err := containers(tx, d.Model, d.ID)
	if err != nil {
		return nil, err
	}
	if len(cs) > 0 {
		ids := make([]string, len(cs))
		for i, c := range cs {
			ids[i] = c.ID
		}
		return nil, &kindError{fmt.Sprintf("machine %s is hosting containers %q", d.ID, strings.Join(ids, ",")), ErrHasContainers}
	}
	d.Life = Dead
	return lifeFields(Dead), nil
}

// RemoveMachine removes a dead machine, releasing its IP addresses in the
// same transaction (see CompleteMachineRemovals for what goes with it). It
// returns the released addresses.
func (st *State) RemoveMachine(ctx context.Context, model, id string) ([]IPAddress, error) {
	var released []IPAddress
	err := st.update(ctx, func(tx *txn) error {
		var err error
		released, err = tx.removeMachine(model, id)
		return err
	})
	return released, err
}

// RemoveMachines is RemoveMachine of each machine, the items in one
// transaction (bulk): released[i] are the addresses machine ids[i] released
// (none when errs[i] is not nil).
func (st *State) RemoveMachines(ctx context.Context, model string, ids []string) (released [][]IPAddress, errs []error) {
	released = make([][]IPAddress, len(ids))
	errs = st.bulk(ctx, len(ids), func(tx *txn, i int) error {
		var err error
		released[i], err = tx.removeMachine(model, ids[i])
		return err
	})
	for i, err := range errs {
		if err != nil {
			released[i] = nil
		}
	}
	return released, errs
}

func (tx *txn) removeMachine(model, id string) ([]IPAddress, error) {
	d, err := getMachine(tx, model, id)
	if err != nil {
		return nil, err
	}
	if d.Life != Dead {
		return nil, errors.Errorf("cannot remove machine %s: machine is not dead", id)
	}
	addrs, err := machineAddresses(tx, model, id)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if err := tx.remove(KindIPAddress, model, a.Value); err != nil {
			return nil, err
		}
	}
	if err := tx.detachVolumes(model, id); err != nil {
		return nil, err
	}
	if err := tx.removeContainerSequences(model, id); err != nil {
		return nil, err
	}
	if err := tx.remove(KindMachine, model, id); err != nil {
		return nil, err
	}
	return addrs, nil
}

// InstanceInfo is what SetInstanceInfo records.
type InstanceInfo struct {
	InstanceID    string
	Nonce         string
	Hardware      *HardwareCharacteristics
	DisplayName   string
	CharmProfiles []string
	// Volumes and VolumeAttachments are keyed by volume id.
	Volumes           map[string]VolumeInfo
	VolumeAttachments map[string]VolumeAttachmentInfo
	// LinkLayerDevices, if any, replace the machine's devices.
	LinkLayerDevices []LinkLayerDevice
}

// SetInstanceInfo records a machine's provisioning: instance id and
// nonce (once), hardware, and the volumes made with the instance.
func (st *State) SetInstanceInfo(ctx context.Context, model, id string, info InstanceInfo) error {
	if err := checkInstanceInfo(id, info); err != nil {
		return err
	}
	return st.updateMachine(ctx, model, id, setInstanceInfo(model, id, info))
}

// MachineInstanceInfo is one item of SetInstanceInfos.
type MachineInstanceInfo struct {
	ID   string
	Info InstanceInfo
}

// SetInstanceInfos is SetInstanceInfo of each item, the valid items in one
// transaction (bulk); each keeps its error.
func (st *State) SetInstanceInfos(ctx context.Context, model string, items []MachineInstanceInfo) []error {
	return st.bulk(ctx, len(items), func(tx *txn, i int) error {
		if err := checkInstanceInfo(items[i].ID, items[i].Info); err != nil {
			return err
		}
		return tx.updateMachine(model, items[i].ID, setInstanceInfo(model, items[i].ID, items[i].Info))
	})
}

func instanceInfoPrefix(id string) string {
	return fmt.Sprintf("cannot set instance data for machine %q", id)
}

func checkInstanceInfo(id string, info InstanceInfo) error {
	if info.InstanceID == "" || info.Nonce == "" {
		return errors.NewNotValid(nil, instanceInfoPrefix(id)+": instance id and nonce cannot be empty")
	}
	return nil
}

func setInstanceInfo(model, id string, info InstanceInfo) machineOp {
	prefix := instanceInfoPrefix(id)
	return func(tx *txn, d *machineDoc) ([]string, error) {
		if d.Life != Alive {
			return nil, errors.NewNotFound(nil, prefix+": not found or not alive")
		}
		if d.InstanceID != "" {
			return nil, errors.NewAlreadyExists(nil, prefix+": already set")
		}
		d.InstanceID = info.InstanceID
		d.Nonce = info.Nonce
		d.Hardware = info.Hardware
		d.DisplayName = info.DisplayName
		if len(info.CharmProfiles) > 0 {
			d.CharmProfiles = slices.Clone(info.CharmProfiles)
		}
		if info.LinkLayerDevices != nil {
			d.LinkLayerDevices = info.LinkLayerDevices
		}
		for _, vid := range slices.Sorted(maps.Keys(info.Volumes)) {
			if err := tx.setVolumeInfo(model, vid, info.Volumes[vid]); err != nil {
				return nil, errors.Annotatef(err, "%s", prefix)
			}
		}
		for _, vid := range slices.Sorted(maps.Keys(info.VolumeAttachments)) {
			if err := tx.setVolumeAttachmentInfo(model, vid, id, info.VolumeAttachments[vid]); err != nil {
				return nil, errors.Annotatef(err, "%s", prefix)
			}
		}
		return []string{FieldInstance}, nil
	}
}

// StatusKind names one of a machine's status records.
type StatusKind string

const (
	AgentStatus        StatusKind = "agent"
	InstanceStatus     StatusKind = "instance"
	ModificationStatus StatusKind = "modification"
)

// Allowed status values per kind.
var (
	agentStatuses        = []string{"pending", "started", "stopped", "error", "down"}
	instanceStatuses     = []string{"", "pending", "allocating", "provisioning", "running", "provisioning error", "error", "unknown"}
	modificationStatuses = []string{"idle", "applied", "error"}
)

func validateStatus(kind StatusKind, m Machine, s Status) error {
	var allowed []string
	switch kind {
	case AgentStatus:
		allowed = agentStatuses
	case InstanceStatus:
		allowed = instanceStatuses
	case ModificationStatus:
		allowed = modificationStatuses
	default:
		return errors.NotValidf("status kind %q", kind)
	}
	if !slices.Contains(allowed, s.Status) {
		return errors.NewNotValid(nil, fmt.Sprintf("cannot set invalid status %q", s.Status))
	}
	if kind == AgentStatus {
		switch s.Status {
		case "error":
			if s.Message == "" {
				return errors.NewNotValid(nil, fmt.Sprintf("cannot set status %q without info", s.Status))
			}
		case "down":
			return errors.NewNotValid(nil, fmt.Sprintf("cannot set status %q", s.Status))
		case "pending":
			if m.InstanceID != "" {
				return errors.NewNotValid(nil, fmt.Sprintf("cannot set status %q", s.Status))
			}
		}
	}
	return nil
}

// SetMachineStatus sets one status record of a machine. Since is the
// state's clock; nil data is stored as empty. An instance status of
// "error" or "provisioning error" sets the agent status to "error" as
// well (its message the status's, or the status itself), in the same
// transaction, as Juju's provisioner does.
func (st *State) SetMachineStatus(ctx context.Context, model, id string, kind StatusKind, s Status) error {
	return st.update(ctx, func(tx *txn) error { return tx.setMachineStatus(model, id, kind, s) })
}

// MachineStatusArg is one item of SetMachineStatuses.
type MachineStatusArg struct {
	ID     string
	Kind   StatusKind
	Status Status
}

// SetMachineStatuses sets each item's status as SetMachineStatus does, in
// one transaction (see bulk): the items that fail are left out, each with
// its error, and the others commit together.
func (st *State) SetMachineStatuses(ctx context.Context, model string, args []MachineStatusArg) []error {
	return st.bulk(ctx, len(args), func(tx *txn, i int) error {
		return tx.setMachineStatus(model, args[i].ID, args[i].Kind, args[i].Status)
	})
}

func (tx *txn) setMachineStatus(model, id string, kind StatusKind, s Status) error {
	if err := checkStatusSize("machine "+id, s.Message, s.Data); err != nil {
		return err
	}
	s.Since = tx.now
	if s.Data == nil {
		s.Data = map[string]any{}
	}
	s.Data = normalizeData(s.Data)
	var agent *Status // the agent status an instance error sets too
	if kind == InstanceStatus && (s.Status == "error" || s.Status == "provisioning error") {
		as := s
		as.Status = "error"
		if as.Message == "" {
			as.Message = s.Status
		}
		agent = &as
	}
	// The patch needs nothing of the record but that it is there, except
	// for an agent's "pending", which depends on its instance id; and the
	// machine records have no index to move (index.go).
	if kind == AgentStatus && s.Status == "pending" {
		return tx.setMachineStatusWhole(model, id, kind, s, agent)
	}
	if _, indexed := indexes[KindMachine]; indexed {
		return tx.setMachineStatusWhole(model, id, kind, s, agent)
	}
	if !validMachineID(id) {
		return errors.NotValidf("machine id %q", id)
	}
	// The errors come in the whole path's order: the machine's, then the
	// status's, then the encoding's.
	set, setErr := machineStatusMembers(kind, s, agent)
	key := entityKey(KindMachine, model, id)
	var out []byte
	var patched bool
	found, err := tx.GetFunc(key, func(raw []byte) {
		if setErr == nil {
			out, patched = patchRecord(raw, set)
		}
	})
	if err != nil {
		return errors.Trace(err)
	}
	if !found {
		return errors.NotFoundf("machine %s", id)
	}
	if err := validateStatus(kind, Machine{}, s); err != nil {
		return err
	}
	if setErr != nil {
		return setErr
	}
	if !patched {
		return tx.setMachineStatusWhole(model, id, kind, s, agent)
	}
	if err := tx.Put(key, out); err != nil {
		return errors.Trace(err)
	}
	tx.Record(change(KindMachine, model, id, FieldStatus))
	return nil
}

// machineStatusMembers returns the members of a machine's record that
// setting s (and agent, if not nil) as its kind of status writes, encoded
// as the record's encoding writes them.
func machineStatusMembers(kind StatusKind, s Status, agent *Status) ([]patchMember, error) {
	var key string
	switch kind {
	case AgentStatus:
		key = "status"
	case InstanceStatus:
		key = "instance-status"
	case ModificationStatus:
		key = "modification-status"
	default:
		return nil, errors.NotValidf("status kind %q", kind)
	}
	b, err := appendStatusJSON(nil, &s)
	if err != nil {
		return nil, errors.Annotatef(err, "encoding machine status")
	}
	set := []patchMember{{key: key, val: b}}
	if agent != nil {
		ab, err := appendStatusJSON(nil, agent)
		if err != nil {
			return nil, errors.Annotatef(err, "encoding machine status")
		}
		set = append(set, patchMember{key: "status", val: ab})
	}
	return set, nil
}

// setMachineStatusWhole is setMachineStatus by decoding the machine's
// record and encoding it again, where patching it is not enough.
func (tx *txn) setMachineStatusWhole(model, id string, kind StatusKind, s Status, agent *Status) error {
	d, err := getMachine(tx, model, id)
	if err != nil {
		return err
	}
	if err := validateStatus(kind, d.Machine, s); err != nil {
		return err
	}
	d.setStatus(kind, s, agent)
	return tx.put(KindMachine, model, id, &d, FieldStatus)
}

// setStatus sets s as the machine's kind of status, and agent (if not
// nil) as its agent status.
func (d *machineDoc) setStatus(kind StatusKind, s Status, agent *Status) {
	switch kind {
	case AgentStatus:
		d.Status = s
	case InstanceStatus:
		d.InstanceStatus = s
	case ModificationStatus:
		d.ModificationStatus = s
	}
	if agent != nil {
		d.Status = *agent
	}
}

// UpdateMachineStatusData merges data into the agent status data (2015
// UpdateStatus). Non-empty merged data needs status "error".
func (st *State) UpdateMachineStatusData(ctx context.Context, model, id string, data map[string]any) error {
	return st.updateMachine(ctx, model, id, func(tx *txn, d *machineDoc) ([]string, error) {
		merged := maps.Clone(d.Status.Data)
		if merged == nil {
			merged = map[string]any{}
		}
		maps.Copy(merged, normalizeData(data))
		if len(merged) > 0 && d.Status.Status != "error" {
			return nil, errors.Errorf("machine %s is not in an error state", id)
		}
		if err := checkStatusSize("machine "+id, d.Status.Message, merged); err != nil {
			return nil, err
		}
		d.Status.Data = merged
		return []string{FieldStatus}, nil
	})
}

func normalizeData(m map[string]any) map[string]any {
	n, err := normalizeConfig(m)
	if err != nil {
		return m
	}
	return n
}

// SetSupportedContainers records the container types machine id supports
// (empty: none), and marks its pending containers of other types with an
// error status.
func (st *State) SetSupportedContainers(ctx context.Context, model, id string, types []string) error {
	return st.update(ctx, func(tx *txn) error { return tx.setSupportedContainers(model, id, types) })
}

// MachineContainers is one item of SetMachinesSupportedContainers.
type MachineContainers struct {
	ID    string
	Types []string
}

// SetMachinesSupportedContainers is SetSupportedContainers of each item,
// the valid items in one transaction (bulk); each keeps its error.
func (st *State) SetMachinesSupportedContainers(ctx context.Context, model string, items []MachineContainers) []error {
	return st.bulk(ctx, len(items), func(tx *txn, i int) error {
		return tx.setSupportedContainers(model, items[i].ID, items[i].Types)
	})
}

func (tx *txn) setSupportedContainers(model, id string, types []string) error {
	for _, t := range types {
		if err := ValidateContainerType(t); err != nil {
			return err
		}
	}
	types = slices.Clone(types)
	if types == nil {
		types = []string{}
	}
	d, err := getMachine(tx, model, id)
	if err != nil {
		return err
	}
	d.SupportedContainers = types
	d.SupportedContainersKnown = true
	if err := tx.put(KindMachine, model, id, &d, FieldSupportedContainers); err != nil {
		return err
	}
	cs, err := containers(tx, model, id)
	if err != nil {
		return err
	}
	for _, c := range cs {
		if c.InstanceID != "" || slices.Contains(types, c.ContainerType()) {
			continue
		}
		cd, err := getMachine(tx, model, c.ID)
		if err != nil {
			return err
		}
		cd.Status = Status{Status: "error", Message: "unsupported container",
			Data: map[string]any{"type": c.ContainerType()}, Since: tx.now}
		if err := tx.put(KindMachine, model, c.ID, &cd, FieldStatus); err != nil {
			return err
		}
	}
	return nil
}

// SetCharmProfiles records the LXD profiles applied to a machine.
func (st *State) SetCharmProfiles(ctx context.Context, model, id string, profiles []string) error {
	return st.updateMachine(ctx, model, id, setCharmProfiles(profiles))
}

// MachineCharmProfiles is one item of SetMachinesCharmProfiles.
type MachineCharmProfiles struct {
	ID       string
	Profiles []string
}

// SetMachinesCharmProfiles is SetCharmProfiles of each item, the items in
// one transaction (bulk); each keeps its error.
func (st *State) SetMachinesCharmProfiles(ctx context.Context, model string, items []MachineCharmProfiles) []error {
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	return st.updateMachines(ctx, model, ids, func(i int) machineOp { return setCharmProfiles(items[i].Profiles) })
}

func setCharmProfiles(profiles []string) machineOp {
	return func(tx *txn, d *machineDoc) ([]string, error) {
		d.CharmProfiles = slices.Clone(profiles)
		return []string{FieldCharmProfiles}, nil
	}
}

// MarkMachineForRemoval marks a dead machine for removal by the provider.
func (st *State) MarkMachineForRemoval(ctx context.Context, model, id string) error {
	return st.updateMachine(ctx, model, id, markForRemoval)
}

// MarkMachinesForRemoval is MarkMachineForRemoval of each machine, the
// items in one transaction (bulk); each keeps its error.
func (st *State) MarkMachinesForRemoval(ctx context.Context, model string, ids []string) []error {
	return st.updateMachines(ctx, model, ids, func(int) machineOp { return markForRemoval })
}

func markForRemoval(tx *txn, d *machineDoc) ([]string, error) {
	if d.Life != Dead {
		return nil, errors.Errorf("cannot remove machine %s: machine is not dead", d.ID)
	}
	if d.MarkedForRemoval {
		return nil, errNoChange
	}
	d.MarkedForRemoval = true
	return []string{FieldRemovalMark}, nil
}

// SetKeepInstance sets whether the instance outlives the machine.
func (st *State) SetKeepInstance(ctx context.Context, model, id string, keep bool) error {
	return st.updateMachine(ctx, model, id, func(tx *txn, d *machineDoc) ([]string, error) {
		if d.KeepInstance == keep {
			return nil, errNoChange
		}
		d.KeepInstance = keep
		return []string{"keep-instance"}, nil
	})
}

// SetMachineAgentStarted records that the machine's agent started now,
// running version (a binary version; "" keeps the recorded one).
func (st *State) SetMachineAgentStarted(ctx context.Context, model, id, version string) error {
	return st.updateMachine(ctx, model, id, func(tx *txn, d *machineDoc) ([]string, error) {
		d.AgentStartTime = tx.now
		fields := []string{FieldAgentStartTime}
		if version != "" && version != d.AgentVersion {
			d.AgentVersion = version
			fields = append(fields, FieldAgentVersion)
		}
		return fields, nil
	})
}

// SetLinkLayerDevices replaces the network devices a machine reported.
func (st *State) SetLinkLayerDevices(ctx context.Context, model, id string, devs []LinkLayerDevice) error {
	return st.updateMachine(ctx, model, id, func(tx *txn, d *machineDoc) ([]string, error) {
		d.LinkLayerDevices = slices.Clone(devs)
		return []string{FieldNetworkConfig}, nil
	})
}
