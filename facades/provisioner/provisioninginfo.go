package provisioner

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/juju/errors"
	"github.com/juju/names/v5"

	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/storage"
)

// ProvisioningInfo returns what the provisioner needs to start each
// machine's instance.
func (p *Provisioner) ProvisioningInfo(ctx context.Context, args params.Entities) (params.ProvisioningInfoResults, error) {
	var call provisioningCall
	return params.ProvisioningInfoResults{Results: facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.ProvisioningInfoResult, error) {
		m, err := p.machine(e.Tag, machineTags)
		if err != nil {
			return params.ProvisioningInfoResult{}, err
		}
		info, err := p.provisioningInfo(&call, m)
		if err != nil {
			return params.ProvisioningInfoResult{}, err
		}
		return params.ProvisioningInfoResult{Result: info}, nil
	})}, nil
}

// provisioningCall is what every machine of one ProvisioningInfo call
// reads alike: the model with its config, the controller, the model's
// storage manager. It is read at the first machine that gets that far and
// kept for the call (Bulk runs the items one after the other), so a call
// for N machines reads them once, not N times: each read copies the
// model's config of some 65 keys, which for 500 machines held about 3 MiB
// until the reply was encoded.
type provisioningCall struct {
	read  bool
	model state.Model
	cfg   map[string]any
	ctrl  state.Controller
	mgr   *storage.Manager
}

// shared reads c once per call (a failed read is tried again by the next
// machine).
func (p *Provisioner) shared(c *provisioningCall) error {
	if c.read {
		return nil
	}
	model, cfg, err := p.modelConfig()
	if err != nil {
		return err
	}
	ctrl, err := p.st.Controller()
	if err != nil {
		return err
	}
	mgr, err := p.st.StorageManager(p.model)
	if err != nil {
		return err
	}
	*c = provisioningCall{read: true, model: model, cfg: cfg, ctrl: ctrl, mgr: mgr}
	return nil
}

// placed is what ProvisioningInfo gathers about the units on a machine.
type placed struct {
	principals []string // sorted unit names
	apps       []state.Application
}

func (p *Provisioner) placed(m state.Machine) (placed, error) {
	units, err := p.st.UnitsOnMachine(p.model, m.ID)
	if err != nil {
		return placed{}, err
	}
	var out placed
	for _, u := range units {
		if !u.IsPrincipal() {
			continue
		}
		out.principals = append(out.principals, u.Name)
		if slices.ContainsFunc(out.apps, func(a state.Application) bool { return a.Name == u.Application }) {
			continue
		}
		app, err := p.st.Application(p.model, u.Application)
		if err != nil {
			return placed{}, err
		}
		out.apps = append(out.apps, app)
	}
	slices.Sort(out.principals)
	return out, nil
}

func (p *Provisioner) provisioningInfo(call *provisioningCall, m state.Machine) (*params.ProvisioningInfo, error) {
	if err := p.shared(call); err != nil {
		return nil, err
	}
	model, cfg, ctrl, mgr := call.model, call.cfg, call.ctrl, call.mgr
	pl, err := p.placed(m)
	if err != nil {
		return nil, err
	}
	info := &params.ProvisioningInfo{
		Constraints: toValue(m.Constraints),
		Base:        wireBase(p.machineBase(m)),
		Placement:   m.Placement,
		Jobs:        slices.Clone(m.Jobs),
	}
	info.ControllerConfig = map[string]any{}
	maps.Copy(info.ControllerConfig, ctrl.Config)
	info.ControllerConfig["controller-uuid"] = ctrl.UUID
	info.CloudInitUserData = state.CloudInitUserData(cfg)

	tags := state.ResourceTags(cfg)
	tags["juju-model-uuid"] = p.model
	tags["juju-controller-uuid"] = ctrl.UUID
	if state.IsController(m) {
		tags["juju-is-controller"] = "true"
	}
	if len(pl.principals) > 0 {
		tags["juju-units-deployed"] = strings.Join(pl.principals, " ")
	}
	tags["juju-machine-id"] = fmt.Sprintf("%s-%s", model.Name, m.Tag())
	info.Tags = tags

	// Endpoint bindings and LXD profiles of the principal applications.
	bindings := map[string]string{}
	var bound []string
	for _, app := range pl.apps {
		for ep, space := range app.EndpointBindings {
			id := space
			if s, err := p.st.Space(p.model, space); err == nil && s.ProviderID != "" {
				id = s.ProviderID
			}
			bindings[ep] = id
			if !slices.Contains(bound, space) {
				bound = append(bound, space)
			}
		}
		if app.LXDProfile != nil {
			info.CharmLXDProfiles = append(info.CharmLXDProfiles, profileName(model.Name, app))
		}
	}
	if len(bindings) > 0 {
		info.EndpointBindings = bindings
	}

	if src := m.Constraints.RootDiskSource; src != nil {
		if cfg, _, err := mgr.Resolve(*src); err == nil {
			info.RootDisk = &params.VolumeParams{Provider: string(cfg.Provider), Attributes: cfg.Attrs}
		}
	}

	// Volume tags: Juju's storage tags (resource-tags, model and
	// controller uuid).
	volTags := state.ResourceTags(cfg)
	volTags["juju-model-uuid"] = p.model
	volTags["juju-controller-uuid"] = ctrl.UUID
	vols, atts, err := p.volumeParams(mgr, m, cfg, volTags)
	if err != nil {
		return nil, err
	}
	info.Volumes, info.VolumeAttachments = vols, atts

	spaceSubnets, subnetZones, err := p.networkTopology(m, bound)
	if err != nil {
		return nil, errors.Annotate(err, "matching subnets to zones")
	}
	info.SpaceSubnets, info.SubnetAZs = spaceSubnets, subnetZones
	return info, nil
}

