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
// pods (specs/caasunitprovisioner.md §4). Each application's update is
// one state transaction.
func (a *API) UpdateApplicationsUnits(ctx context.Context, args params.UpdateApplicationUnitArgs) (params.UpdateApplicationUnitResults, error) {
	// A refused scale change comes back with the unit info of the update
	// that committed, so a result may carry both.
	return params.UpdateApplicationUnitResults{Results: facade.Bulk(ctx, args.Args,
		func(arg params.UpdateApplicationUnits) (params.UpdateApplicationUnitResult, error) {
			info, err := a.updateUnits(arg)
			var res params.UpdateApplicationUnitResult
			if len(info) > 0 {
				res.Info = &params.UpdateApplicationUnitsInfo{Units: info}
			}
			return res, err
		})}, nil
}

func (a *API) updateUnits(arg params.UpdateApplicationUnits) ([]params.ApplicationUnitInfo, error) {
	app, err := a.application(arg.ApplicationTag)
	if err != nil {
		return nil, err
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
				return nil, err
			}
			if name, _ := names.UnitApplication(t.Id()); name != app.Name {
				return nil, errors.NewNotValid(nil, fmt.Sprintf("unit %q of pod %q is not a unit of application %q",
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
	units, err := a.st.UpdateCAASUnits(a.model, app.Name, up)
	var info []params.ApplicationUnitInfo
	for _, u := range units {
		info = append(info, params.ApplicationUnitInfo{ProviderId: u.ProviderID, UnitTag: names.NewUnitTag(u.Unit).String()})
	}
	return info, err
}
