// Package caasunitprovisioner serves the CAASUnitProvisioner facade,
// version 2 (specs/caasunitprovisioner.md): what the controller's unit
// provisioner of a Kubernetes model reads (applications, their scale,
// specs, trust, config, charm and provisioning info) and reports (pods as
// units with their storage, the application's service and operator
// status).
//
// Only the controller agent may use it (everyone else: permission denied,
// code "unauthorized access"), and only on a CAAS model's endpoint (an
// IAAS model: code "not supported").
package caasunitprovisioner

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/juju/errors"
	"github.com/juju/names/v5"

	"provisiond/charm"
	"provisiond/facades/facade"
	"provisiond/rpc"
	"provisiond/rpc/params"
	"provisiond/state"
	"provisiond/watcher"
)

// API is the facade instance of one call.
type API struct {
	ctx   *facade.Context
	st    *state.State
	model string
}

// Register adds CAASUnitProvisioner v2 to r.
func Register(r *facade.Registry) {
	rpc.Register(r, "CAASUnitProvisioner", 2, New, func(m *rpc.Methods[*facade.Context, *API]) {
		rpc.HandleNoArgs(m, "WatchApplications", (*API).WatchApplications)
		rpc.Handle(m, "CharmInfo", (*API).CharmInfo)
		rpc.Handle(m, "ApplicationCharmInfo", (*API).ApplicationCharmInfo)
		rpc.Handle(m, "Watch", (*API).Watch)
		rpc.Handle(m, "Life", (*API).Life)
		rpc.Handle(m, "WatchApplicationsScale", (*API).WatchApplicationsScale)
		rpc.Handle(m, "WatchPodSpec", (*API).WatchPodSpec)
		rpc.Handle(m, "ApplicationsScale", (*API).ApplicationsScale)
		rpc.Handle(m, "ApplicationsTrust", (*API).ApplicationsTrust)
		rpc.Handle(m, "WatchApplicationsTrustHash", (*API).WatchApplicationsTrustHash)
		rpc.Handle(m, "DeploymentMode", (*API).DeploymentMode)
		rpc.Handle(m, "ProvisioningInfo", (*API).ProvisioningInfo)
		rpc.Handle(m, "ApplicationsConfig", (*API).ApplicationsConfig)
		rpc.Handle(m, "UpdateApplicationsUnits", (*API).UpdateApplicationsUnits)
		rpc.Handle(m, "UpdateApplicationsService", (*API).UpdateApplicationsService)
		rpc.Handle(m, "ClearApplicationsResources", (*API).ClearApplicationsResources)
		rpc.Handle(m, "SetOperatorStatus", (*API).SetOperatorStatus)
	})
}

// New refuses everyone but the controller agent, and IAAS models.
func New(c *facade.Context) (*API, error) {
	if err := c.RequireController(); err != nil {
		return nil, err
	}
	if c.Model.Type != state.ModelTypeCAAS {
		return nil, errors.NotSupportedf("CAASUnitProvisioner on %s model %q", c.Model.Type, c.Model.Name)
	}
	return &API{ctx: c, st: c.Deps.State, model: c.Model.UUID}, nil
}

// application is the per-entity preamble: parse the tag, read the
// application.
func (a *API) application(tag string) (state.Application, error) {
	t, err := applicationTag(tag)
	if err != nil {
		return state.Application{}, err
	}
	return a.st.Application(a.model, t.Id())
}

// applicationTag parses an application tag; any failure reads
// `"<tag>" is not a valid application tag` (code "").
func applicationTag(tag string) (names.ApplicationTag, error) {
	t, err := facade.ParseApplicationTag(tag)
	if err != nil {
		return names.ApplicationTag{}, fmt.Errorf("%q is not a valid application tag", tag)
	}
	return t, nil
}

// WatchApplications watches the lifecycle of the model's applications.
func (a *API) WatchApplications(context.Context) (params.StringsWatchResult, error) {
	w, initial, err := a.st.WatchApplications(a.model)
	if err != nil {
		return params.StringsWatchResult{}, err
	}
	return a.ctx.StringsResult(w, initial)
}

// CharmInfo returns the charm with the given URL.
func (a *API) CharmInfo(_ context.Context, args params.CharmURL) (params.Charm, error) {
	ch, err := a.st.Charm(a.model, args.URL)
	if err != nil {
		return params.Charm{}, err
	}
	return charmResult(ch), nil
}

