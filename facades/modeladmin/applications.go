package modeladmin

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/juju/errors"
	"github.com/juju/names/v5"
	"go.yaml.in/yaml/v3"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/storage"
)

func registerApplications(m *methods) {
	rpc.Handle(m, "Deploy", (*ModelAdmin).Deploy)
	rpc.Handle(m, "Application", (*ModelAdmin).Application)
	rpc.Handle(m, "AddUnits", (*ModelAdmin).AddUnits)
	rpc.Handle(m, "RemoveUnits", (*ModelAdmin).RemoveUnits)
	rpc.Handle(m, "ScaleApplication", (*ModelAdmin).ScaleApplication)
	rpc.Handle(m, "ApplicationConfig", (*ModelAdmin).ApplicationConfig)
	rpc.Handle(m, "SetApplicationConfig", (*ModelAdmin).SetApplicationConfig)
	rpc.Handle(m, "SetApplicationTrust", (*ModelAdmin).SetApplicationTrust)
	rpc.Handle(m, "SetApplicationConstraints", (*ModelAdmin).SetApplicationConstraints)
	rpc.Handle(m, "SetPodSpec", (*ModelAdmin).SetPodSpec)
	rpc.Handle(m, "RemoveApplication", (*ModelAdmin).RemoveApplication)
}

// MaxAddUnits bounds the units of one AddUnits call. (The local charm
// revisions of one charm name in a model are bounded by
// state.MaxLocalCharmRevisions.)
const MaxAddUnits = 100

// Deploy deploys an application from a charm's metadata.yaml (sent as
// text, parsed here: errors name the line). In a CAAS model the
// application gets Scale units (default 1) from the unit provisioner; in
// an IAAS model it gets none (AddUnits places them), and Scale and Devices
// are refused. The charm is stored as "local:NAME-REV": the lowest
// revision whose stored metadata is the same, or the first free one, chosen
// in the deploy's transaction (so daemons sharing a store agree).
// Everything is checked before anything is written, in one transaction.
func (a *ModelAdmin) Deploy(_ context.Context, args params.DeployArgs) (params.ApplicationStatus, error) {
	m, err := a.model(args.Model)
	if err != nil {
		return params.ApplicationStatus{}, err
	}
	if !names.IsValidApplication(args.Application) {
		return params.ApplicationStatus{}, errors.NotValidf("application name %q", args.Application)
	}
	if strings.TrimSpace(args.CharmMetadata) == "" {
		return params.ApplicationStatus{}, errors.NewNotValid(nil, "charm metadata is empty")
	}
	if len(args.CharmMetadata) > MaxCharmMetadata {
		return params.ApplicationStatus{}, errors.NewNotValid(nil,
			fmt.Sprintf("charm metadata is longer than %d bytes", MaxCharmMetadata))
	}
	meta, err := charm.ParseMeta([]byte(args.CharmMetadata))
	if err != nil {
		return params.ApplicationStatus{}, errors.NewNotValid(err, "")
	}
	caas := m.Type == state.ModelTypeCAAS
	k8sCharm := meta.Deployment != nil || len(meta.Containers) > 0
	switch {
	case caas && meta.Subordinate:
		return params.ApplicationStatus{}, errors.NewNotSupported(nil,
			fmt.Sprintf("charm %q is a subordinate: caas models take no subordinates", meta.Name))
	case !caas && k8sCharm:
		return params.ApplicationStatus{}, errors.NewNotSupported(nil,
			fmt.Sprintf("charm %q is a kubernetes charm (deployment or containers): deploy it to a caas model", meta.Name))
	case !caas && args.Scale != nil:
		return params.ApplicationStatus{}, errors.NewNotValid(nil,
			fmt.Sprintf("model %q is an iaas model: scale is for caas applications (add units with AddUnits)", m.Name))
	case !caas && len(args.Devices) > 0:
		return params.ApplicationStatus{}, errors.NewNotSupported(nil,
			fmt.Sprintf("model %q is an iaas model: devices are for caas applications", m.Name))
	}
	scale := 1
	if args.Scale != nil {
		scale = *args.Scale
	}
	if scale < 0 {
		return params.ApplicationStatus{}, errors.NotValidf("application scale %d", scale)
	}
	if err := validateConfig(args.Config, nil, nil); err != nil {
		return params.ApplicationStatus{}, err
	}
	cons, err := a.applicationConstraints(m, args.Constraints)
	if err != nil {
		return params.ApplicationStatus{}, err
	}
	stor, err := storage.ParseConstraintsMap(args.Storage, true)
	if err != nil {
		return params.ApplicationStatus{}, err
	}
	devices, err := parseDevices(meta, args.Devices)
	if err != nil {
		return params.ApplicationStatus{}, err
	}

	// No URL: state picks the local charm's in the deploy's transaction.
	ch := state.Charm{Meta: meta}
	if caas {
		_, err = a.st.AddCAASApplication(m.UUID, state.CAASApplicationParams{Name: args.Application, Charm: ch,
			Scale: scale, Config: args.Config, Trust: args.Trust, Constraints: cons, Storage: stor, Devices: devices})
	} else {
		_, err = a.st.AddIAASApplication(m.UUID, state.IAASApplicationParams{Name: args.Application, Charm: ch,
			Config: args.Config, Trust: args.Trust, Constraints: cons, Storage: stor})
	}
	if err != nil {
		return params.ApplicationStatus{}, err
	}
	return a.applicationStatus(m, args.Application)
}

