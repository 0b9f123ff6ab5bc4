package modeladmin

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/juju/errors"
	"github.com/juju/names/v5"

	"github.com/provisiond/provisiond/environ"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/storage"
)

func registerMachines(m *methods) {
	rpc.Handle(m, "AddMachines", (*ModelAdmin).AddMachines)
	rpc.Handle(m, "RemoveMachines", (*ModelAdmin).RemoveMachines)
}

// Bounds of AddMachines.
const (
	MaxAddMachines = 100 // machines per call
	MaxDisks       = 16  // volumes per machine
)

// AddMachines adds Count machines (default 1) to an IAAS model, all alike:
// top-level machines, or with placement "TYPE:ID" containers on machine
// ID, or with "zone=ZONE" machines in that availability zone (one of the
// zones the model's subnets name). Everything is parsed and checked before
// the first machine is added, so bad input adds nothing:
//
//   - the base ("ubuntu@22.04") and the constraints (Juju's syntax; the
//     spaces and zones they name must exist in the model);
//   - the host of a container: it must exist, be alive and, once its agent
//     has reported the container types it supports, support the type.
//     Until it has reported, any type is accepted (the report then marks
//     pending containers of other types with an error status);
//   - the disks: storage constraints "POOL,SIZE,COUNT" naming a pool of
//     the model or a provider type that makes block storage (an empty pool
//     is the model's storage-default-block-source, else loop; the size
//     defaults to 1G, the count to 1).
//
// The machines are added one commit each. Should one fail after the first
// was added (the model or host changed meanwhile), the error names the
// machines already added.
func (a *ModelAdmin) AddMachines(ctx context.Context, args params.AddMachinesArgs) (params.AddMachinesResult, error) {
	// Only disks without a pool read the config (the model's default
	// block source): the model's head is what every other add needs.
	read := a.modelHead
	if len(args.Disks) > 0 {
		read = a.model
	}
	m, err := read(ctx, args.Model)
	if err != nil {
		return params.AddMachinesResult{}, err
	}
	if m.Type != state.ModelTypeIAAS {
		return params.AddMachinesResult{}, errors.NewNotSupported(nil,
			fmt.Sprintf("model %q is a %s model: machines need an iaas model", m.Name, m.Type))
	}
	count := args.Count
	if count == 0 {
		count = 1
	}
	if count < 1 || count > MaxAddMachines {
		return params.AddMachinesResult{}, errors.NewNotValid(nil, fmt.Sprintf("count %d: want 1 to %d", count, MaxAddMachines))
	}
	p, err := a.machineParams(ctx, m, args)
	if err != nil {
		return params.AddMachinesResult{}, err
	}
	out := params.AddMachinesResult{Machines: []string{}}
	for range count {
		added, err := a.st.AddMachine(ctx, m.UUID, p)
		if err != nil {
			if len(out.Machines) > 0 {
				return params.AddMachinesResult{}, errors.Annotatef(err, "added machines %s, then",
					strings.Join(out.Machines, ", "))
			}
			return params.AddMachinesResult{}, err
		}
		out.Machines = append(out.Machines, added.ID)
	}
	return out, nil
}

// machineParams parses and checks what AddMachines was given.
func (a *ModelAdmin) machineParams(ctx context.Context, m state.Model, args params.AddMachinesArgs) (state.MachineParams, error) {
	var p state.MachineParams
	var err error
	if args.Base != "" {
		if p.Base, err = state.ParseBase(args.Base); err != nil {
			return p, err
		}
	}
	if p.Constraints, err = state.ParseConstraints(args.Constraints); err != nil {
		return p, err
	}
	// The zones are read only for a machine that names one: an add
	// without a zone (the usual) reads no subnet.
	zones := func() ([]string, error) {
		subnets, err := a.st.Subnets(ctx, m.UUID)
		if err != nil {
			return nil, err
		}
		return zonesOf(subnets), nil
	}
	for _, s := range append(p.Constraints.PositiveSpaces(), p.Constraints.NegativeSpaces()...) {
		if _, err := a.st.Space(ctx, m.UUID, s); err != nil {
			return p, errors.Annotate(err, `"spaces" constraint`)
		}
	}
	if p.Constraints.Zones != nil && len(*p.Constraints.Zones) > 0 {
		known, err := zones()
		if err != nil {
			return p, err
		}
		for _, z := range *p.Constraints.Zones {
			if err := checkZone(z, known); err != nil {
				return p, errors.Annotate(err, `"zones" constraint`)
			}
		}
	}
	if err := a.placement(ctx, m, args.Placement, zones, &p); err != nil {
		return p, err
	}
	if p.Volumes, err = a.disks(ctx, m, args.Disks); err != nil {
		return p, err
	}
	return p, nil
}

