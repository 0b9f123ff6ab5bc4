package client

import (
	"context"

	"github.com/provisiond/provisiond/rpc/params"
)

// ModelAdmin facade name and the version the typed client speaks.
const (
	ModelAdminFacade  = "ModelAdmin"
	ModelAdminVersion = 1
)

// ModelAdmin is the typed client of ModelAdmin v1, provisiond's own
// operator facade (what provisionctl calls): models, config, machines,
// network, agent binaries, applications and units, storage pools, status
// and a model's change feed. One method per method of the facade, with the
// wire types of package params.
//
// Models are named by name in the arguments (Model fields): an empty name
// is the connection's model on a model endpoint, and "default" on the
// controller endpoint (/api). Only controller superusers may call it
// (others: ErrUnauthorized). What operators type (bases, constraints,
// placements, storage, ranges, charm metadata) is sent as text and parsed
// by the daemon; bad input is ErrNotValid and changes nothing. It is safe
// for concurrent use, as its Conn.
type ModelAdmin struct {
	f facade
}

// NewModelAdmin returns the ModelAdmin client of c, logged in as a
// controller superuser (the admin user of credentials.yaml).
func NewModelAdmin(c *Conn) *ModelAdmin {
	return &ModelAdmin{f: facade{c, ModelAdminFacade, ModelAdminVersion}}
}

// Conn returns the connection a calls on.
func (a *ModelAdmin) Conn() *Conn { return a.f.c }

// AddAgentBinaries adds one entry to the controller's agent binaries catalog (a version already there is refused).
func (a *ModelAdmin) AddAgentBinaries(ctx context.Context, args params.AddAgentBinariesArgs) (params.AgentBinaryInfo, error) {
	return call[params.AgentBinaryInfo](ctx, a.f, "AddAgentBinaries", args)
}

// AddMachines adds machines or containers to an IAAS model and returns their ids.
func (a *ModelAdmin) AddMachines(ctx context.Context, args params.AddMachinesArgs) (params.AddMachinesResult, error) {
	return call[params.AddMachinesResult](ctx, a.f, "AddMachines", args)
}

// AddModel adds a model (iaas by default).
func (a *ModelAdmin) AddModel(ctx context.Context, args params.AddModelArgs) (params.ModelSummary, error) {
	return call[params.ModelSummary](ctx, a.f, "AddModel", args)
}

// AddSpace adds a space to a model.
func (a *ModelAdmin) AddSpace(ctx context.Context, args params.AddSpaceArgs) (params.SpaceInfo, error) {
	return call[params.SpaceInfo](ctx, a.f, "AddSpace", args)
}

// AddSubnet adds a subnet to a model.
func (a *ModelAdmin) AddSubnet(ctx context.Context, args params.AddSubnetArgs) (params.SubnetInfo, error) {
	return call[params.SubnetInfo](ctx, a.f, "AddSubnet", args)
}

// AddUnits adds units to an IAAS application, on the machines given or on new ones.
func (a *ModelAdmin) AddUnits(ctx context.Context, args params.AddUnitsArgs) (params.AddUnitsResult, error) {
	return call[params.AddUnitsResult](ctx, a.f, "AddUnits", args)
}

// AgentBinaries lists the agent binaries catalog, by version.
func (a *ModelAdmin) AgentBinaries(ctx context.Context) (params.AgentBinariesResult, error) {
	return call[params.AgentBinariesResult](ctx, a.f, "AgentBinaries", nil)
}

// Application reports one application as Status does.
func (a *ModelAdmin) Application(ctx context.Context, args params.ApplicationArgs) (params.ApplicationStatus, error) {
	return call[params.ApplicationStatus](ctx, a.f, "Application", args)
}

// ApplicationConfig returns an application's config.
func (a *ModelAdmin) ApplicationConfig(ctx context.Context, args params.ApplicationArgs) (params.ApplicationConfigInfo, error) {
	return call[params.ApplicationConfigInfo](ctx, a.f, "ApplicationConfig", args)
}

// ControllerConfig returns the controller config.
func (a *ModelAdmin) ControllerConfig(ctx context.Context) (params.ControllerConfigResult, error) {
	return call[params.ControllerConfigResult](ctx, a.f, "ControllerConfig", nil)
}

// CreateStoragePool creates a storage pool in a model.
func (a *ModelAdmin) CreateStoragePool(ctx context.Context, args params.CreateStoragePoolArgs) (params.StoragePoolInfo, error) {
	return call[params.StoragePoolInfo](ctx, a.f, "CreateStoragePool", args)
}

// Deploy deploys an application from a charm's metadata.yaml text (CAAS: at args.Scale, default 1; IAAS: without units).
func (a *ModelAdmin) Deploy(ctx context.Context, args params.DeployArgs) (params.ApplicationStatus, error) {
	return call[params.ApplicationStatus](ctx, a.f, "Deploy", args)
}

