package caasunitprovisioner

import (
	"context"
	"fmt"

	"github.com/juju/errors"
	"github.com/juju/names/v5"

	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// UpdateApplicationsUnits brings applications' units in line with their
// pods (specs/caasunitprovisioner.md §4). The valid items are one state
// transaction (state's UpdateCAASApplicationsUnits), each application's
// update a part of it that fails alone.
func (a *API) UpdateApplicationsUnits(ctx context.Context, args params.UpdateApplicationUnitArgs) (params.UpdateApplicationUnitResults, error) {
	out := make([]params.UpdateApplicationUnitResult, len(args.Args))
	// The items go by index, so that each update's unit info reaches its
	// own result.
	items := make([]int, len(args.Args))
	for i := range items {
		items[i] = i
	}
	type update struct {
		item int
		up   state.ApplicationUnitsUpdate
	}
	errs := facade.BulkWriteErrors(ctx, items, func(i int) (update, error) {
		up, err := a.unitsUpdate(ctx, args.Args[i])
		return update{i, up}, err
	}, func(us []update) []error {
		ups := make([]state.ApplicationUnitsUpdate, len(us))
		for k, u := range us {
			ups[k] = u.up
		}
		// A refused scale change comes back with the unit info of the
		// update that committed, so a result may carry both.
		infos, errs := a.st.UpdateCAASApplicationsUnits(ctx, a.model, ups)
		for k, u := range us {
			if len(infos[k]) == 0 {
				continue
			}
			units := make([]params.ApplicationUnitInfo, len(infos[k]))
			for j, info := range infos[k] {
				units[j] = params.ApplicationUnitInfo{ProviderId: info.ProviderID, UnitTag: names.NewUnitTag(info.Unit).String()}
			}
			out[u.item].Info = &params.UpdateApplicationUnitsInfo{Units: units}
		}
		return errs
	})
	for i, err := range errs {
		out[i].Error = err
	}
	return params.UpdateApplicationUnitResults{Results: out}, nil
}

// unitsUpdate checks one application's update and converts it.
func (a *API) unitsUpdate(ctx context.Context, arg params.UpdateApplicationUnits) (state.ApplicationUnitsUpdate, error) {
	app, err := a.application(ctx, arg.ApplicationTag)
	if err != nil {
		return state.ApplicationUnitsUpdate{}, err
	}
	up := state.UnitsUpdate{Scale: arg.Scale}
	if arg.Generation != nil {
		up.Generation = *arg.Generation
	}
	if s := arg.Status.Status; s != "" && s != "unknown" {
		up.OperatorStatus = &state.Status{Status: s, Message: arg.Status.Info, Data: arg.Status.Data}
	}
	for _, p := range arg.Units {
		pod := state.Pod{ProviderID: p.ProviderId, Address: p.Address, Ports: p.Ports, Status: p.Status,
			Info: p.Info, Data: p.Data, Stateful: p.Stateful}
		if p.UnitTag != "" {
			t, err := facade.ParseUnitTag(p.UnitTag)
			if err != nil {
				return state.ApplicationUnitsUpdate{}, err
			}
			if name, _ := names.UnitApplication(t.Id()); name != app.Name {
				return state.ApplicationUnitsUpdate{}, errors.NewNotValid(nil, fmt.Sprintf("unit %q of pod %q is not a unit of application %q",
					t.Id(), p.ProviderId, app.Name))
			}
			pod.Unit = t.Id()
		}
		// Storage the charm does not have is refused by state, in the
		// update's transaction.
		for _, f := range p.FilesystemInfo {
			pf := state.PodFilesystem{
				StorageName: f.StorageName, Pool: f.Pool, Size: f.Size, FilesystemID: f.FilesystemId,
				Status: f.Status, Info: f.Info, Data: f.Data, MountPoint: f.MountPoint, ReadOnly: f.ReadOnly,
			}
			// A volume left out (all zero) is not reported.
			if v := f.Volume; v.VolumeId != "" || v.Status != "" {
				pf.Volume = &state.PodVolume{VolumeID: v.VolumeId, Size: v.Size, Persistent: v.Persistent,
					Status: v.Status, Info: v.Info, Pool: v.Pool, Data: v.Data}
			}
			pod.Filesystems = append(pod.Filesystems, pf)
		}
		up.Pods = append(up.Pods, pod)
	}
	return state.ApplicationUnitsUpdate{Application: app.Name, Update: up}, nil
}