// volumeParams lists the volumes to make with m's instance, their
// provider, attributes and size resolved by the model's pool manager
// (storage.Manager.VolumeParams), tagged with tags. v11 lists the volumes
// of the environ's providers (storage.IsCommonProvider is false) whose
// attachment is not provisioned; those already provisioned only need
// attaching. 2015 lists the volumes of static providers, and refuses an
// attachment already provisioned.
func (p *Provisioner) volumeParams(mgr *storage.Manager, m state.Machine, cfg map[string]any,
	tags map[string]string) ([]params.VolumeParams, []params.VolumeAttachmentParams, error) {
	vols, err := p.st.MachineVolumes(p.model, m.ID)
	if err != nil {
		return nil, nil, err
	}
	defaultBlock, _ := cfg[storage.DefaultBlockSourceKey].(string)
	var out []params.VolumeParams
	var atts []params.VolumeAttachmentParams
	for _, v := range vols {
		var att state.VolumeAttachment
		for _, a := range v.Attachments {
			if a.Machine == m.ID {
				att = a
			}
		}
		vp, err := mgr.VolumeParams(storage.VolumeArgs{Pool: v.Pool, Size: v.Size, ReadOnly: att.ReadOnly,
			DefaultBlockSource: defaultBlock, Tags: tags})
		if err != nil {
			return nil, nil, errors.Annotatef(err, "getting volume %q parameters", v.ID)
		}
		vtag := names.NewVolumeTag(v.ID).String()
		ap := params.VolumeAttachmentParams{VolumeTag: vtag, MachineTag: m.Tag().String(),
			Provider: string(vp.Attachment.Provider), ReadOnly: vp.Attachment.ReadOnly}
		if p.v1 {
			if vp.Dynamic {
				continue
			}
			if att.Info != nil {
				return nil, nil, errors.Errorf("volume %s already attached to machine %s", v.ID, m.ID)
			}
		} else {
			if !vp.EnvironManaged || att.Info != nil {
				continue
			}
			if v.Info != nil {
				ap.VolumeId = v.Info.VolumeID
				atts = append(atts, ap)
				continue
			}
		}
		out = append(out, params.VolumeParams{VolumeTag: vtag, Size: vp.Size, Provider: string(vp.Provider),
			Attributes: vp.Attributes, Tags: vp.Tags, Attachment: &ap})
	}
	return out, atts, nil
}

// networkTopology maps the spaces m must be in (positive space constraints
// and the endpoint bindings' spaces) to their subnets' provider ids, and
// those to their zones. The default space "alpha" alone, when not asked
// for, gives no topology.
func (p *Provisioner) networkTopology(m state.Machine, bound []string) (map[string][]string, map[string][]string, error) {
	positive := m.Constraints.PositiveSpaces()
	negative := m.Constraints.NegativeSpaces()
	spaces := slices.Clone(positive)
	for _, s := range bound {
		if slices.Contains(negative, s) {
			return nil, nil, errors.Errorf("endpoint binding to space %q conflicts with constraint spaces=^%s", s, s)
		}
		if !slices.Contains(spaces, s) {
			spaces = append(spaces, s)
		}
	}
	if len(spaces) == 0 || (len(spaces) == 1 && spaces[0] == "alpha" && !slices.Contains(positive, "alpha")) {
		return nil, nil, nil
	}
	subnets, err := p.st.Subnets(p.model)
	if err != nil {
		return nil, nil, err
	}
	spaceSubnets := map[string][]string{}
	subnetZones := map[string][]string{}
	for _, space := range spaces {
		var ids []string
		for _, s := range subnets {
			if s.SpaceName != space {
				continue
			}
			id := s.ProviderID
			if id == "" {
				id = s.CIDR
			}
			ids = append(ids, id)
			subnetZones[id] = cloneStrings(s.Zones)
		}
		if len(ids) == 0 {
			return nil, nil, errors.Errorf("cannot use space %q as deployment target: no subnets", space)
		}
		spaceSubnets[space] = ids
	}
	return spaceSubnets, subnetZones, nil
}

// subnetsToZones is the 2015 topology: for the first positive space, the
// provider ids of its subnets that have zones, mapped to those zones.
func (p *Provisioner) subnetsToZones(m state.Machine) (map[string][]string, error) {
	positive := m.Constraints.PositiveSpaces()
	if len(positive) == 0 {
		return nil, nil
	}
	subnets, err := p.st.Subnets(p.model)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, s := range subnets {
		if s.SpaceName != positive[0] {
			continue
		}
		if s.ProviderID == "" || len(s.Zones) == 0 {
			p.ctx.Deps.Logger.Warn("skipping subnet without provider id or zones", "subnet", s.CIDR)
			continue
		}
		out[s.ProviderID] = slices.Clone(s.Zones)
	}
	return out, nil
}

func wireBase(b state.Base) params.Base { return params.Base{Name: b.Name, Channel: b.Channel} }