// ListModels lists every model, by name.
func (a *ModelAdmin) ListModels(ctx context.Context) (params.ListModelsResult, error) {
	return call[params.ListModelsResult](ctx, a.f, "ListModels", nil)
}

// ModelConfig returns a model's stored config.
func (a *ModelAdmin) ModelConfig(ctx context.Context, args params.ModelArgs) (params.ModelConfigInfo, error) {
	return call[params.ModelConfigInfo](ctx, a.f, "ModelConfig", args)
}

// RemoveApplication destroys an application: its units go at once, and it
// is removed (IAAS) or dead until its cluster resources are cleared (CAAS).
func (a *ModelAdmin) RemoveApplication(ctx context.Context, args params.RemoveApplicationArgs) (params.RemoveApplicationResult, error) {
	return call[params.RemoveApplicationResult](ctx, a.f, "RemoveApplication", args)
}

// RemoveMachines makes machines dying (with Force, their containers and units too).
func (a *ModelAdmin) RemoveMachines(ctx context.Context, args params.RemoveMachinesArgs) (params.RemoveMachinesResult, error) {
	return call[params.RemoveMachinesResult](ctx, a.f, "RemoveMachines", args)
}

// RemoveModel makes a model dying, its storage destroyed or released as told; it is removed with its last entity (at once when empty).
func (a *ModelAdmin) RemoveModel(ctx context.Context, args params.RemoveModelArgs) (params.RemoveModelResult, error) {
	return call[params.RemoveModelResult](ctx, a.f, "RemoveModel", args)
}

// RemoveStorage takes storage instances out of a model, destroyed or released.
func (a *ModelAdmin) RemoveStorage(ctx context.Context, args params.RemoveStorageArgs) (params.RemoveStorageResult, error) {
	return call[params.RemoveStorageResult](ctx, a.f, "RemoveStorage", args)
}

// DetachStorage detaches storage instances from their units.
func (a *ModelAdmin) DetachStorage(ctx context.Context, args params.DetachStorageArgs) (params.DetachStorageResult, error) {
	return call[params.DetachStorageResult](ctx, a.f, "DetachStorage", args)
}

// RemoveStoragePool removes a storage pool that nothing uses.
func (a *ModelAdmin) RemoveStoragePool(ctx context.Context, args params.RemoveStoragePoolArgs) (params.StoragePoolInfo, error) {
	return call[params.StoragePoolInfo](ctx, a.f, "RemoveStoragePool", args)
}

// RemoveUnits removes IAAS units at once (their machines, left without a unit, become dying).
func (a *ModelAdmin) RemoveUnits(ctx context.Context, args params.RemoveUnitsArgs) (params.RemoveUnitsResult, error) {
	return call[params.RemoveUnitsResult](ctx, a.f, "RemoveUnits", args)
}

// ScaleApplication sets the desired scale of a CAAS application.
func (a *ModelAdmin) ScaleApplication(ctx context.Context, args params.ScaleArgs) (params.ApplicationStatus, error) {
	return call[params.ApplicationStatus](ctx, a.f, "ScaleApplication", args)
}

// SetApplicationConfig sets and unsets keys of an application's config in one commit.
func (a *ModelAdmin) SetApplicationConfig(ctx context.Context, args params.SetApplicationConfigArgs) (params.ApplicationConfigInfo, error) {
	return call[params.ApplicationConfigInfo](ctx, a.f, "SetApplicationConfig", args)
}

// SetApplicationConstraints replaces an application's constraints ("" clears them).
func (a *ModelAdmin) SetApplicationConstraints(ctx context.Context, args params.SetApplicationConstraintsArgs) (params.ApplicationStatus, error) {
	return call[params.ApplicationStatus](ctx, a.f, "SetApplicationConstraints", args)
}

// SetApplicationTrust sets an application's trust.
func (a *ModelAdmin) SetApplicationTrust(ctx context.Context, args params.SetTrustArgs) (params.ApplicationStatus, error) {
	return call[params.ApplicationStatus](ctx, a.f, "SetApplicationTrust", args)
}

// SetControllerConfig sets and unsets keys of the controller config in one commit.
func (a *ModelAdmin) SetControllerConfig(ctx context.Context, args params.SetControllerConfigArgs) (params.ControllerConfigResult, error) {
	return call[params.ControllerConfigResult](ctx, a.f, "SetControllerConfig", args)
}

// SetModelConfig sets and unsets keys of a model's config in one commit.
func (a *ModelAdmin) SetModelConfig(ctx context.Context, args params.SetModelConfigArgs) (params.ModelConfigInfo, error) {
	return call[params.ModelConfigInfo](ctx, a.f, "SetModelConfig", args)
}

// SetPodSpec sets the pod spec (or the raw Kubernetes spec) of a CAAS application.
func (a *ModelAdmin) SetPodSpec(ctx context.Context, args params.SetPodSpecArgs) (params.PodSpecResult, error) {
	return call[params.PodSpecResult](ctx, a.f, "SetPodSpec", args)
}

