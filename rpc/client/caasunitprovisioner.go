package client

import (
	"context"

	"github.com/provisiond/provisiond/rpc/params"
)

// CAASUnitProvisioner facade name and the version the typed client speaks.
const (
	CAASUnitProvisionerFacade  = "CAASUnitProvisioner"
	CAASUnitProvisionerVersion = 2
)

// CAASUnitProvisioner is the typed client of the CAASUnitProvisioner
// facade, version 2: what the unit provisioner of a Kubernetes model reads
// (applications, scale, specs, trust, config, charms, provisioning info)
// and reports (pods as units, services, operator status). One method per
// method of the facade's schema, with the wire types of package params;
// bulk results keep their per-item errors, as for Provisioner.
// Application(name) gives the one-application view.
//
// Only the controller agent may call it, on a CAAS model's endpoint
// (others: ErrUnauthorized; an IAAS model: ErrNotSupported). It is safe
// for concurrent use, as its Conn.
type CAASUnitProvisioner struct {
	f facade
}

// NewCAASUnitProvisioner returns the CAASUnitProvisioner client of c,
// logged in as the controller agent on a CAAS model.
func NewCAASUnitProvisioner(c *Conn) *CAASUnitProvisioner {
	return &CAASUnitProvisioner{f: facade{c, CAASUnitProvisionerFacade, CAASUnitProvisionerVersion}}
}

// Conn returns the connection u calls on.
func (u *CAASUnitProvisioner) Conn() *Conn { return u.f.c }

// ApplicationCharmInfo returns an application's charm.
func (u *CAASUnitProvisioner) ApplicationCharmInfo(ctx context.Context, args params.Entity) (params.Charm, error) {
	return call[params.Charm](ctx, u.f, "ApplicationCharmInfo", args)
}

// ApplicationsConfig returns each application's config.
func (u *CAASUnitProvisioner) ApplicationsConfig(ctx context.Context, args params.Entities) (params.ApplicationGetConfigResults, error) {
	return bulk[params.ApplicationGetConfigResults](ctx, u.f, "ApplicationsConfig", args, len(args.Entities))
}

// ApplicationsScale returns each application's desired number of units.
func (u *CAASUnitProvisioner) ApplicationsScale(ctx context.Context, args params.Entities) (params.IntResults, error) {
	return bulk[params.IntResults](ctx, u.f, "ApplicationsScale", args, len(args.Entities))
}

// ApplicationsTrust reports whether each application is trusted.
func (u *CAASUnitProvisioner) ApplicationsTrust(ctx context.Context, args params.Entities) (params.BoolResults, error) {
	return bulk[params.BoolResults](ctx, u.f, "ApplicationsTrust", args, len(args.Entities))
}

// CharmInfo returns the charm with a URL.
func (u *CAASUnitProvisioner) CharmInfo(ctx context.Context, args params.CharmURL) (params.Charm, error) {
	return call[params.Charm](ctx, u.f, "CharmInfo", args)
}

// ClearApplicationsResources clears the resources each application's
// operator recorded.
func (u *CAASUnitProvisioner) ClearApplicationsResources(ctx context.Context, args params.Entities) (params.ErrorResults, error) {
	return bulk[params.ErrorResults](ctx, u.f, "ClearApplicationsResources", args, len(args.Entities))
}

// DeploymentMode returns each application's deployment mode.
func (u *CAASUnitProvisioner) DeploymentMode(ctx context.Context, args params.Entities) (params.StringResults, error) {
	return bulk[params.StringResults](ctx, u.f, "DeploymentMode", args, len(args.Entities))
}

// Life returns each application's or unit's life.
func (u *CAASUnitProvisioner) Life(ctx context.Context, args params.Entities) (params.LifeResults, error) {
	return bulk[params.LifeResults](ctx, u.f, "Life", args, len(args.Entities))
}

// ProvisioningInfo returns what running each application's pods needs.
func (u *CAASUnitProvisioner) ProvisioningInfo(ctx context.Context, args params.Entities) (params.KubernetesProvisioningInfoResults, error) {
	return bulk[params.KubernetesProvisioningInfoResults](ctx, u.f, "ProvisioningInfo", args, len(args.Entities))
}

