package state

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/watcher"
)

// CloudContainer is the pod of a Kubernetes unit.
type CloudContainer struct {
	ProviderID string   `json:"provider-id,omitempty"`
	Address    string   `json:"address,omitempty"`
	Ports      []string `json:"ports,omitempty"`
}

// CAASUnit is what a Kubernetes unit adds to Unit.
type CAASUnit struct {
	Container       *CloudContainer `json:"container,omitempty"`
	AgentStatus     Status          `json:"agent-status,omitzero"`
	WorkloadStatus  Status          `json:"workload-status,omitzero"`
	ContainerStatus Status          `json:"container-status,omitzero"`
}

// ProviderID is the unit's pod id ("" when it has none).
func (u Unit) ProviderID() string {
	if u.Container == nil {
		return ""
	}
	return u.Container.ProviderID
}

// Pod is what the unit provisioner reports of one pod.
type Pod struct {
	ProviderID string
	// Unit is the unit the caller says the pod belongs to ("" usually);
	// only trusted for new pods' storage, as Juju.
	Unit     string
	Address  string
	Ports    []string
	Status   string
	Info     string
	Data     map[string]any
	Stateful bool
	// Filesystems are the pod's filesystems (nil: not reported).
	Filesystems []PodFilesystem
}

// PodFilesystem is a filesystem of a pod.
type PodFilesystem struct {
	StorageName  string
	Pool         string
	Size         uint64
	FilesystemID string
	Status       string
	Info         string
	Data         map[string]any
	MountPoint   string
	ReadOnly     bool
	Volume       *PodVolume
}

// PodVolume is the volume backing a pod's filesystem.
type PodVolume struct {
	VolumeID   string
	Size       uint64
	Persistent bool
	Status     string
	Info       string
	Pool       string
	Data       map[string]any
}

// UnitsUpdate is one UpdateApplicationsUnits entry.
type UnitsUpdate struct {
	Scale      *int
	Generation int64
	// OperatorStatus, when set, is written first.
	OperatorStatus *Status
	Pods           []Pod
}

// UnitInfo names the unit of a pod.
type UnitInfo struct {
	ProviderID string
	Unit       string
}

// CAASUnits returns the units of an application in creation order.
func (st *State) CAASUnits(ctx context.Context, model, app string) ([]Unit, error) {
	var out []Unit
	err := st.view(ctx, func(r reader) error {
		var err error
		out, err = appUnits(r, model, app)
		return err
	})
	return out, err
}

// appUnits decodes through the unit cache: a CAAS unit update reads the
// application's units, then each unit it updates again.
func appUnits(r reader, model, app string) ([]Unit, error) {
	out := []Unit{}
	err := scan(r, kindPrefix(KindUnit, model)+app+"/", func(key string, b []byte) error {
		u, err := unitRecords.get(key, b)
		if err != nil {
			return errors.Annotatef(err, "decoding %s %q", KindUnit, key)
		}
		if u.Application == app {
			out = append(out, u)
		}
		return nil
	})
	slices.SortFunc(out, func(a, b Unit) int { return cmp.Compare(seqOf(a.Name), seqOf(b.Name)) })
	return out, err
}

// Unit returns a unit.
func (st *State) Unit(ctx context.Context, model, name string) (Unit, error) {
	var d unitDoc
	err := st.view(ctx, func(r reader) error {
		var err error
		d, err = getUnit(r, model, name)
		return err
	})
	return d.Unit, err
}

// getUnit reads a unit's record (`unit "x" not found` if none).
func getUnit(r reader, model, name string) (unitDoc, error) {
	var d unitDoc
	ok, err := get(r, KindUnit, model, name, &d)
	if err == nil && !ok {
		err = errors.NotFoundf("unit %q", name)
	}
	return d, err
}

// unitOp is one unit update of updateStateUnits.
type unitOp struct {
	unit  string // "" for an add
	props podProps
}