// ApplicationCharmInfo returns an application's charm.
func (a *API) ApplicationCharmInfo(_ context.Context, args params.Entity) (params.Charm, error) {
	app, err := a.application(args.Tag)
	if err != nil {
		return params.Charm{}, err
	}
	ch, err := a.st.Charm(a.model, app.CharmURL)
	if err != nil {
		return params.Charm{}, err
	}
	return charmResult(ch), nil
}

// Watch watches applications (application tags only).
func (a *API) Watch(_ context.Context, args params.Entities) (params.NotifyWatchResults, error) {
	out := params.NotifyWatchResults{Results: make([]params.NotifyWatchResult, len(args.Entities))}
	for i, e := range args.Entities {
		t, err := applicationTag(e.Tag)
		if err != nil {
			out.Results[i].Error = facade.ErrPerm
			continue
		}
		out.Results[i] = a.notify(a.st.WatchApplication(a.model, t.Id()))
	}
	return out, nil
}

func (a *API) notify(w *watcher.Notify, err error) params.NotifyWatchResult {
	if err != nil {
		return params.NotifyWatchResult{Error: facade.ServerError(err)}
	}
	res, err := a.ctx.NotifyResult(w)
	if err != nil {
		return params.NotifyWatchResult{Error: facade.ServerError(err)}
	}
	return res
}

// Life returns the life of applications and units.
func (a *API) Life(_ context.Context, args params.Entities) (params.LifeResults, error) {
	out := params.LifeResults{Results: make([]params.LifeResult, len(args.Entities))}
	for i, e := range args.Entities {
		t, err := facade.ParseTag(e.Tag)
		if err != nil {
			out.Results[i].Error = facade.ErrPerm
			continue
		}
		var life state.Life
		switch t := t.(type) {
		case names.ApplicationTag:
			var app state.Application
			app, err = a.st.Application(a.model, t.Id())
			life = app.Life
		case names.UnitTag:
			var u state.Unit
			u, err = a.st.Unit(a.model, t.Id())
			life = u.Life
		default:
			err = facade.ErrPerm
		}
		if err != nil {
			out.Results[i].Error = facade.ServerError(err)
			continue
		}
		out.Results[i].Life = string(life)
	}
	return out, nil
}

// WatchApplicationsScale watches the desired scale of applications.
func (a *API) WatchApplicationsScale(_ context.Context, args params.Entities) (params.NotifyWatchResults, error) {
	out := params.NotifyWatchResults{Results: make([]params.NotifyWatchResult, len(args.Entities))}
	for i, e := range args.Entities {
		t, err := applicationTag(e.Tag)
		if err != nil {
			out.Results[i].Error = facade.ServerError(err)
			continue
		}
		out.Results[i] = a.notify(a.st.WatchApplicationScale(a.model, t.Id()))
	}
	return out, nil
}

// WatchPodSpec watches the spec records of applications.
func (a *API) WatchPodSpec(_ context.Context, args params.Entities) (params.NotifyWatchResults, error) {
	out := params.NotifyWatchResults{Results: make([]params.NotifyWatchResult, len(args.Entities))}
	for i, e := range args.Entities {
		t, err := applicationTag(e.Tag)
		if err != nil {
			out.Results[i].Error = facade.ServerError(err)
			continue
		}
		out.Results[i] = a.notify(a.st.WatchPodSpec(a.model, t.Id()))
	}
	return out, nil
}

// ApplicationsScale returns the desired scale of applications.
func (a *API) ApplicationsScale(_ context.Context, args params.Entities) (params.IntResults, error) {
	out := params.IntResults{Results: make([]params.IntResult, len(args.Entities))}
	for i, e := range args.Entities {
		app, err := a.application(e.Tag)
		if err != nil {
			out.Results[i].Error = facade.ServerError(err)
			continue
		}
		out.Results[i].Result = app.Scale
	}
	return out, nil
}

// ApplicationsTrust returns the trust config option of applications.
func (a *API) ApplicationsTrust(_ context.Context, args params.Entities) (params.BoolResults, error) {
	out := params.BoolResults{Results: make([]params.BoolResult, len(args.Entities))}
	for i, e := range args.Entities {
		cfg, err := a.config(e.Tag)
		if err != nil {
			out.Results[i].Error = facade.ServerError(err)
			continue
		}
		out.Results[i].Result, _ = cfg["trust"].(bool)
	}
	return out, nil
}

