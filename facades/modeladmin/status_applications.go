package modeladmin

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// appStatusReads are the model-wide records application statuses are built
// from, read once per Status.
type appStatusReads struct {
	units     []state.Unit
	instances []state.StorageInstance
}

func (a *ModelAdmin) readAppStatus(ctx context.Context, m state.Model) (appStatusReads, error) {
	var r appStatusReads
	var err error
	if r.units, err = a.st.Units(ctx, m.UUID); err != nil {
		return r, err
	}
	r.instances, err = a.st.StorageInstances(ctx, m.UUID)
	return r, err
}

// applicationStatus reports one application (Deploy and the settings
// methods answer with it).
func (a *ModelAdmin) applicationStatus(ctx context.Context, m state.Model, name string) (params.ApplicationStatus, error) {
	app, err := a.st.Application(ctx, m.UUID, name)
	if err != nil {
		return params.ApplicationStatus{}, err
	}
	r, err := a.readAppStatus(ctx, m)
	if err != nil {
		return params.ApplicationStatus{}, err
	}
	return a.appStatus(ctx, m, app, r)
}

// applicationsStatus reports every application of a model, by name.
func (a *ModelAdmin) applicationsStatus(ctx context.Context, m state.Model) ([]params.ApplicationStatus, error) {
	apps, err := a.st.Applications(ctx, m.UUID)
	if err != nil {
		return nil, err
	}
	r, err := a.readAppStatus(ctx, m)
	if err != nil {
		return nil, err
	}
	out := []params.ApplicationStatus{}
	for _, app := range apps {
		s, err := a.appStatus(ctx, m, app, r)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (a *ModelAdmin) appStatus(ctx context.Context, m state.Model, app state.Application, r appStatusReads) (params.ApplicationStatus, error) {
	s := params.ApplicationStatus{Name: app.Name, Life: string(app.Life), Charm: app.CharmURL, CharmRevision: app.CharmRevision,
		Subordinate: app.Subordinate, Scale: app.Scale, Constraints: app.Constraints.String(), Units: []params.UnitStatus{}}
	cfg, err := a.st.ApplicationConfig(ctx, m.UUID, app.Name)
	if err != nil {
		return s, err
	}
	s.Trust, _ = cfg["trust"].(bool)
	if len(app.StorageConstraints) > 0 {
		s.Storage = map[string]string{}
		for name, c := range app.StorageConstraints {
			s.Storage[name] = c.String()
		}
	}
	if len(app.DeviceConstraints) > 0 {
		s.Devices = map[string]string{}
		for name, d := range app.DeviceConstraints {
			s.Devices[name] = fmt.Sprintf("%d,%s", d.Count, d.Type)
		}
	}
	if m.Type == state.ModelTypeCAAS {
		svc, err := a.st.CloudService(ctx, m.UUID, app.Name)
		if err != nil {
			return s, err
		}
		s.ProviderID = svc.ProviderID
		for _, ad := range svc.Addresses {
			s.Addresses = append(s.Addresses, ad.Value)
		}
		op, err := a.st.OperatorStatus(ctx, m.UUID, app.Name)
		if err != nil {
			return s, err
		}
		if op.Status != "" {
			s.OperatorStatus = statusInfo(op)
		}
	}
	for _, u := range r.units {
		if u.Application != app.Name {
			continue
		}
		us := params.UnitStatus{Name: u.Name, Life: string(u.Life), Machine: u.MachineID, ProviderID: u.ProviderID()}
		if u.Container != nil {
			us.Address, us.Ports = u.Container.Address, u.Container.Ports
		}
		for _, st := range []struct {
			from state.Status
			to   *params.StatusInfo
		}{{u.AgentStatus, &us.AgentStatus}, {u.WorkloadStatus, &us.WorkloadStatus}, {u.ContainerStatus, &us.ContainerStatus}} {
			if st.from.Status != "" {
				*st.to = statusInfo(st.from)
			}
		}
		for _, si := range r.instances {
			if si.Unit == u.Name {
				us.Storage = append(us.Storage, si.ID)
			}
		}
		s.Units = append(s.Units, us)
	}
	slices.SortStableFunc(s.Units, func(x, y params.UnitStatus) int { return unitNumber(x.Name) - unitNumber(y.Name) })
	return s, nil
}

// unitNumber is n of "app/n".
func unitNumber(name string) int {
	_, n, _ := strings.Cut(name, "/")
	i, _ := strconv.Atoi(n)
	return i
}

// storageStatus reports a model's storage instances, filesystems and
// volumes.
func (a *ModelAdmin) storageStatus(ctx context.Context, m state.Model) (params.StorageStatus, error) {
	out := params.StorageStatus{Instances: []params.StorageInstanceStatus{}, Filesystems: []params.FilesystemStatus{},
		Volumes: []params.ModelVolumeStatus{}}
	sis, err := a.st.StorageInstances(ctx, m.UUID)
	if err != nil {
		return out, err
	}
	for _, si := range sis {
		out.Instances = append(out.Instances, params.StorageInstanceStatus{ID: si.ID, Kind: si.Kind, Life: string(si.Life),
			Owner: si.Owner, Unit: si.Unit})
	}
	fss, err := a.st.Filesystems(ctx, m.UUID)
	if err != nil {
		return out, err
	}
	for _, f := range fss {
		fs := params.FilesystemStatus{ID: f.ID, StorageID: f.StorageID, VolumeID: f.VolumeID, Pool: f.Pool, Size: f.Size,
			Life: string(f.Life)}
		if f.Info != nil {
			fs.ProviderID = f.Info.FilesystemID
			if f.Info.Size != 0 {
				fs.Size = f.Info.Size
			}
		}
		if f.Status.Status != "" {
			fs.Status = statusInfo(f.Status)
		}
		if at := f.Attachment; at != nil {
			fs.Attachment = &params.FilesystemAttachmentStatus{Unit: at.Unit, MountPoint: at.Location, ReadOnly: at.ReadOnly}
			if at.Info != nil {
				fs.Attachment.MountPoint, fs.Attachment.ReadOnly = at.Info.MountPoint, at.Info.ReadOnly
			}
		}
		out.Filesystems = append(out.Filesystems, fs)
	}
	vols, err := a.st.Volumes(ctx, m.UUID)
	if err != nil {
		return out, err
	}
	for _, v := range vols {
		vs := params.ModelVolumeStatus{ID: v.ID, StorageID: v.StorageID, Pool: v.Pool, Size: v.Size, Life: string(v.Life)}
		if v.Info != nil {
			vs.ProviderID, vs.Persistent = v.Info.VolumeID, v.Info.Persistent
			if v.Info.Size != 0 {
				vs.Size = v.Info.Size
			}
		}
		if v.Status.Status != "" {
			vs.Status = statusInfo(v.Status)
		}
		for _, at := range v.Attachments {
			as := params.VolumeAttachmentStatus{Machine: at.Machine, Unit: at.Unit, ReadOnly: at.ReadOnly}
			if at.Info != nil {
				as.DeviceName = at.Info.DeviceName
			}
			vs.Attached = append(vs.Attached, as)
		}
		out.Volumes = append(out.Volumes, vs)
	}
	markOrphaned(&out)
	return out, nil
}

// markOrphaned marks the filesystems and volumes attached to nothing that
// belong to no storage instance (a volume backing a filesystem goes with
// it and is not marked).
func markOrphaned(s *params.StorageStatus) {
	instances := map[string]bool{}
	for _, si := range s.Instances {
		instances[si.ID] = true
	}
	backing := map[string]bool{}
	for i, f := range s.Filesystems {
		if f.VolumeID != "" {
			backing[f.VolumeID] = true
		}
		s.Filesystems[i].Orphaned = f.Attachment == nil && !instances[f.StorageID]
	}
	for i, v := range s.Volumes {
		s.Volumes[i].Orphaned = len(v.Attached) == 0 && !backing[v.ID] && !instances[v.StorageID]
	}
}