// applicationConstraints parses constraints and checks that the spaces
// they name exist.
func (a *ModelAdmin) applicationConstraints(m state.Model, s string) (state.Constraints, error) {
	cons, err := state.ParseConstraints(s)
	if err != nil {
		return cons, err
	}
	for _, sp := range append(cons.PositiveSpaces(), cons.NegativeSpaces()...) {
		if _, err := a.st.Space(m.UUID, sp); err != nil {
			return cons, errors.Annotate(err, `"spaces" constraint`)
		}
	}
	return cons, nil
}

// parseDevices reads "NAME=[COUNT,]TYPE[,KEY=VALUE;...]" (Juju's --device)
// for devices the charm declares.
func parseDevices(meta *charm.Meta, args []string) (map[string]state.DeviceConstraints, error) {
	if len(args) == 0 {
		return nil, nil
	}
	out := map[string]state.DeviceConstraints{}
	for _, arg := range args {
		bad := func(why string) error {
			return errors.NewNotValid(nil, fmt.Sprintf("device %q not valid: %s", arg, why))
		}
		name, spec, ok := strings.Cut(arg, "=")
		if !ok || name == "" || spec == "" {
			return nil, bad("want NAME=[COUNT,]TYPE[,KEY=VALUE;...]")
		}
		if _, dup := out[name]; dup {
			return nil, bad(fmt.Sprintf("device %q given twice", name))
		}
		if _, ok := meta.Devices[name]; !ok {
			return nil, errors.NewNotValid(nil, fmt.Sprintf("device %q: charm %q has no such device", name, meta.Name))
		}
		parts := strings.Split(spec, ",")
		d := state.DeviceConstraints{Count: 1}
		if n, err := strconv.ParseInt(parts[0], 10, 64); err == nil {
			if n <= 0 {
				return nil, bad(fmt.Sprintf("count %d is not positive", n))
			}
			d.Count = n
			parts = parts[1:]
		}
		if len(parts) == 0 || parts[0] == "" || len(parts) > 2 {
			return nil, bad("want NAME=[COUNT,]TYPE[,KEY=VALUE;...]")
		}
		d.Type = parts[0]
		if len(parts) == 2 {
			d.Attributes = map[string]string{}
			for _, kv := range strings.Split(parts[1], ";") {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return nil, bad(fmt.Sprintf("attribute %q: want KEY=VALUE", kv))
				}
				d.Attributes[k] = v
			}
		}
		cd := meta.Devices[name]
		if d.Count < cd.CountMin || (cd.CountMax > 0 && d.Count > cd.CountMax) {
			return nil, errors.NewNotValid(nil, fmt.Sprintf("device %q count %d (charm allows %d to %d)", name, d.Count, cd.CountMin, cd.CountMax))
		}
		out[name] = d
	}
	return out, nil
}