// SetOperatorStatus sets the status of each application's operator.
func (u *CAASUnitProvisioner) SetOperatorStatus(ctx context.Context, args params.SetStatus) (params.ErrorResults, error) {
	return bulk[params.ErrorResults](ctx, u.f, "SetOperatorStatus", args, len(args.Entities))
}

// UpdateApplicationsService records each application's service (provider
// id, addresses, scale).
func (u *CAASUnitProvisioner) UpdateApplicationsService(ctx context.Context, args params.UpdateApplicationServiceArgs) (params.ErrorResults, error) {
	return bulk[params.ErrorResults](ctx, u.f, "UpdateApplicationsService", args, len(args.Args))
}

// UpdateApplicationsUnits reports each application's pods: the daemon
// makes, updates and removes units to match, with their storage.
func (u *CAASUnitProvisioner) UpdateApplicationsUnits(ctx context.Context, args params.UpdateApplicationUnitArgs) (params.UpdateApplicationUnitResults, error) {
	return bulk[params.UpdateApplicationUnitResults](ctx, u.f, "UpdateApplicationsUnits", args, len(args.Args))
}

// Watch watches each application (its record: life, charm, config).
func (u *CAASUnitProvisioner) Watch(ctx context.Context, args params.Entities) (params.NotifyWatchResults, error) {
	return bulk[params.NotifyWatchResults](ctx, u.f, "Watch", args, len(args.Entities))
}

// WatchApplications watches the model's applications; the first value
// lists them all.
func (u *CAASUnitProvisioner) WatchApplications(ctx context.Context) (*StringsWatch, error) {
	res, err := call[params.StringsWatchResult](ctx, u.f, "WatchApplications", nil)
	if err != nil {
		return nil, err
	}
	return NewStringsWatch(u.f.c, res)
}

// WatchApplicationsScale watches each application's scale.
func (u *CAASUnitProvisioner) WatchApplicationsScale(ctx context.Context, args params.Entities) (params.NotifyWatchResults, error) {
	return bulk[params.NotifyWatchResults](ctx, u.f, "WatchApplicationsScale", args, len(args.Entities))
}

// WatchApplicationsTrustHash watches each application's trust; each
// value is a hash of it.
func (u *CAASUnitProvisioner) WatchApplicationsTrustHash(ctx context.Context, args params.Entities) (params.StringsWatchResults, error) {
	return bulk[params.StringsWatchResults](ctx, u.f, "WatchApplicationsTrustHash", args, len(args.Entities))
}

// WatchPodSpec watches each application's pod spec.
func (u *CAASUnitProvisioner) WatchPodSpec(ctx context.Context, args params.Entities) (params.NotifyWatchResults, error) {
	return bulk[params.NotifyWatchResults](ctx, u.f, "WatchPodSpec", args, len(args.Entities))
}

// Application is one CAAS application as the unit provisioner sees it:
// each method is the one-item call of the CAASUnitProvisioner method
// named in its doc, and returns the item's error as its error. It makes no
// call until a method is called.
type Application struct {
	u    *CAASUnitProvisioner
	name string
}

// Application returns the view of the application called name.
func (u *CAASUnitProvisioner) Application(name string) *Application {
	return &Application{u: u, name: name}
}

// Name returns the application's name.
func (a *Application) Name() string { return a.name }

// Tag returns the application's tag.
func (a *Application) Tag() string { return ApplicationTag(a.name) }

func (a *Application) ents() params.Entities { return Entities(a.Tag()) }

// Life returns the application's life (Life).
func (a *Application) Life(ctx context.Context) (string, error) {
	res, err := a.u.Life(ctx, a.ents())
	if err != nil {
		return "", err
	}
	return res.Results[0].Life, itemErr(res.Results[0].Error)
}

// Scale returns the application's desired number of units
// (ApplicationsScale).
func (a *Application) Scale(ctx context.Context) (int, error) {
	res, err := a.u.ApplicationsScale(ctx, a.ents())
	if err != nil {
		return 0, err
	}
	return res.Results[0].Result, itemErr(res.Results[0].Error)
}

// Trust reports whether the application is trusted (ApplicationsTrust).
func (a *Application) Trust(ctx context.Context) (bool, error) {
	res, err := a.u.ApplicationsTrust(ctx, a.ents())
	if err != nil {
		return false, err
	}
	return res.Results[0].Result, itemErr(res.Results[0].Error)
}