func (a *API) config(tag string) (map[string]any, error) {
	app, err := a.application(tag)
	if err != nil {
		return nil, err
	}
	return a.st.ApplicationConfig(a.model, app.Name)
}

// WatchApplicationsTrustHash watches the hash of applications' config;
// the initial hash is consumed, not returned.
func (a *API) WatchApplicationsTrustHash(_ context.Context, args params.Entities) (params.StringsWatchResults, error) {
	out := params.StringsWatchResults{Results: make([]params.StringsWatchResult, len(args.Entities))}
	for i, e := range args.Entities {
		app, err := a.application(e.Tag)
		if err != nil {
			out.Results[i].Error = facade.ServerError(err)
			continue
		}
		w, _, err := a.st.WatchApplicationTrustHash(a.model, app.Name)
		if err != nil {
			out.Results[i].Error = facade.ServerError(err)
			continue
		}
		res, err := a.ctx.StringsResult(w, nil)
		if err != nil {
			out.Results[i].Error = facade.ServerError(err)
			continue
		}
		out.Results[i] = res
	}
	return out, nil
}

// DeploymentMode returns the charm deployment mode of applications.
func (a *API) DeploymentMode(_ context.Context, args params.Entities) (params.StringResults, error) {
	out := params.StringResults{Results: make([]params.StringResult, len(args.Entities))}
	for i, e := range args.Entities {
		app, err := a.application(e.Tag)
		if err == nil {
			var ch state.Charm
			if ch, err = a.st.Charm(a.model, app.CharmURL); err == nil {
				out.Results[i].Result = ch.Meta.DeploymentMode()
			}
		}
		out.Results[i].Error = facade.ServerError(err)
	}
	return out, nil
}

// ApplicationsConfig returns the config settings of applications.
func (a *API) ApplicationsConfig(_ context.Context, args params.Entities) (params.ApplicationGetConfigResults, error) {
	out := params.ApplicationGetConfigResults{Results: make([]params.ConfigResult, len(args.Entities))}
	for i, e := range args.Entities {
		cfg, err := a.config(e.Tag)
		out.Results[i] = params.ConfigResult{Config: cfg, Error: facade.ServerError(err)}
	}
	return out, nil
}

// ClearApplicationsResources clears the resources flag of applications
// that are no longer alive.
func (a *API) ClearApplicationsResources(ctx context.Context, args params.Entities) (params.ErrorResults, error) {
	return facade.BulkErrors(ctx, args, func(_ context.Context, tag string) error {
		app, err := a.application(tag)
		if err != nil {
			return err
		}
		return a.st.ClearApplicationResources(a.model, app.Name)
	}), nil
}

// SetOperatorStatus sets the operator status of applications.
func (a *API) SetOperatorStatus(_ context.Context, args params.SetStatus) (params.ErrorResults, error) {
	out := params.ErrorResults{Results: make([]params.ErrorResult, len(args.Entities))}
	for i, e := range args.Entities {
		app, err := a.application(e.Tag)
		if err == nil {
			err = a.st.SetOperatorStatus(a.model, app.Name, state.Status{Status: e.Status, Message: e.Info, Data: e.Data})
		}
		out.Results[i].Error = facade.ServerError(err)
	}
	return out, nil
}

// UpdateApplicationsService records applications' Kubernetes services.
func (a *API) UpdateApplicationsService(_ context.Context, args params.UpdateApplicationServiceArgs) (params.ErrorResults, error) {
	out := params.ErrorResults{Results: make([]params.ErrorResult, len(args.Args))}
	for i, arg := range args.Args {
		app, err := a.application(arg.ApplicationTag)
		if err != nil {
			out.Results[i].Error = facade.ServerError(err)
			continue
		}
		addrs, err := a.addresses(arg.Addresses)
		if err != nil {
			out.Results[i].Error = facade.ServerError(err)
			continue
		}
		if err := a.st.UpdateCloudService(a.model, app.Name, arg.ProviderId, addrs); err != nil {
			out.Results[i].Error = facade.ServerError(err)
		}
		if arg.Scale != nil {
			var gen int64
			if arg.Generation != nil {
				gen = *arg.Generation
			}
			if err := a.st.SetScale(a.model, app.Name, *arg.Scale, gen, false); err != nil {
				out.Results[i].Error = facade.ServerError(err)
			}
		}
	}
	return out, nil
}