// app resolves an application of a model.
func (a *ModelAdmin) app(modelName, app string) (state.Model, state.Application, error) {
	m, err := a.model(modelName)
	if err != nil {
		return m, state.Application{}, err
	}
	if app == "" {
		return m, state.Application{}, errors.NewNotValid(nil, "application name is required")
	}
	if !names.IsValidApplication(app) {
		return m, state.Application{}, errors.NotValidf("application name %q", app)
	}
	ap, err := a.st.Application(m.UUID, app)
	return m, ap, err
}

// Application reports one application as Status does.
func (a *ModelAdmin) Application(_ context.Context, args params.ApplicationArgs) (params.ApplicationStatus, error) {
	m, _, err := a.app(args.Model, args.Application)
	if err != nil {
		return params.ApplicationStatus{}, err
	}
	return a.applicationStatus(m, args.Application)
}

// AddUnits adds units of an IAAS application, placed on the machines of
// To in order; each unit beyond them gets a new machine with the
// application's constraints and, for its block storage, volumes (as Juju
// does for a unit deployed without placement). Everything is checked
// first; the units and machines are then added in one transaction (state's
// AddUnits), all or none.
func (a *ModelAdmin) AddUnits(_ context.Context, args params.AddUnitsArgs) (params.AddUnitsResult, error) {
	m, app, err := a.app(args.Model, args.Application)
	if err != nil {
		return params.AddUnitsResult{}, err
	}
	if m.Type != state.ModelTypeIAAS {
		return params.AddUnitsResult{}, errors.NewNotSupported(nil,
			fmt.Sprintf("model %q is a %s model: its units follow the application's scale", m.Name, m.Type))
	}
	if app.Life != state.Alive {
		return params.AddUnitsResult{}, errors.NewNotValid(nil, fmt.Sprintf("application %q is %s: it takes no new units", app.Name, app.Life))
	}
	if app.Subordinate {
		return params.AddUnitsResult{}, errors.NewNotSupported(nil,
			fmt.Sprintf("application %q is a subordinate: its units come with its principals", app.Name))
	}
	count := args.Count
	if count == 0 {
		count = max(1, len(args.To))
	}
	if count < 1 || count > MaxAddUnits {
		return params.AddUnitsResult{}, errors.NewNotValid(nil, fmt.Sprintf("count %d: want 1 to %d", count, MaxAddUnits))
	}
	if len(args.To) > count {
		return params.AddUnitsResult{}, errors.NewNotValid(nil, fmt.Sprintf("%d placements for %d units", len(args.To), count))
	}
	for _, id := range args.To {
		if !names.IsValidMachine(id) {
			return params.AddUnitsResult{}, errors.NotValidf("machine id %q", id)
		}
		mc, err := a.st.Machine(m.UUID, id)
		if err != nil {
			return params.AddUnitsResult{}, err
		}
		if mc.Life != state.Alive {
			return params.AddUnitsResult{}, errors.NewNotValid(nil, fmt.Sprintf("machine %s is %s: it takes no new units", id, mc.Life))
		}
	}
	newMachine, err := a.unitMachineParams(m, app)
	if err != nil {
		return params.AddUnitsResult{}, err
	}
	units, machines, err := a.st.AddUnits(m.UUID, app.Name, state.AddUnitsParams{Count: count, To: args.To, NewMachine: newMachine})
	if err != nil {
		return params.AddUnitsResult{}, err
	}
	out := params.AddUnitsResult{Units: units, Machines: machines}
	if out.Machines == nil {
		out.Machines = []string{}
	}
	return out, nil
}