// Spaces lists a model's spaces with their subnets.
func (a *ModelAdmin) Spaces(ctx context.Context, args params.ModelArgs) (params.SpacesResult, error) {
	return call[params.SpacesResult](ctx, a.f, "Spaces", args)
}

// Status reports a model: machines, network, applications and units, storage.
func (a *ModelAdmin) Status(ctx context.Context, args params.ModelArgs) (params.ModelStatus, error) {
	return call[params.ModelStatus](ctx, a.f, "Status", args)
}

// StoragePools lists a model's storage pools.
func (a *ModelAdmin) StoragePools(ctx context.Context, args params.ModelArgs) (params.StoragePoolsResult, error) {
	return call[params.StoragePoolsResult](ctx, a.f, "StoragePools", args)
}

// Subnets lists a model's subnets and the addresses in use in them.
func (a *ModelAdmin) Subnets(ctx context.Context, args params.ModelArgs) (params.SubnetsResult, error) {
	return call[params.SubnetsResult](ctx, a.f, "Subnets", args)
}

// WatchModelFrom is WatchModel resumed after revision from
// (Conn.CallFrom): the first value lists what changed after it (nothing
// when from is 0), and the watch's Revision says up to which revision the
// values received cover every change. ErrWatcherReset: the history after
// from is no longer kept.
func (a *ModelAdmin) WatchModelFrom(ctx context.Context, args params.ModelArgs, from uint64) (*StringsWatch, error) {
	var res params.StringsWatchResult
	rev, err := a.f.c.CallFrom(ctx, a.f.name, a.f.version, "", "WatchModel", from, args, &res)
	if err != nil {
		return nil, err
	}
	return NewStringsWatchFrom(a.f.c, res, rev)
}

// WatchModel watches everything that changes in a model: each value lists
// "<kind>/<id>" of the changed entities ("machine/0/lxd/1",
// "model/<uuid>"). It is a feed, not a set: the first value is empty.
func (a *ModelAdmin) WatchModel(ctx context.Context, args params.ModelArgs) (*StringsWatch, error) {
	res, err := call[params.StringsWatchResult](ctx, a.f, "WatchModel", args)
	if err != nil {
		return nil, err
	}
	return NewStringsWatch(a.f.c, res)
}

// WatchModels watches the controller's models: the first value lists every
// model's UUID, later ones the models added, made dying or removed.
func (a *ModelAdmin) WatchModels(ctx context.Context) (*StringsWatch, error) {
	res, err := call[params.StringsWatchResult](ctx, a.f, "WatchModels", nil)
	if err != nil {
		return nil, err
	}
	return NewStringsWatch(a.f.c, res)
}

// ControllerInfo describes the controller: UUIDs, API addresses, build and
// API version, models and store.
func (a *ModelAdmin) ControllerInfo(ctx context.Context) (params.ControllerInfo, error) {
	return call[params.ControllerInfo](ctx, a.f, "ControllerInfo", nil)
}

// ModelEntities returns the current stored fields of a model's entities,
// named "<kind>/<id>" as WatchModel reports them (what provisionctl watch
// prints); one that no longer exists is reported removed.
func (a *ModelAdmin) ModelEntities(ctx context.Context, args params.ModelEntitiesArgs) (params.ModelEntitiesResult, error) {
	return call[params.ModelEntitiesResult](ctx, a.f, "ModelEntities", args)
}

// StatusAt reports a model as it was at a past revision or time.
func (a *ModelAdmin) StatusAt(ctx context.Context, args params.StatusAtArgs) (params.StatusAtResult, error) {
	return call[params.StatusAtResult](ctx, a.f, "StatusAt", args)
}

// History returns a page of the history of commits: the changes args
// selects, in revision order, each with when and by whom it was made (what
// provisionctl history prints). More: call again with After set to Next.
func (a *ModelAdmin) History(ctx context.Context, args params.HistoryArgs) (params.HistoryResult, error) {
	return call[params.HistoryResult](ctx, a.f, "History", args)
}

// RemoveSpace removes a space no subnet, constraint or binding uses.
func (a *ModelAdmin) RemoveSpace(ctx context.Context, args params.RemoveSpaceArgs) (params.SpaceInfo, error) {
	return call[params.SpaceInfo](ctx, a.f, "RemoveSpace", args)
}

// RemoveSubnet removes a subnet with no address in use.
func (a *ModelAdmin) RemoveSubnet(ctx context.Context, args params.RemoveSubnetArgs) (params.SubnetInfo, error) {
	return call[params.SubnetInfo](ctx, a.f, "RemoveSubnet", args)
}

// RemoveAgentBinaries removes a version from the agent binaries catalog.
func (a *ModelAdmin) RemoveAgentBinaries(ctx context.Context, args params.RemoveAgentBinariesArgs) (params.AgentBinaryInfo, error) {
	return call[params.AgentBinaryInfo](ctx, a.f, "RemoveAgentBinaries", args)
}
