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

// TestProvisionerBanner: the banner shows only when the model's
// provisioner agent is down and the model has work waiting for it, and
// says what.
func TestProvisionerBanner(t *testing.T) {
	down := &params.AgentPresence{Status: "down", Since: "2026-01-02T15:04:05Z"}
	iaas := func(p *params.AgentPresence) *params.ModelStatus {
		return &params.ModelStatus{Type: "iaas", Life: "alive", ProvisionerAgent: p, Machines: []params.MachineStatus{
			{ID: "0", Life: "alive", InstanceID: "i-0", Containers: []params.MachineStatus{{ID: "0/lxd/0", Life: "alive"}}},
			{ID: "1", Life: "alive"},
			{ID: "2", Life: "alive"},
			{ID: "3", Life: "dead", InstanceID: "i-3"},
		}}
	}
	caas := &params.ModelStatus{Type: "caas", Life: "alive", ProvisionerAgent: down, Applications: []params.ApplicationStatus{
		{Name: "ok", Life: "alive", Scale: 1, Units: []params.UnitStatus{{Name: "ok/0"}}},
		{Name: "up", Life: "alive", Scale: 2, Units: []params.UnitStatus{{Name: "up/0"}}},
		{Name: "gone", Life: "dying"},
	}}
	for _, tt := range []struct {
		name string
		st   *params.ModelStatus
		want string
	}{
		{"alive", iaas(&params.AgentPresence{Status: "alive"}), ""},
		{"not tracked", iaas(nil), ""},
		{"down with machines waiting", iaas(down), "No provisioner agent is connected to this model, and it has work waiting: 2 machines to start, 1 machine to stop."},
		{"down with nothing waiting", &params.ModelStatus{Type: "iaas", ProvisionerAgent: down, Machines: []params.MachineStatus{{ID: "0", Life: "alive", InstanceID: "i-0"}}}, ""},
		{"caas", caas, "No provisioner agent is connected to this model, and it has work waiting: 1 application to scale, 1 application to remove."},
	} {
		b := provisionerBanner(tt.st)
		got := ""
		if b != nil {
			got = b.Message
			if b.Since != down.Since {
				t.Errorf("%s: since %q, want the agent's", tt.name, b.Since)
			}
		}
		if got != tt.want {
			t.Errorf("%s: banner %q, want %q", tt.name, got, tt.want)
		}
	}
}
