package dashboard

import (
	"slices"
	"testing"

	"github.com/provisiond/provisiond/rpc/params"
)

func TestAlertsCallOutErrorsAndStuckStates(t *testing.T) {
	st := &params.ModelStatus{
		Model: "default", Life: "alive",
		Machines: []params.MachineStatus{
			{ID: "0", Life: "alive", AgentStatus: params.StatusInfo{Status: "started"}, InstanceStatus: params.StatusInfo{Status: "running"},
				Containers: []params.MachineStatus{
					{ID: "0/lxd/0", Life: "alive", AgentStatus: params.StatusInfo{Status: "pending"},
						InstanceStatus: params.StatusInfo{Status: "provisioning error", Message: "no image", Since: "2026-01-02T15:04:05Z"}},
				}},
			{ID: "1", Life: "dying", AgentStatus: params.StatusInfo{Status: "started"}},
			{ID: "2", Life: "alive", AgentStatus: params.StatusInfo{Status: "pending"}},
		},
		Applications: []params.ApplicationStatus{{Name: "db", Life: "alive", Units: []params.UnitStatus{
			{Name: "db/0", Life: "alive", WorkloadStatus: params.StatusInfo{Status: "active"}},
			{Name: "db/1", Life: "alive", WorkloadStatus: params.StatusInfo{Status: "blocked", Message: "needs a relation"}},
		}}},
		Storage: params.StorageStatus{Volumes: []params.ModelVolumeStatus{{ID: "0", Life: "alive", Status: params.StatusInfo{Status: "attached"}}}},
	}
	var got []string
	for _, a := range alerts(st) {
		got = append(got, a.String())
	}
	want := []string{
		"error machine 0/lxd/0: provisioning error: no image", // the worst of its statuses, with its message
		"error unit db/1: blocked: needs a relation",
		"warn machine 1: dying",
		"warn machine 2: pending",
	}
	if !slices.Equal(got, want) {
		t.Errorf("alerts:\n%q\nwant\n%q", got, want)
	}
	if a := alerts(&params.ModelStatus{Life: "alive"}); a == nil || len(a) != 0 {
		t.Errorf("a quiet model's alerts: %#v, want an empty list", a)
	}
}

// Storage left behind is called out: an instance attached to no unit
// (detached), a filesystem or volume the daemon marks orphaned; storage
// in use is not.
func TestAlertsCallOutStorageLeftBehind(t *testing.T) {
	st := &params.ModelStatus{Model: "k8s", Life: "alive", Storage: params.StorageStatus{
		Instances: []params.StorageInstanceStatus{{ID: "data/0", Life: "alive", Unit: "db/0"}, {ID: "data/1", Life: "alive"}},
		Filesystems: []params.FilesystemStatus{
			{ID: "db/0/0", StorageID: "data/0", Life: "alive", Status: params.StatusInfo{Status: "attached"}},
			{ID: "db/2/0", Life: "dying", Status: params.StatusInfo{Status: "detached"}, Orphaned: true},
		},
		Volumes: []params.ModelVolumeStatus{{ID: "3", Life: "alive", Status: params.StatusInfo{Status: "detached"}, Orphaned: true}},
	}}
	var got []string
	for _, a := range alerts(st) {
		got = append(got, a.String())
	}
	want := []string{
		"warn filesystem db/2/0: orphaned: attached to nothing, of no storage instance",
		"warn volume 3: orphaned: attached to nothing, of no storage instance",
		"warn storage data/1: detached: attached to no unit",
	}
	if !slices.Equal(got, want) {
		t.Errorf("alerts:\n%q\nwant\n%q", got, want)
	}
}