func zonesOf(subnets []state.Subnet) []string {
	es := make([]environ.Subnet, len(subnets))
	for i, s := range subnets {
		es[i] = s.Environ()
	}
	return environ.AvailabilityZones(es)
}

func checkZone(z string, zones []string) error {
	if slices.Contains(zones, z) {
		return nil
	}
	known := "the model's subnets name none"
	if len(zones) > 0 {
		known = "known: " + strings.Join(zones, ", ")
	}
	return errors.NewNotValid(nil, fmt.Sprintf("zone %q is not a zone of any subnet (%s)", z, known))
}

// placement reads "", "TYPE:ID" or "zone=ZONE" into p.
func (a *ModelAdmin) placement(ctx context.Context, m state.Model, s string, zones func() ([]string, error), p *state.MachineParams) error {
	bad := func(why string) error {
		return errors.NewNotValid(nil, fmt.Sprintf("placement %q not valid: %s", s, why))
	}
	switch {
	case s == "":
		return nil
	case strings.HasPrefix(s, "zone="):
		z := strings.TrimPrefix(s, "zone=")
		known, err := zones()
		if err != nil {
			return err
		}
		if err := checkZone(z, known); err != nil {
			return err
		}
		p.Placement = s
		return nil
	case strings.Contains(s, ":"):
		typ, id, _ := strings.Cut(s, ":")
		if !slices.Contains(state.PlacementContainerTypes, typ) {
			return bad(fmt.Sprintf("container type %q is not one of %s", typ, strings.Join(state.PlacementContainerTypes, ", ")))
		}
		if !names.IsValidMachine(id) {
			return bad(fmt.Sprintf("%q is not a machine id", id))
		}
		host, err := a.st.MachineHost(ctx, m.UUID, id)
		if err != nil {
			return err
		}
		if host.Life != state.Alive {
			return errors.NewNotValid(nil, fmt.Sprintf("machine %s is %s: it takes no new containers", id, host.Life))
		}
		if host.SupportedContainersKnown && !slices.Contains(host.SupportedContainers, typ) {
			return errors.NewNotSupported(nil, fmt.Sprintf("machine %s cannot host %s containers", id, typ))
		}
		p.ParentID, p.ContainerType = id, typ
		return nil
	}
	return bad("want TYPE:MACHINE (lxd:3, kvm:3) or zone=ZONE")
}

// disks parses storage constraints into the volumes of one machine.
func (a *ModelAdmin) disks(ctx context.Context, m state.Model, disks []string) ([]state.VolumeParams, error) {
	var out []state.VolumeParams
	for _, d := range disks {
		c, err := storage.ParseConstraints(d)
		if err != nil {
			return nil, errors.Annotatef(err, "disks %q", d)
		}
		if c.Pool == "" {
			block, _ := m.Config[storage.DefaultBlockSourceKey].(string)
			if c.Pool, err = storage.DefaultPool(storage.KindBlock, c, storage.PoolDefaults{Block: block}); err != nil {
				return nil, errors.Annotatef(err, "disks %q", d)
			}
		}
		if err := a.checkBlockPool(ctx, m, c.Pool); err != nil {
			return nil, errors.Annotatef(err, "disks %q", d)
		}
		if c.Size == 0 {
			c.Size = storage.DefaultStorageSize
		}
		if c.Count == 0 {
			c.Count = 1
		}
		if c.Count > MaxDisks || uint64(len(out))+c.Count > MaxDisks {
			return nil, errors.NewNotValid(nil, fmt.Sprintf("disks %q: at most %d volumes per machine", d, MaxDisks))
		}
		for range c.Count {
			out = append(out, state.VolumeParams{Pool: c.Pool, Size: c.Size})
		}
	}
	return out, nil
}