// unitMachineParams are the params of a machine made for a unit: the
// application's constraints and a volume for each instance of its block
// storage (no pool: the model's storage-default-block-source, else loop).
func (a *ModelAdmin) unitMachineParams(m state.Model, app state.Application) (state.MachineParams, error) {
	p := state.MachineParams{Constraints: app.Constraints}
	if len(app.StorageConstraints) == 0 {
		return p, nil
	}
	ch, err := a.st.Charm(m.UUID, app.CharmURL)
	if err != nil {
		return p, err
	}
	for _, name := range slices.Sorted(maps.Keys(app.StorageConstraints)) {
		c := app.StorageConstraints[name]
		if ch.Meta.Storage[name].Type != charm.StorageBlock {
			continue
		}
		if c.Pool == "" {
			block, _ := m.Config[storage.DefaultBlockSourceKey].(string)
			if c.Pool, err = storage.DefaultPool(storage.KindBlock, c, storage.PoolDefaults{Block: block}); err != nil {
				return p, errors.Annotatef(err, "storage %q", name)
			}
		}
		if c.Count > MaxDisks || uint64(len(p.Volumes))+c.Count > MaxDisks {
			return p, errors.NewNotValid(nil, fmt.Sprintf("storage %q: at most %d volumes per machine", name, MaxDisks))
		}
		for range c.Count {
			p.Volumes = append(p.Volumes, state.VolumeParams{Pool: c.Pool, Size: c.Size})
		}
	}
	return p, nil
}

// RemoveUnits removes units of IAAS applications, all or none checked
// first (each must exist), then all in one transaction (state's
// RemoveUnits: all or none). provisiond models no unit agent that would
// finish a dying unit's removal, so a unit is removed at once, as Juju
// removes a unit whose agent never ran, with its subordinates; a machine
// left without a principal unit and hosting no container becomes dying, as
// in Juju. CAAS units follow their application's scale and are refused.
func (a *ModelAdmin) RemoveUnits(_ context.Context, args params.RemoveUnitsArgs) (params.RemoveUnitsResult, error) {
	m, err := a.model(args.Model)
	if err != nil {
		return params.RemoveUnitsResult{}, err
	}
	if len(args.Units) == 0 {
		return params.RemoveUnitsResult{}, errors.NewNotValid(nil, "no units given")
	}
	var todo []string
	for _, name := range args.Units {
		if !names.IsValidUnit(name) {
			return params.RemoveUnitsResult{}, errors.NotValidf("unit name %q", name)
		}
		if slices.Contains(todo, name) {
			continue
		}
		if _, err := a.st.Unit(m.UUID, name); err != nil {
			return params.RemoveUnitsResult{}, err
		}
		if m.Type == state.ModelTypeCAAS {
			return params.RemoveUnitsResult{}, errors.NewNotSupported(nil,
				fmt.Sprintf("unit %q is a unit of a caas application: change its scale instead", name))
		}
		todo = append(todo, name)
	}
	res, err := a.st.RemoveUnits(m.UUID, todo)
	if err != nil {
		return params.RemoveUnitsResult{}, err
	}
	return params.RemoveUnitsResult{Removed: orEmpty(res.Units), DyingMachines: orEmpty(res.DyingMachines)}, nil
}

// orEmpty is s, or an empty list for nil (lists on the wire are never
// null).
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// ScaleApplication sets the desired scale of a CAAS application (Juju's
// scale-application): the scale watcher fires, and the cluster's own
// scale reports are refused until it has applied it.
func (a *ModelAdmin) ScaleApplication(_ context.Context, args params.ScaleArgs) (params.ApplicationStatus, error) {
	m, _, err := a.app(args.Model, args.Application)
	if err != nil {
		return params.ApplicationStatus{}, err
	}
	if m.Type != state.ModelTypeCAAS {
		return params.ApplicationStatus{}, errors.NewNotSupported(nil,
			fmt.Sprintf("model %q is an iaas model: add and remove units instead of scaling", m.Name))
	}
	if args.Scale < 0 {
		return params.ApplicationStatus{}, errors.NotValidf("application scale %d", args.Scale)
	}
	if err := a.st.SetApplicationScale(m.UUID, args.Application, args.Scale); err != nil {
		return params.ApplicationStatus{}, err
	}
	return a.applicationStatus(m, args.Application)
}

