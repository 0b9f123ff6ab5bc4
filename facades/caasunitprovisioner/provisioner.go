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

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/environ"
	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/watcher"
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
func (a *API) application(ctx context.Context, tag string) (state.Application, error) {
	t, err := applicationTag(tag)
	if err != nil {
		return state.Application{}, err
	}
	return a.st.Application(ctx, a.model, t.Id())
}

// applicationTag parses an application tag; any failure reads
// `"<tag>" is not a valid application tag` (code "").
func applicationTag(tag string) (names.ApplicationTag, error) {
	t, err := facade.ParseApplicationTag(tag)
	if err != nil {
		return names.ApplicationTag{}, facade.ClientError(fmt.Errorf("%s is not a valid application tag", facade.QuoteTag(tag)))
	}
	return t, nil
}

// WatchApplications watches the lifecycle of the model's applications.
func (a *API) WatchApplications(ctx context.Context) (params.StringsWatchResult, error) {
	w, initial, err := a.st.WatchApplications(ctx, a.model)
	if err != nil {
		return params.StringsWatchResult{}, err
	}
	return a.ctx.StringsResult(w, initial)
}

// CharmInfo returns the charm with the given URL.
func (a *API) CharmInfo(ctx context.Context, args params.CharmURL) (params.Charm, error) {
	ch, err := a.st.Charm(ctx, a.model, args.URL)
	if err != nil {
		return params.Charm{}, err
	}
	return charmResult(ch), nil
}

// ApplicationCharmInfo returns an application's charm.
func (a *API) ApplicationCharmInfo(ctx context.Context, args params.Entity) (params.Charm, error) {
	app, err := a.application(ctx, args.Tag)
	if err != nil {
		return params.Charm{}, err
	}
	ch, err := a.st.Charm(ctx, a.model, app.CharmURL)
	if err != nil {
		return params.Charm{}, err
	}
	return charmResult(ch), nil
}

// Watch watches applications (application tags only).
func (a *API) Watch(ctx context.Context, args params.Entities) (params.NotifyWatchResults, error) {
	return params.NotifyWatchResults{Results: facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.NotifyWatchResult, error) {
		t, err := applicationTag(e.Tag)
		if err != nil {
			return params.NotifyWatchResult{}, facade.ErrPerm
		}
		return a.notify(a.st.WatchApplication(ctx, a.model, t.Id()))
	})}, nil
}

func (a *API) notify(w *watcher.Notify, err error) (params.NotifyWatchResult, error) {
	if err != nil {
		return params.NotifyWatchResult{}, err
	}
	return a.ctx.NotifyResult(w)
}

// Life returns the life of applications and units.
func (a *API) Life(ctx context.Context, args params.Entities) (params.LifeResults, error) {
	return params.LifeResults{Results: facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.LifeResult, error) {
		t, err := facade.ParseTag(e.Tag)
		if err != nil {
			return params.LifeResult{}, facade.ErrPerm
		}
		switch t := t.(type) {
		case names.ApplicationTag:
			app, err := a.st.Application(ctx, a.model, t.Id())
			return params.LifeResult{Life: string(app.Life)}, err
		case names.UnitTag:
			u, err := a.st.Unit(ctx, a.model, t.Id())
			return params.LifeResult{Life: string(u.Life)}, err
		}
		return params.LifeResult{}, facade.ErrPerm
	})}, nil
}

// WatchApplicationsScale watches the desired scale of applications.
func (a *API) WatchApplicationsScale(ctx context.Context, args params.Entities) (params.NotifyWatchResults, error) {
	return params.NotifyWatchResults{Results: facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.NotifyWatchResult, error) {
		t, err := applicationTag(e.Tag)
		if err != nil {
			return params.NotifyWatchResult{}, err
		}
		return a.notify(a.st.WatchApplicationScale(ctx, a.model, t.Id()))
	})}, nil
}

// WatchPodSpec watches the spec records of applications.
func (a *API) WatchPodSpec(ctx context.Context, args params.Entities) (params.NotifyWatchResults, error) {
	return params.NotifyWatchResults{Results: facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.NotifyWatchResult, error) {
		t, err := applicationTag(e.Tag)
		if err != nil {
			return params.NotifyWatchResult{}, err
		}
		return a.notify(a.st.WatchPodSpec(ctx, a.model, t.Id()))
	})}, nil
}

// ApplicationsScale returns the desired scale of applications.
func (a *API) ApplicationsScale(ctx context.Context, args params.Entities) (params.IntResults, error) {
	return params.IntResults{Results: facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.IntResult, error) {
		app, err := a.application(ctx, e.Tag)
		if err != nil {
			return params.IntResult{}, err
		}
		return params.IntResult{Result: app.Scale}, nil
	})}, nil
}

// ApplicationsTrust returns the trust config option of applications.
func (a *API) ApplicationsTrust(ctx context.Context, args params.Entities) (params.BoolResults, error) {
	return params.BoolResults{Results: facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.BoolResult, error) {
		cfg, err := a.config(ctx, e.Tag)
		if err != nil {
			return params.BoolResult{}, err
		}
		trust, _ := cfg["trust"].(bool)
		return params.BoolResult{Result: trust}, nil
	})}, nil
}

func (a *API) config(ctx context.Context, tag string) (map[string]any, error) {
	app, err := a.application(ctx, tag)
	if err != nil {
		return nil, err
	}
	return a.st.ApplicationConfig(ctx, a.model, app.Name)
}