// podProps is what an update or add writes to a unit.
type podProps struct {
	container       *CloudContainer // nil: the pod record is left alone
	agentStatus     *Status
	containerStatus *Status
}

// checkPodStatusSizes refuses pods whose statuses, or whose storage's, are
// over the status limits (checkStatusSize).
func checkPodStatusSizes(pods []Pod) error {
	for _, p := range pods {
		if err := checkStatusSize("pod "+quotePrefix(p.ProviderID), p.Info, p.Data); err != nil {
			return err
		}
		for _, f := range p.Filesystems {
			if err := checkStatusSize("filesystem "+quotePrefix(f.FilesystemID)+" of pod "+quotePrefix(p.ProviderID), f.Info, f.Data); err != nil {
				return err
			}
			if v := f.Volume; v != nil {
				if err := checkStatusSize("volume "+quotePrefix(v.VolumeID)+" of pod "+quotePrefix(p.ProviderID), v.Info, v.Data); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// propsOf maps a pod's status (specs/caasunitprovisioner.md §4.4).
func propsOf(p Pod) podProps {
	pp := podProps{container: &CloudContainer{ProviderID: p.ProviderID, Address: p.Address, Ports: slices.Clone(p.Ports)}}
	cs := &Status{Status: "", Message: p.Info, Data: p.Data}
	switch p.Status {
	case "unknown":
		return pp
	case "allocating":
		pp.agentStatus = &Status{Status: "allocating", Message: p.Info}
		cs.Status = "waiting"
	case "running":
		pp.agentStatus = &Status{Status: "idle"}
		cs.Status = "running"
	case "error":
		pp.agentStatus = &Status{Status: "error", Message: p.Info, Data: p.Data}
		cs.Status = "error"
	case "blocked":
		pp.agentStatus = &Status{Status: "idle"}
		cs.Status = "blocked"
	}
	pp.containerStatus = cs
	return pp
}

type fsUpdate struct {
	unit       string
	size       uint64
	id         string
	mountPoint string
	readOnly   bool
}

type volUpdate struct {
	unit       string
	size       uint64
	id         string
	persistent bool
	readOnly   bool
}

// unitsRun is the state of one UpdateCAASUnits transaction.
type unitsRun struct {
	tx    *txn
	model string
	app   applicationDoc

	fsUpdates  map[string]fsUpdate // by filesystem tag
	fsStatus   map[string]Status
	volUpdates map[string]volUpdate // by volume tag
	volStatus  map[string]Status
	fsByTag    map[string]string // tag -> id
	volByTag   map[string]string
}

// UpdateCAASUnits brings an application's units in line with the pods
// the unit provisioner reports (specs/caasunitprovisioner.md §4.2-4.5), in
// one transaction: the check of the pods' storage against the charm, the
// operator status, unit adds, updates and removals,
// storage info and statuses, orphaned filesystem cleanup and, last, the
// scale. An error leaves everything unchanged, except that a refused scale
// change (SetScale's errors) is returned with the unit info while the rest
// commits, as Juju reports it.
func (st *State) UpdateCAASUnits(ctx context.Context, model, app string, u UnitsUpdate) ([]UnitInfo, error) {
	if u.Scale != nil && *u.Scale < 0 {
		return nil, errors.NotValidf("application scale %d", *u.Scale)
	}
	var (
		info     []UnitInfo
		scaleErr error
	)
	err := st.update(ctx, func(tx *txn) error {
		var err error
		info, scaleErr, err = tx.updateCAASUnits(model, app, u)
		return err
	})
	if err != nil {
		return nil, err
	}
	return info, scaleErr
}

// ApplicationUnitsUpdate is one item of UpdateCAASApplicationsUnits.
type ApplicationUnitsUpdate struct {
	Application string
	Update      UnitsUpdate
}

// UpdateCAASApplicationsUnits is UpdateCAASUnits of each item, the items in
// one transaction (bulk): an item that fails leaves nothing of its own
// written and keeps its error; infos[i] is what UpdateCAASUnits returns
// with it (a refused scale change: the unit info and the scale's error,
// the rest of the item committed).
func (st *State) UpdateCAASApplicationsUnits(ctx context.Context, model string, items []ApplicationUnitsUpdate) (infos [][]UnitInfo, errs []error) {
	infos = make([][]UnitInfo, len(items))
	scaleErrs := make([]error, len(items))
	errs = st.bulk(ctx, len(items), func(tx *txn, i int) error {
		u := items[i].Update
		if u.Scale != nil && *u.Scale < 0 {
			return errors.NotValidf("application scale %d", *u.Scale)
		}
		var err error
		infos[i], scaleErrs[i], err = tx.updateCAASUnits(model, items[i].Application, u)
		return err
	})
	for i, err := range errs {
		if err != nil {
			infos[i] = nil
		} else {
			errs[i] = scaleErrs[i]
		}
	}
	return infos, errs
}

// updateCAASUnits is UpdateCAASUnits in a transaction: a refused scale
// change is scaleErr, with the rest written; err writes nothing.
func (tx *txn) updateCAASUnits(model, app string, u UnitsUpdate) (info []UnitInfo, scaleErr, err error) {
	a, err := getApplication(tx, model, app)
	if err != nil {
		return nil, nil, err
	}
	if err := checkPodStorage(tx, a, u.Pods); err != nil {
		return nil, nil, err
	}
	if err := checkPodStatusSizes(u.Pods); err != nil {
		return nil, nil, err
	}
	if u.OperatorStatus != nil {
		if err := tx.setOperatorStatus(a, *u.OperatorStatus); err != nil {
			return nil, nil, err
		}
	}
	if u.Scale != nil && *u.Scale > 0 && len(u.Pods) == 0 {
		return nil, nil, nil // an empty event says nothing of the workload
	}
	run := &unitsRun{tx: tx, model: model, app: a,
		fsUpdates: map[string]fsUpdate{}, fsStatus: map[string]Status{},
		volUpdates: map[string]volUpdate{}, volStatus: map[string]Status{},
		fsByTag: map[string]string{}, volByTag: map[string]string{}}
	if err := run.units(u); err != nil {
		return nil, nil, err
	}
	if info, err = unitInfo(tx, model, u.Pods); err != nil {
		return nil, nil, err
	}
	if u.Scale == nil || a.Scale == *u.Scale {
		return info, nil, nil
	}
	a, err = getApplication(tx, model, app)
	if err != nil {
		return nil, nil, err
	}
	if err := tx.checkScale(a, *u.Scale, u.Generation, false); err != nil {
		return info, err, nil
	}
	return info, nil, tx.setScale(a, *u.Scale, u.Generation, false)
}

// checkPodStorage refuses filesystems of pods that name storage the
// application's charm does not have. The charm is read in the update's
// transaction, so the check holds for what commits.
func checkPodStorage(r reader, a applicationDoc, pods []Pod) error {
	var ch *charmDoc
	for _, p := range pods {
		for _, f := range p.Filesystems {
			if ch == nil {
				ch = &charmDoc{}
				if _, err := get(r, KindCharm, a.Model, a.CharmURL, ch); err != nil {
					return err
				}
			}
			if ch.Meta == nil || ch.Meta.Storage[f.StorageName].Name == "" {
				return errors.NewNotValid(nil, fmt.Sprintf("filesystem info of pod %q names storage %q that charm %q does not have",
					p.ProviderID, f.StorageName, a.CharmURL))
			}
		}
	}
	return nil
}

// unitInfo names the units whose pods were reported, in the order of the
// reported provider ids. Like Juju's Model.Containers it looks at every unit
// of the model, not only the application's, through the provider id index
// (unitProviderIndex).
func unitInfo(r reader, model string, pods []Pod) ([]UnitInfo, error) {
	var out []UnitInfo
	seen := map[string]bool{}
	for _, p := range pods {
		if p.ProviderID == "" || seen[p.ProviderID] {
			continue
		}
		seen[p.ProviderID] = true
		names, err := unitProviderIndex.lookup(r, model, p.ProviderID)
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			out = append(out, UnitInfo{ProviderID: p.ProviderID, Unit: name})
		}
	}
	return out, nil
}

type removedUnit struct {
	unit   Unit
	delete bool
}

// units runs steps B-G.
func (run *unitsRun) units(u UnitsUpdate) error {
	existing, err := appUnits(run.tx, run.model, run.app.Name)
	if err != nil {
		return err
	}
	pods := map[string]Pod{}
	for _, p := range u.Pods {
		pods[p.ProviderID] = p // the last of duplicates wins
	}
	inCloud := map[string]Unit{}
	byID := map[string]Unit{}
	var unassociated []Unit
	var extraIDs []string
	for _, unit := range existing {
		if unit.Life != Alive {
			continue
		}
		id := unit.ProviderID()
		if id == "" {
			unassociated = append(unassociated, unit)
			continue
		}
		byID[id] = unit
		if _, ok := pods[id]; ok {
			inCloud[unit.Name] = unit
		} else {
			extraIDs = append(extraIDs, id)
		}
	}
	unassocCount := len(unassociated)
	extraCount := 0
	if u.Scale != nil {
		extraCount = len(byID) + unassocCount - *u.Scale
	}

	deletedRemoved := true
	var existingPods, addedPods []Pod
	for _, id := range slices.Sorted(maps.Keys(pods)) {
		p := pods[id]
		deletedRemoved = !p.Stateful
		if unit, ok := byID[id]; ok {
			p.Unit = unit.Name
			existingPods = append(existingPods, p)
			continue
		}
		if unassocCount > 0 {
			unassocCount--
		}
		addedPods = append(addedPods, p)
	}
	slices.Sort(extraIDs)
	var removed []removedUnit
	for _, id := range extraIDs {
		del := deletedRemoved && u.Scale != nil
		if !del && extraCount > 0 {
			del = true
			extraCount--
		}
		removed = append(removed, removedUnit{unit: byID[id], delete: del})
	}
	return run.updateStateUnits(removed, existingPods, addedPods, inCloud, unassociated)
}

// updateStateUnits is §4.4.
func (run *unitsRun) updateStateUnits(removed []removedUnit, existingPods, addedPods []Pod, inCloud map[string]Unit, unassociated []Unit) error {
	if run.app.Life != Alive {
		return nil
	}
	tx, model := run.tx, run.model
	var updates []unitOp
	var adds []podProps
	var deletes []string
	for _, r := range removed {
		sis, err := unitStorage(tx, model, r.unit.Name)
		if err != nil {
			return err
		}
		for _, si := range sis {
			fs, err := instanceFilesystem(tx, model, si.ID)
			if err != nil {
				return err
			}
			run.fsByTag[FilesystemTag(fs.ID)] = fs.ID
			run.fsStatus[FilesystemTag(fs.ID)] = Status{Status: "detached"}
		}
		if r.delete {
			deletes = append(deletes, r.unit.Name)
		}
		updates = append(updates, unitOp{unit: r.unit.Name, props: podProps{
			agentStatus:     &Status{Status: "idle"},
			containerStatus: &Status{Status: "terminated", Message: "unit stopped by the cloud"},
		}})
	}
	var withStorage []Pod
	for _, p := range existingPods {
		unit, ok := inCloud[p.Unit]
		if !ok {
			continue
		}
		updates = append(updates, unitOp{unit: unit.Name, props: propsOf(p)})
		if len(p.Filesystems) > 0 {
			withStorage = append(withStorage, p)
		}
	}
	idx := 0
	for _, p := range addedPods {
		if idx < len(unassociated) {
			updates = append(updates, unitOp{unit: unassociated[idx].Name, props: propsOf(p)})
			idx++
		} else {
			adds = append(adds, propsOf(p))
		}
		if len(p.Filesystems) > 0 {
			withStorage = append(withStorage, p)
		}
	}

	// Adds, updates, deletes: Juju's one model operation.
	for _, props := range adds {
		if err := run.addUnit(props); err != nil {
			return err
		}
	}
	for _, op := range updates {
		if err := run.updateUnit(op.unit, op.props); err != nil {
			return err
		}
	}
	for _, name := range deletes {
		if err := run.removeUnit(name); err != nil {
			return err
		}
	}

	// Units of pods for storage (only read when a pod reports storage).
	unitOfPod := map[string]string{}
	if len(withStorage) > 0 {
		units, err := appUnits(tx, model, run.app.Name)
		if err != nil {
			return err
		}
		for _, unit := range units {
			if id := unit.ProviderID(); id != "" {
				unitOfPod[id] = unit.Name
			}
		}
	}
	processed := map[string]bool{}
	for _, p := range withStorage {
		unit := p.Unit
		if unit == "" {
			if unit = unitOfPod[p.ProviderID]; unit == "" {
				continue
			}
		}
		if err := run.processFilesystems(unit, p, processed); err != nil {
			return errors.Annotatef(err, "processing filesystem info for unit %q", unit)
		}
	}
	if err := run.cleanupOrphans(processed); err != nil {
		return errors.Annotatef(err, "deleting orphaned filesystems for %s", run.app.Name)
	}
	if err := run.applyVolumes(); err != nil {
		return errors.Annotatef(err, "updating volume information for %s", run.app.Name)
	}
	if err := run.applyFilesystems(); err != nil {
		return errors.Annotatef(err, "updating filesystem information for %s", run.app.Name)
	}
	return nil
}

func (run *unitsRun) addUnit(props podProps) error {
	_, err := run.addUnitNamed(props)
	return err
}

func (run *unitsRun) addUnitNamed(props podProps) (string, error) {
	tx, a := run.tx, run.app
	seq, err := tx.nextSequence(a.Model, "unit/"+a.Name)
	if err != nil {
		return "", err
	}
	u := Unit{Model: a.Model, Name: fmt.Sprintf("%s/%d", a.Name, seq), Application: a.Name, Life: Alive,
		CAASUnit: CAASUnit{
			AgentStatus:    Status{Status: "allocating", Since: tx.now},
			WorkloadStatus: Status{Status: "waiting", Message: "installing agent", Since: tx.now},
		}}
	if err := tx.put(KindUnit, a.Model, u.Name, &unitDoc{Unit: u}, watcher.FieldCreated); err != nil {
		return "", err
	}
	if err := tx.addUnitStorage(a, u.Name); err != nil {
		return "", err
	}
	return u.Name, run.updateUnit(u.Name, props)
}

func (run *unitsRun) updateUnit(name string, props podProps) error {
	d, err := getUnit(run.tx, run.model, name)
	if err != nil {
		return err
	}
	if props.container != nil {
		c := *props.container
		d.Container = &c
	}
	if props.agentStatus != nil {
		s := *props.agentStatus
		s.Since = run.tx.now
		d.AgentStatus = s
	}
	if props.containerStatus != nil {
		s := *props.containerStatus
		s.Since = run.tx.now
		d.ContainerStatus = s
	}
	return run.tx.put(KindUnit, run.model, name, &d, FieldStatus)
}

func (run *unitsRun) removeUnit(name string) error {
	if err := run.tx.detachUnitStorage(run.model, name); err != nil {
		return err
	}
	return run.tx.remove(KindUnit, run.model, name)
}

// processFilesystems is processFilesystemParams (§4.5).
func (run *unitsRun) processFilesystems(unit string, p Pod, processed map[string]bool) error {
	tx, model := run.tx, run.model
	groups := map[string][]PodFilesystem{}
	for _, f := range p.Filesystems {
		groups[f.StorageName] = append(groups[f.StorageName], f)
	}
	sis, err := unitStorage(tx, model, unit)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		infos := groups[name]
		for _, si := range sis {
			if len(infos) == 0 {
				break
			}
			if si.StorageName != name {
				continue
			}
			fs, err := instanceFilesystem(tx, model, si.ID)
			if err != nil {
				return err
			}
			info := infos[0]
			infos = infos[1:]
			processed[info.FilesystemID] = true
			tag := FilesystemTag(fs.ID)
			run.fsByTag[tag] = fs.ID
			if info.Status != "pending" {
				run.fsUpdates[tag] = fsUpdate{unit: unit, size: info.Size, id: info.FilesystemID,
					mountPoint: info.MountPoint, readOnly: info.ReadOnly}
			}
			run.fsStatus[tag] = Status{Status: info.Status, Message: info.Info, Data: info.Data}
			if fs.VolumeID == "" || info.Volume == nil {
				continue
			}
			vol := info.Volume
			vtag := VolumeTag(fs.VolumeID)
			run.volByTag[vtag] = fs.VolumeID
			if vol.Status != "pending" {
				run.volUpdates[vtag] = volUpdate{unit: unit, size: vol.Size, id: vol.VolumeID,
					persistent: vol.Persistent, readOnly: info.ReadOnly}
			}
			run.volStatus[vtag] = Status{Status: vol.Status, Message: vol.Info, Data: vol.Data}
		}
	}
	return nil
}

// cleanupOrphans destroys the storage of filesystems whose provider id a
// pod reported again while their storage instance has no owner.
func (run *unitsRun) cleanupOrphans(processed map[string]bool) error {
	if len(processed) == 0 {
		return nil // no filesystem can qualify: skip reading them all
	}
	tx, model := run.tx, run.model
	fss, err := allFilesystems(tx, model)
	if err != nil {
		return err
	}
	for _, fs := range fss {
		if fs.Info == nil || !processed[fs.Info.FilesystemID] || fs.StorageID == "" {
			continue
		}
		var si storageInstanceDoc
		ok, err := get(tx, KindStorageInstance, model, fs.StorageID, &si)
		if err != nil {
			return err
		}
		if !ok || si.Owner != "" {
			continue
		}
		if err := tx.remove(KindStorageInstance, model, si.ID); err != nil {
			return err
		}
		d := filesystemDoc{Filesystem: fs}
		if _, err := get(tx, KindFilesystem, model, fs.ID, &d); err != nil {
			return err
		}
		d.Life, d.StorageID, d.Attachment = Dying, "", nil
		if err := tx.put(KindFilesystem, model, fs.ID, &d, watcher.FieldLife); err != nil {
			return err
		}
	}
	return nil
}

func (run *unitsRun) applyVolumes() error {
	tx, model := run.tx, run.model
	for _, tag := range slices.Sorted(maps.Keys(run.volUpdates)) {
		up := run.volUpdates[tag]
		id := run.volByTag[tag]
		v, err := getVolume(tx, model, id)
		if err != nil {
			return err
		}
		if v.Info == nil {
			if err := tx.setVolumeInfo(model, id, VolumeInfo{VolumeID: up.id, Size: up.size, Persistent: up.persistent}); err != nil {
				return err
			}
			if v, err = getVolume(tx, model, id); err != nil {
				return err
			}
		}
		i := slices.IndexFunc(v.Attachments, func(a VolumeAttachment) bool { return a.Unit == up.unit })
		if i < 0 {
			return errors.NotFoundf("volume %s attachment to unit %s", id, up.unit)
		}
		v.Attachments[i].Info = &VolumeAttachmentInfo{ReadOnly: up.readOnly}
		if err := tx.put(KindVolume, model, id, &v, "attachment"); err != nil {
			return err
		}
	}
	for _, tag := range slices.Sorted(maps.Keys(run.volStatus)) {
		s := run.volStatus[tag]
		id := run.volByTag[tag]
		v, err := getVolume(tx, model, id)
		if err != nil {
			return err
		}
		if err := validateStorageStatus(s, v.Info != nil); err != nil {
			return errors.Annotatef(err, "volume %s", id)
		}
		s.Since = tx.now
		v.Status = s
		if err := tx.put(KindVolume, model, id, &v, FieldStatus); err != nil {
			return err
		}
	}
	return nil
}

func (run *unitsRun) applyFilesystems() error {
	tx, model := run.tx, run.model
	get1 := func(id string) (filesystemDoc, error) {
		var d filesystemDoc
		ok, err := get(tx, KindFilesystem, model, id, &d)
		if err == nil && !ok {
			err = errors.NotFoundf("filesystem %q", id)
		}
		return d, err
	}
	for _, tag := range slices.Sorted(maps.Keys(run.fsUpdates)) {
		up := run.fsUpdates[tag]
		id := run.fsByTag[tag]
		fs, err := get1(id)
		if err != nil {
			return err
		}
		if fs.Info == nil {
			if up.id == "" {
				return errors.NotValidf("filesystem %q: filesystem ID not set", id)
			}
			if fs.VolumeID != "" {
				v, err := getVolume(tx, model, fs.VolumeID)
				if err != nil {
					return err
				}
				i := slices.IndexFunc(v.Attachments, func(a VolumeAttachment) bool { return a.Unit == up.unit })
				if i < 0 || v.Attachments[i].Info == nil {
					return errors.Errorf("cannot set info for filesystem %q: backing volume %q is not attached", id, fs.VolumeID)
				}
			}
			fs.Info = &FilesystemInfo{Size: up.size, Pool: fs.Pool, FilesystemID: up.id}
		}
		if fs.Attachment == nil || fs.Attachment.Unit != up.unit {
			return errors.NotFoundf("filesystem %q attachment to unit %q", id, up.unit)
		}
		fs.Attachment.Info = &FilesystemAttachmentInfo{MountPoint: up.mountPoint, ReadOnly: up.readOnly}
		if err := tx.put(KindFilesystem, model, id, &fs, "info"); err != nil {
			return err
		}
	}
	for _, tag := range slices.Sorted(maps.Keys(run.fsStatus)) {
		s := run.fsStatus[tag]
		id := run.fsByTag[tag]
		fs, err := get1(id)
		if err != nil {
			return err
		}
		if err := validateStorageStatus(s, fs.Info != nil); err != nil {
			return errors.Annotatef(err, "filesystem %q", id)
		}
		s.Since = tx.now
		fs.Status = s
		if err := tx.put(KindFilesystem, model, id, &fs, FieldStatus); err != nil {
			return err
		}
	}
	return nil
}

// CAASUnitParams describe a unit for AddCAASUnit.
type CAASUnitParams struct {
	// ProviderID, when set, binds the unit to a known pod (Juju's
	// AddUnitParams.ProviderId); otherwise the unit waits for a pod.
	ProviderID string
	Address    string
	Ports      []string
}

// AddCAASUnit adds a unit (and its storage) to an alive Kubernetes
// application, as Juju's AddUnit.
func (st *State) AddCAASUnit(ctx context.Context, model, app string, p CAASUnitParams) (Unit, error) {
	var u Unit
	err := st.update(ctx, func(tx *txn) error {
		a, err := getApplication(tx, model, app)
		if err != nil {
			return err
		}
		if a.Life != Alive {
			return errors.NotValidf("adding a unit to %s application %q", a.Life, app)
		}
		run := &unitsRun{tx: tx, model: model, app: a}
		props := podProps{}
		if p.ProviderID != "" {
			props.container = &CloudContainer{ProviderID: p.ProviderID, Address: p.Address, Ports: slices.Clone(p.Ports)}
		}
		name, err := run.addUnitNamed(props)
		if err != nil {
			return err
		}
		var d unitDoc
		if _, err := get(tx, KindUnit, model, name, &d); err != nil {
			return err
		}
		u = d.Unit
		return nil
	})
	return u, err
}