// ApplicationConfig returns an application's config.
func (a *ModelAdmin) ApplicationConfig(_ context.Context, args params.ApplicationArgs) (params.ApplicationConfigInfo, error) {
	m, _, err := a.app(args.Model, args.Application)
	if err != nil {
		return params.ApplicationConfigInfo{}, err
	}
	cfg, err := a.st.ApplicationConfig(m.UUID, args.Application)
	if err != nil {
		return params.ApplicationConfigInfo{}, err
	}
	return params.ApplicationConfigInfo{Application: args.Application, Config: cfg}, nil
}

// SetApplicationConfig sets and unsets keys of an application's config in
// one commit ("trust" must be a boolean) and returns the config after it.
// A change fires the agents' config (trust hash) watchers; an update that
// changes nothing commits nothing.
func (a *ModelAdmin) SetApplicationConfig(ctx context.Context, args params.SetApplicationConfigArgs) (params.ApplicationConfigInfo, error) {
	if err := validateConfig(args.Config, args.Unset, nil); err != nil {
		return params.ApplicationConfigInfo{}, err
	}
	m, _, err := a.app(args.Model, args.Application)
	if err != nil {
		return params.ApplicationConfigInfo{}, err
	}
	if err := a.st.UpdateApplicationConfig(m.UUID, args.Application, args.Config, args.Unset); err != nil {
		return params.ApplicationConfigInfo{}, err
	}
	return a.ApplicationConfig(ctx, params.ApplicationArgs{Model: m.Name, Application: args.Application})
}

// SetApplicationTrust sets an application's "trust" config option.
func (a *ModelAdmin) SetApplicationTrust(_ context.Context, args params.SetTrustArgs) (params.ApplicationStatus, error) {
	m, _, err := a.app(args.Model, args.Application)
	if err != nil {
		return params.ApplicationStatus{}, err
	}
	if err := a.st.SetApplicationTrust(m.UUID, args.Application, args.Trust); err != nil {
		return params.ApplicationStatus{}, err
	}
	return a.applicationStatus(m, args.Application)
}

// SetApplicationConstraints replaces an application's constraints (Juju's
// syntax; "" clears them); the application watcher fires.
func (a *ModelAdmin) SetApplicationConstraints(_ context.Context, args params.SetApplicationConstraintsArgs) (params.ApplicationStatus, error) {
	m, _, err := a.app(args.Model, args.Application)
	if err != nil {
		return params.ApplicationStatus{}, err
	}
	cons, err := a.applicationConstraints(m, args.Constraints)
	if err != nil {
		return params.ApplicationStatus{}, err
	}
	if err := a.st.SetApplicationConstraints(m.UUID, args.Application, cons); err != nil {
		return params.ApplicationStatus{}, err
	}
	return a.applicationStatus(m, args.Application)
}

// MaxSpecLen bounds a pod spec.
const MaxSpecLen = 1 << 20

// MaxCharmMetadata bounds the metadata.yaml of a deploy, as MaxSpecLen a
// spec (a charm's is a few KiB).
const MaxCharmMetadata = 1 << 20