// checkBlockPool checks that name is a pool of the model or a provider
// type of the model's storage registry, whose provider makes block
// storage.
func (a *ModelAdmin) checkBlockPool(ctx context.Context, m state.Model, name string) error {
	reg := state.StorageRegistry(m.Type)
	provider := name
	pool, err := a.st.StoragePool(ctx, m.UUID, name)
	switch {
	case err == nil:
		provider = pool.Provider
	case !errors.Is(err, errors.NotFound):
		return err
	default:
		if _, err := reg.Provider(storage.ProviderType(name)); err != nil {
			return errors.NewNotFound(nil, fmt.Sprintf("storage pool %q not found", name))
		}
	}
	if p, err := reg.Provider(storage.ProviderType(provider)); err == nil && !p.Supports(storage.KindBlock) {
		return errors.NewNotValid(nil, fmt.Sprintf("storage pool %q (provider %s) makes no block storage: machine disks are volumes", name, provider))
	}
	return nil
}

// RemoveMachines makes machines (or containers) dying, all or none; their
// agents and the provisioner take it from there. Without force, a machine
// hosting units or containers is refused (codes "machine has assigned
// units", "machine is hosting containers"); with force, its containers
// and units become dying with it. Machines already dying are left as they
// are. The controller machine cannot be removed.
//
// With no-wait (which needs force, as Juju's remove-machine --force
// --no-wait), nothing waits for the agents: the machines, their containers
// at any depth and the units on all of them are removed at once, deepest
// containers first, their addresses released. Instances the provisioner
// started are not stopped by it.
func (a *ModelAdmin) RemoveMachines(ctx context.Context, args params.RemoveMachinesArgs) (params.RemoveMachinesResult, error) {
	m, err := a.model(ctx, args.Model)
	if err != nil {
		return params.RemoveMachinesResult{}, err
	}
	if len(args.Machines) == 0 {
		return params.RemoveMachinesResult{}, errors.NewNotValid(nil, "no machines given")
	}
	if args.NoWait && !args.Force {
		return params.RemoveMachinesResult{}, errors.NewNotValid(nil, "no-wait needs force: it removes what the machines host")
	}
	dying, err := a.st.DestroyMachines(ctx, m.UUID, args.Machines, args.Force)
	if err != nil {
		return params.RemoveMachinesResult{}, err
	}
	if dying == nil {
		dying = []string{}
	}
	if !args.NoWait {
		return params.RemoveMachinesResult{Dying: dying, Removed: []string{}}, nil
	}
	removed, err := a.removeMachinesNow(ctx, m, args.Machines)
	if err != nil {
		if len(removed) > 0 {
			return params.RemoveMachinesResult{}, errors.Annotatef(err, "removed machines %s, then", strings.Join(removed, ", "))
		}
		return params.RemoveMachinesResult{}, err
	}
	return params.RemoveMachinesResult{Dying: []string{}, Removed: removed}, nil
}

// removeMachinesNow removes machines, their containers and the units on
// them, deepest first, one machine per step (each step is one or more
// commits; a concurrent change can stop it part way, and the caller names
// what was removed).
func (a *ModelAdmin) removeMachinesNow(ctx context.Context, m state.Model, ids []string) ([]string, error) {
	all, err := a.st.Machines(ctx, m.UUID)
	if err != nil {
		return nil, err
	}
	var targets []string
	for _, mc := range all {
		for _, id := range ids {
			if mc.ID == id || strings.HasPrefix(mc.ID, id+"/") {
				targets = append(targets, mc.ID)
				break
			}
		}
	}
	// Deepest first, so a host goes after its containers.
	slices.SortStableFunc(targets, func(x, y string) int { return strings.Count(y, "/") - strings.Count(x, "/") })
	removed := []string{}
	for _, id := range targets {
		units, err := a.st.UnitsOnMachine(ctx, m.UUID, id)
		if err != nil {
			return removed, err
		}
		for _, u := range units {
			if err := a.st.RemoveUnit(ctx, m.UUID, u.Name); err != nil && !errors.Is(err, errors.NotFound) {
				return removed, err
			}
		}
		if err := a.st.EnsureMachineDead(ctx, m.UUID, id); err != nil {
			return removed, err
		}
		if _, err := a.st.RemoveMachine(ctx, m.UUID, id); err != nil {
			return removed, err
		}
		removed = append(removed, id)
	}
	return removed, nil
}