// WatchApplicationsTrustHash watches the hash of applications' config;
// the initial hash is consumed, not returned.
func (a *API) WatchApplicationsTrustHash(ctx context.Context, args params.Entities) (params.StringsWatchResults, error) {
	return params.StringsWatchResults{Results: facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.StringsWatchResult, error) {
		app, err := a.application(ctx, e.Tag)
		if err != nil {
			return params.StringsWatchResult{}, err
		}
		w, _, err := a.st.WatchApplicationTrustHash(ctx, a.model, app.Name)
		if err != nil {
			return params.StringsWatchResult{}, err
		}
		return a.ctx.StringsResult(w, nil)
	})}, nil
}

// DeploymentMode returns the charm deployment mode of applications.
func (a *API) DeploymentMode(ctx context.Context, args params.Entities) (params.StringResults, error) {
	return params.StringResults{Results: facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.StringResult, error) {
		app, err := a.application(ctx, e.Tag)
		if err != nil {
			return params.StringResult{}, err
		}
		ch, err := a.st.Charm(ctx, a.model, app.CharmURL)
		if err != nil {
			return params.StringResult{}, err
		}
		return params.StringResult{Result: ch.Meta.DeploymentMode()}, nil
	})}, nil
}

// ApplicationsConfig returns the config settings of applications.
func (a *API) ApplicationsConfig(ctx context.Context, args params.Entities) (params.ApplicationGetConfigResults, error) {
	return params.ApplicationGetConfigResults{Results: facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.ConfigResult, error) {
		cfg, err := a.config(ctx, e.Tag)
		return params.ConfigResult{Config: cfg}, err
	})}, nil
}

// ClearApplicationsResources is called by the unit provisioner once a dead
// application's cluster resources are gone: it clears the resources flag
// and removes the application (its config, pod spec, cloud service and
// operator status with it), as Juju's ClearResources and the cleanup it
// schedules. An alive application refuses (`application "x" is alive`).
// Each application is cleared and removed in one part of one transaction
// (state.ClearAndRemoveApplications).
func (a *API) ClearApplicationsResources(ctx context.Context, args params.Entities) (params.ErrorResults, error) {
	return facade.BulkWrite(ctx, args.Entities, func(e params.Entity) (string, error) {
		app, err := a.application(ctx, e.Tag)
		return app.Name, err
	}, func(apps []string) []error { return a.st.ClearAndRemoveApplications(ctx, a.model, apps) }), nil
}

// SetOperatorStatus sets the operator status of applications, the valid
// items in one transaction.
func (a *API) SetOperatorStatus(ctx context.Context, args params.SetStatus) (params.ErrorResults, error) {
	return facade.BulkWrite(ctx, args.Entities, func(e params.EntityStatusArgs) (state.OperatorStatusArg, error) {
		app, err := a.application(ctx, e.Tag)
		return state.OperatorStatusArg{Application: app.Name, Status: state.Status{Status: e.Status, Message: e.Info, Data: e.Data}}, err
	}, func(ws []state.OperatorStatusArg) []error { return a.st.SetOperatorStatuses(ctx, a.model, ws) }), nil
}

// UpdateApplicationsService records applications' Kubernetes services
// and scales, the valid items in one transaction. As in Juju, a failed
// service update does not stop the scale update, and the later error is
// the one reported (state.UpdateApplicationsServices).
func (a *API) UpdateApplicationsService(ctx context.Context, args params.UpdateApplicationServiceArgs) (params.ErrorResults, error) {
	return facade.BulkWrite(ctx, args.Args, func(arg params.UpdateApplicationServiceArg) (state.ServiceUpdate, error) {
		app, err := a.application(ctx, arg.ApplicationTag)
		if err != nil {
			return state.ServiceUpdate{}, err
		}
		addrs, err := a.addresses(ctx, arg.Addresses)
		if err != nil {
			return state.ServiceUpdate{}, err
		}
		u := state.ServiceUpdate{Application: app.Name, ProviderID: arg.ProviderId, Addresses: addrs, Scale: arg.Scale}
		if arg.Generation != nil {
			u.Generation = *arg.Generation
		}
		return u, nil
	}, func(us []state.ServiceUpdate) []error { return a.st.UpdateApplicationsServices(ctx, a.model, us) }), nil
}

func (a *API) addresses(ctx context.Context, in []params.Address) ([]state.Address, error) {
	out := make([]state.Address, 0, len(in))
	for _, ad := range in {
		if ad.SpaceName != "" {
			if _, err := a.st.Space(ctx, a.model, ad.SpaceName); err != nil {
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
			Tags: m.Tags, Series: m.Series, Terms: m.Terms, MinJujuVersion: minJujuVersion(m.MinJujuVersion)}
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
		if len(m.Assumes) > 0 {
			pm.AssumesExpr = &params.ExpressionTree{Expressions: m.Assumes}
		}
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

// minJujuVersion is the charm's min-juju-version as Juju sends it: always
// present, "0.0.0" when the charm sets none. Juju's client parses it as a
// version, and fails the whole CharmInfo on an empty or malformed one.
// charm.ParseMeta refuses malformed versions; a record stored before it
// did is sent as unset rather than break the agent.
func minJujuVersion(s string) string {
	n, err := environ.ParseNumber(s)
	if err != nil {
		return "0.0.0"
	}
	return n.String()
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