// SetPodSpec sets the pod spec (or, with Raw, the raw Kubernetes spec) of
// an alive CAAS application. The spec must be a YAML mapping; the pod
// spec watcher fires.
func (a *ModelAdmin) SetPodSpec(_ context.Context, args params.SetPodSpecArgs) (params.PodSpecResult, error) {
	m, _, err := a.app(args.Model, args.Application)
	if err != nil {
		return params.PodSpecResult{}, err
	}
	if m.Type != state.ModelTypeCAAS {
		return params.PodSpecResult{}, errors.NewNotSupported(nil,
			fmt.Sprintf("model %q is an iaas model: pod specs are for caas applications", m.Name))
	}
	what := "pod spec"
	if args.Raw {
		what = "raw k8s spec"
	}
	if err := checkSpec(what, args.Spec); err != nil {
		return params.PodSpecResult{}, err
	}
	if args.Raw {
		err = a.st.SetRawK8sSpec(m.UUID, args.Application, args.Spec)
	} else {
		err = a.st.SetPodSpec(m.UUID, args.Application, args.Spec)
	}
	if err != nil {
		return params.PodSpecResult{}, err
	}
	spec, err := a.st.K8sSpec(m.UUID, args.Application)
	if err != nil {
		return params.PodSpecResult{}, err
	}
	return params.PodSpecResult{Application: args.Application, UpgradeCounter: spec.UpgradeCounter, Raw: args.Raw}, nil
}

// checkSpec requires a spec to be one YAML mapping.
func checkSpec(what, spec string) error {
	if strings.TrimSpace(spec) == "" {
		return errors.NewNotValid(nil, what+" is empty")
	}
	if len(spec) > MaxSpecLen {
		return errors.NewNotValid(nil, fmt.Sprintf("%s is longer than %d bytes", what, MaxSpecLen))
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(spec), &doc); err != nil {
		return errors.NewNotValid(nil, fmt.Sprintf("%s is not valid YAML: %v", what, err))
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return errors.NewNotValid(nil, fmt.Sprintf("%s is not a YAML mapping", what))
	}
	if yamlDeeper(doc.Content[0], rpc.MaxValueDepth) {
		return errors.NewNotValid(nil, fmt.Sprintf("%s is nested deeper than %d mappings and sequences (limit %d)",
			what, rpc.MaxValueDepth, rpc.MaxValueDepth))
	}
	return nil
}

// yamlDeeper reports whether n nests more than limit mappings and
// sequences (n itself one of them); aliases are not followed (what they
// name was counted where it is).
func yamlDeeper(n *yaml.Node, limit int) bool {
	if n.Kind != yaml.MappingNode && n.Kind != yaml.SequenceNode {
		return false
	}
	if limit == 0 {
		return true
	}
	for _, c := range n.Content {
		if yamlDeeper(c, limit-1) {
			return true
		}
	}
	return false
}

// RemoveApplication destroys an application as Juju's remove-application
// (state's DestroyApplication, one transaction): its units are removed at
// once (no unit agents are modelled), their storage detached and kept, or
// destroyed with destroy-storage; a machine left without a principal unit
// becomes dying. A Kubernetes application is then dead: its unit
// provisioner deletes its service and pods and calls
// ClearApplicationsResources, which removes it. An IAAS application is
// removed. A dying application carries on the same way; a dead one is left
// as it is.
func (a *ModelAdmin) RemoveApplication(_ context.Context, args params.RemoveApplicationArgs) (params.RemoveApplicationResult, error) {
	m, _, err := a.app(args.Model, args.Application)
	if err != nil {
		return params.RemoveApplicationResult{}, err
	}
	res, err := a.st.DestroyApplication(m.UUID, args.Application, args.DestroyStorage)
	if err != nil {
		return params.RemoveApplicationResult{}, err
	}
	out := params.RemoveApplicationResult{Removed: res.Removed, RemovedUnits: orEmpty(res.Units),
		DyingMachines: orEmpty(res.DyingMachines), Storage: removedStorage(res.Storage)}
	st, err := a.applicationStatus(m, args.Application)
	switch {
	case errors.Is(err, errors.NotFound):
		// Removed by its unit provisioner since this call left it
		// dead: Removed still says what this call did, so the answer
		// does not depend on how fast the agent was.
		out.ApplicationStatus = params.ApplicationStatus{Name: args.Application, Life: string(state.Dead), Units: []params.UnitStatus{}}
	case err != nil:
		return params.RemoveApplicationResult{}, err
	default:
		out.ApplicationStatus = st
	}
	return out, nil
}