func (a *API) addresses(in []params.Address) ([]state.Address, error) {
	out := make([]state.Address, 0, len(in))
	for _, ad := range in {
		if ad.SpaceName != "" {
			if _, err := a.st.Space(a.model, ad.SpaceName); err != nil {
				if errors.Is(err, errors.NotFound) {
					return nil, errors.NotFoundf("space with name %q", ad.SpaceName)
				}
				return nil, err
			}
		}
		out = append(out, state.Address{Value: ad.Value, Type: ad.Type, Scope: ad.Scope, CIDR: ad.CIDR, SpaceName: ad.SpaceName})
	}
	return out, nil
}

func charmResult(ch state.Charm) params.Charm {
	out := params.Charm{Revision: ch.Revision, URL: ch.URL, Config: map[string]params.CharmOption{}}
	for k, o := range ch.Config {
		out.Config[k] = params.CharmOption{Type: o.Type, Description: o.Description, Default: o.Default}
	}
	if m := ch.Meta; m != nil {
		pm := &params.CharmMeta{Name: m.Name, Summary: m.Summary, Description: m.Description,
			Subordinate: m.Subordinate, ExtraBindings: m.ExtraBindings, Categories: m.Categories,
			Tags: m.Tags, Series: m.Series, Terms: m.Terms, MinJujuVersion: m.MinJujuVersion}
		rel := func(in map[string]charm.Relation) map[string]params.CharmRelation {
			if len(in) == 0 {
				return nil
			}
			out := map[string]params.CharmRelation{}
			for k, r := range in {
				out[k] = params.CharmRelation(r)
			}
			return out
		}
		pm.Provides, pm.Requires, pm.Peers = rel(m.Provides), rel(m.Requires), rel(m.Peers)
		if len(m.Storage) > 0 {
			pm.Storage = map[string]params.CharmStorage{}
			for k, s := range m.Storage {
				pm.Storage[k] = params.CharmStorage(s)
			}
		}
		if d := m.Deployment; d != nil {
			pm.Deployment = &params.CharmDeployment{DeploymentType: d.Type, DeploymentMode: d.Mode,
				ServiceType: d.Service, MinVersion: d.MinVersion}
		}
		if len(m.Devices) > 0 {
			pm.Devices = map[string]params.CharmDevice{}
			for k, d := range m.Devices {
				pm.Devices[k] = params.CharmDevice(d)
			}
		}
		if len(m.PayloadClasses) > 0 {
			pm.PayloadClasses = map[string]params.CharmPayloadClass{}
			for k, p := range m.PayloadClasses {
				pm.PayloadClasses[k] = params.CharmPayloadClass(p)
			}
		}
		if len(m.Resources) > 0 {
			pm.Resources = map[string]params.CharmResourceMeta{}
			for k, r := range m.Resources {
				pm.Resources[k] = params.CharmResourceMeta(r)
			}
		}
		if len(m.Containers) > 0 {
			pm.Containers = map[string]params.CharmContainer{}
			for k, c := range m.Containers {
				pc := params.CharmContainer{Resource: c.Resource}
				for _, mt := range c.Mounts {
					pc.Mounts = append(pc.Mounts, params.CharmMount(mt))
				}
				pm.Containers[k] = pc
			}
		}
		out.Meta = pm
	}
	if len(ch.Actions) > 0 {
		out.Actions = &params.CharmActions{ActionSpecs: map[string]params.CharmActionSpec{}}
		for k, s := range ch.Actions {
			out.Actions.ActionSpecs[k] = params.CharmActionSpec{Description: s.Description, Params: s.Params}
		}
	}
	if len(ch.Bases) > 0 {
		out.Manifest = &params.CharmManifest{}
		for _, b := range ch.Bases {
			out.Manifest.Bases = append(out.Manifest.Bases, params.CharmBase(b))
		}
	}
	if p := ch.LXDProfile; p != nil && (len(p.Config) > 0 || len(p.Devices) > 0 || p.Description != "") {
		out.LXDProfile = &params.CharmLXDProfile{Config: p.Config, Description: p.Description, Devices: p.Devices}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