// DeploymentMode returns the application's deployment mode
// (DeploymentMode).
func (a *Application) DeploymentMode(ctx context.Context) (string, error) {
	res, err := a.u.DeploymentMode(ctx, a.ents())
	if err != nil {
		return "", err
	}
	return res.Results[0].Result, itemErr(res.Results[0].Error)
}

// Config returns the application's config (ApplicationsConfig).
func (a *Application) Config(ctx context.Context) (map[string]any, error) {
	res, err := a.u.ApplicationsConfig(ctx, a.ents())
	if err != nil {
		return nil, err
	}
	return res.Results[0].Config, itemErr(res.Results[0].Error)
}

// ProvisioningInfo returns what running the application's pods needs
// (ProvisioningInfo).
func (a *Application) ProvisioningInfo(ctx context.Context) (*params.KubernetesProvisioningInfo, error) {
	res, err := a.u.ProvisioningInfo(ctx, a.ents())
	if err != nil {
		return nil, err
	}
	if err := itemErr(res.Results[0].Error); err != nil {
		return nil, err
	}
	return res.Results[0].Result, nil
}

// CharmInfo returns the application's charm (ApplicationCharmInfo).
func (a *Application) CharmInfo(ctx context.Context) (params.Charm, error) {
	return a.u.ApplicationCharmInfo(ctx, params.Entity{Tag: a.Tag()})
}

// UpdateUnits reports the application's pods (UpdateApplicationsUnits);
// args.ApplicationTag is set to the application's. It returns the units
// the pods became.
func (a *Application) UpdateUnits(ctx context.Context, args params.UpdateApplicationUnits) (*params.UpdateApplicationUnitsInfo, error) {
	args.ApplicationTag = a.Tag()
	res, err := a.u.UpdateApplicationsUnits(ctx, params.UpdateApplicationUnitArgs{Args: []params.UpdateApplicationUnits{args}})
	if err != nil {
		return nil, err
	}
	return res.Results[0].Info, itemErr(res.Results[0].Error)
}

// UpdateService records the application's service
// (UpdateApplicationsService); args.ApplicationTag is set to the
// application's.
func (a *Application) UpdateService(ctx context.Context, args params.UpdateApplicationServiceArg) error {
	args.ApplicationTag = a.Tag()
	return oneErr(a.u.UpdateApplicationsService(ctx, params.UpdateApplicationServiceArgs{Args: []params.UpdateApplicationServiceArg{args}}))
}

// ClearResources clears the resources the application's operator recorded
// (ClearApplicationsResources).
func (a *Application) ClearResources(ctx context.Context) error {
	return oneErr(a.u.ClearApplicationsResources(ctx, a.ents()))
}

// SetOperatorStatus sets the status of the application's operator
// (SetOperatorStatus).
func (a *Application) SetOperatorStatus(ctx context.Context, status, info string, data map[string]any) error {
	return oneErr(a.u.SetOperatorStatus(ctx, params.SetStatus{Entities: []params.EntityStatusArgs{
		{Tag: a.Tag(), Status: status, Info: info, Data: data}}}))
}

// Watch watches the application's record (Watch).
func (a *Application) Watch(ctx context.Context) (*NotifyWatch, error) {
	return a.notify(a.u.Watch(ctx, a.ents()))
}

// WatchScale watches the application's scale (WatchApplicationsScale).
func (a *Application) WatchScale(ctx context.Context) (*NotifyWatch, error) {
	return a.notify(a.u.WatchApplicationsScale(ctx, a.ents()))
}

// WatchPodSpec watches the application's pod spec (WatchPodSpec).
func (a *Application) WatchPodSpec(ctx context.Context) (*NotifyWatch, error) {
	return a.notify(a.u.WatchPodSpec(ctx, a.ents()))
}

// WatchTrustHash watches the application's trust
// (WatchApplicationsTrustHash).
func (a *Application) WatchTrustHash(ctx context.Context) (*StringsWatch, error) {
	res, err := a.u.WatchApplicationsTrustHash(ctx, a.ents())
	if err != nil {
		return nil, err
	}
	return NewStringsWatch(a.u.f.c, res.Results[0])
}

func (a *Application) notify(res params.NotifyWatchResults, err error) (*NotifyWatch, error) {
	if err != nil {
		return nil, err
	}
	return NewNotifyWatch(a.u.f.c, res.Results[0])
}
