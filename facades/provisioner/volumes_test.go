package provisioner_test

import (
	"context"
	"maps"
	"testing"

	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// ProvisioningInfo's volumes come from the model's storage registry and
// pool manager (storage.Manager.VolumeParams), in both versions: a model
// pool gives its provider and validated attributes, a provider type
// stands for itself, no pool is storage-default-block-source else loop,
// and an unknown or invalid pool fails the machine's item.
func TestProvisionerVolumes(t *testing.T) {
	f := testkit.NewProvFixture(t)
	st, model := f.St, f.Model
	ctrlUUID := f.D.Credentials().ControllerUUID
	mgr, err := st.StorageManager(t.Context(), model)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mgr.Create("fast", "ebs", map[string]any{"persistent": true, "volume-type": "gp3"}); err != nil {
		t.Fatal(err)
	}
	// Pools written past the manager are validated when used.
	if err := st.AddStoragePool(t.Context(), model, "bad", "ebs", map[string]any{"persistent": "maybe"}); err != nil {
		t.Fatal(err)
	}
	if err := st.AddStoragePool(t.Context(), model, "sticky-loop", "loop", map[string]any{"persistent": true}); err != nil {
		t.Fatal(err)
	}
	if err := st.UpdateModelConfig(t.Context(), model, map[string]any{"resource-tags": "team=infra"}, nil); err != nil {
		t.Fatal(err)
	}
	// machine adds an unprovisioned machine with vols and returns its tag
	// and its volumes' tags.
	machine := func(t *testing.T, vols ...state.VolumeParams) (string, []string) {
		t.Helper()
		m, err := st.AddMachine(t.Context(), model, state.MachineParams{Series: "trusty", Volumes: vols})
		if err != nil {
			t.Fatal(err)
		}
		vs, err := st.MachineVolumes(t.Context(), model, m.ID)
		if err != nil || len(vs) != len(vols) {
			t.Fatalf("volumes %+v, %v", vs, err)
		}
		var tags []string
		for _, v := range vs {
			tags = append(tags, "volume-"+v.ID)
		}
		return "machine-" + m.ID, tags
	}
	info := func(t *testing.T, tag string) *params.ProvisioningInfo {
		t.Helper()
		res := testkit.MustCall[params.ProvisioningInfoResults](t, f.Ctrl, 11, "ProvisioningInfo", testkit.Ents(tag))
		if res.Results[0].Error != nil || res.Results[0].Result == nil {
			t.Fatalf("ProvisioningInfo(%s) = %+v", tag, res.Results[0].Error)
		}
		return res.Results[0].Result
	}
	v1info := func(t *testing.T, tag string) *params.V1ProvisioningInfo {
		t.Helper()
		res := testkit.MustCall[params.V1ProvisioningInfoResults](t, f.Ctrl, 1, "ProvisioningInfo", testkit.V1Ents(tag))
		if res.Results[0].Error != nil || res.Results[0].Result == nil {
			t.Fatalf("ProvisioningInfo v1(%s) = %+v", tag, res.Results[0].Error)
		}
		return res.Results[0].Result
	}
	v11Tags := map[string]string{"team": "infra", "juju-model-uuid": model, "juju-controller-uuid": ctrlUUID}
	v1Tags := map[string]string{"juju-env-uuid": model}

	t.Run("model pool with attributes", func(t *testing.T) {
		m, vols := machine(t, state.VolumeParams{Pool: "fast", Size: 2048, ReadOnly: true})
		got := info(t, m).Volumes
		if len(got) != 1 {
			t.Fatalf("volumes = %+v", got)
		}
		v := got[0]
		if v.VolumeTag != vols[0] || v.Size != 2048 || v.Provider != "ebs" ||
			!maps.Equal(v.Attributes, map[string]any{"persistent": true, "volume-type": "gp3"}) || !maps.Equal(v.Tags, v11Tags) {
			t.Errorf("volume = %+v", v)
		}
		if a := v.Attachment; a == nil || *a != (params.VolumeAttachmentParams{VolumeTag: vols[0], MachineTag: m, Provider: "ebs", ReadOnly: true}) {
			t.Errorf("attachment = %+v", v.Attachment)
		}
		old := v1info(t, m).Volumes
		if len(old) != 1 || old[0].Provider != "ebs" || old[0].Attributes["volume-type"] != "gp3" ||
			!maps.Equal(old[0].Tags, v1Tags) || old[0].Attachment == nil || !old[0].Attachment.ReadOnly ||
			old[0].Attachment.Provider != "ebs" {
			t.Errorf("v1 volumes = %+v", old)
		}
	})

	t.Run("provider type as pool", func(t *testing.T) {
		// cinder is the environ's (made with the instance); loop is common
		// and dynamic (left to the storage provisioner) in both versions.
		m, vols := machine(t, state.VolumeParams{Pool: "cinder", Size: 512}, state.VolumeParams{Pool: "loop", Size: 512})
		got := info(t, m).Volumes
		if len(got) != 1 || got[0].VolumeTag != vols[0] || got[0].Provider != "cinder" || got[0].Attributes != nil ||
			got[0].Size != 512 || got[0].Attachment == nil || got[0].Attachment.Provider != "cinder" {
			t.Errorf("volumes = %+v", got)
		}
		old := v1info(t, m).Volumes
		if len(old) != 1 || old[0].VolumeTag != vols[0] || old[0].Provider != "cinder" || old[0].Attributes != nil {
			t.Errorf("v1 volumes = %+v", old)
		}
	})

	t.Run("default pool", func(t *testing.T) {
		m, vols := machine(t, state.VolumeParams{Size: 100})
		// No storage-default-block-source: loop, left to the storage
		// provisioner.
		if got := info(t, m).Volumes; len(got) != 0 {
			t.Errorf("loop default: volumes = %+v", got)
		}
		if got := v1info(t, m).Volumes; len(got) != 0 {
			t.Errorf("loop default v1: volumes = %+v", got)
		}
		if err := st.UpdateModelConfig(t.Context(), model, map[string]any{"storage-default-block-source": "fast"}, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = st.UpdateModelConfig(context.Background(), model, nil, []string{"storage-default-block-source"})
		})
		got := info(t, m).Volumes
		if len(got) != 1 || got[0].VolumeTag != vols[0] || got[0].Provider != "ebs" || got[0].Size != 100 ||
			got[0].Attributes["volume-type"] != "gp3" {
			t.Errorf("default block source: volumes = %+v", got)
		}
		if old := v1info(t, m).Volumes; len(old) != 1 || old[0].Provider != "ebs" {
			t.Errorf("default block source v1: volumes = %+v", old)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, c := range []struct {
			pool string
			want func(id string) itemErr
		}{
			{"nope", func(id string) itemErr {
				return itemErr{`getting volume "` + id + `" parameters: pool "nope" not found`, params.CodeNotFound}
			}},
			{"bad", func(id string) itemErr {
				return itemErr{`getting volume "` + id + `" parameters: pool "bad": validating common storage config: persistent: expected bool, got string("maybe")`, params.CodeNotValid}
			}},
			{"sticky-loop", func(id string) itemErr {
				return itemErr{`getting volume "` + id + `" parameters: pool "sticky-loop": machine scoped storage provider "sticky-loop" does not support persistent storage`, params.CodeNotValid}
			}},
		} {
			m, vols := machine(t, state.VolumeParams{Pool: c.pool, Size: 1})
			want := c.want(vols[0][len("volume-"):])
			res := testkit.MustCall[params.ProvisioningInfoResults](t, f.Ctrl, 11, "ProvisioningInfo", testkit.Ents(m, "machine-0"))
			checkItem(t, c.pool, res.Results[0].Error, want)
			checkItem(t, c.pool+": other machine", res.Results[1].Error, noErr)
			v1 := testkit.MustCall[params.V1ProvisioningInfoResults](t, f.Ctrl, 1, "ProvisioningInfo", testkit.V1Ents(m))
			checkV1Item(t, c.pool+" v1", v1.Results[0].Error, want)
		}
	})
}
