package state_test

import (
	"errors"
	"testing"

	jujuerrors "github.com/juju/errors"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
	"github.com/provisiond/provisiond/storage"
)

func TestAddIAASApplication(t *testing.T) {
	st := statetest.New(t)
	m := statetest.AddModel(t, st, "vms", state.ModelTypeIAAS)
	k8s := statetest.AddModel(t, st, "k8s", state.ModelTypeCAAS)
	meta, err := charm.ParseMeta([]byte("name: db\nstorage:\n  disk:\n    type: block\n    minimum-size: 2G\n  logs:\n    type: filesystem\n    multiple:\n      range: 0-2\n"))
	if err != nil {
		t.Fatal(err)
	}
	ch := state.Charm{URL: "local:db-0", Meta: meta}
	if err := st.AddStoragePool(t.Context(), m.UUID, "files", "tmpfs", nil); err != nil {
		t.Fatal(err)
	}

	rev := st.Revision()
	for _, tc := range []struct {
		name string
		p    state.IAASApplicationParams
		kind error
		msg  string
	}{
		{"bad name", state.IAASApplicationParams{Name: "DB", Charm: ch}, jujuerrors.NotValid, `application name "DB" not valid`},
		{"no charm", state.IAASApplicationParams{Name: "db"}, jujuerrors.NotValid, `application "db" without charm metadata not valid`},
		{"trust not bool", state.IAASApplicationParams{Name: "db", Charm: ch, Config: map[string]any{"trust": "yes"}}, jujuerrors.NotValid, "trust yes (want a bool) not valid"},
		{"undeclared storage", state.IAASApplicationParams{Name: "db", Charm: ch, Storage: map[string]storage.Constraints{"x": {}}},
			jujuerrors.NotValid, `storage "x" (charm "db" has no such storage) not valid`},
		{"too small", state.IAASApplicationParams{Name: "db", Charm: ch, Storage: map[string]storage.Constraints{"disk": {Size: 1024}}},
			jujuerrors.NotValid, `storage "disk" size 1024M (charm needs at least 2048M) not valid`},
		{"unknown pool", state.IAASApplicationParams{Name: "db", Charm: ch, Storage: map[string]storage.Constraints{"disk": {Pool: "nope"}}},
			jujuerrors.NotFound, `storage "disk": pool "nope" not found`},
		{"filesystem pool for block", state.IAASApplicationParams{Name: "db", Charm: ch, Storage: map[string]storage.Constraints{"disk": {Pool: "files"}}},
			jujuerrors.NotValid, `storage "disk": pool "files" (provider tmpfs) for block storage not valid`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := st.AddIAASApplication(t.Context(), m.UUID, tc.p)
			if !errors.Is(err, tc.kind) || err.Error() != tc.msg {
				t.Errorf("err = %v; want %q", err, tc.msg)
			}
		})
	}
	if _, err := st.AddIAASApplication(t.Context(), k8s.UUID, state.IAASApplicationParams{Name: "db", Charm: ch}); !errors.Is(err, jujuerrors.NotSupported) {
		t.Errorf("on a caas model: %v", err)
	}
	if st.Revision() != rev {
		t.Errorf("refused adds wrote")
	}

	a, err := st.AddIAASApplication(t.Context(), m.UUID, state.IAASApplicationParams{Name: "db", Charm: ch, Trust: true,
		Constraints: cores2(), Storage: map[string]storage.Constraints{"logs": {Pool: "files", Count: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]storage.Constraints{"disk": {Count: 1, Size: 2048}, "logs": {Pool: "files", Count: 2, Size: 1024}}
	if a.CharmURL != "local:db-0" || a.Constraints.String() != "cores=2" || len(a.StorageConstraints) != 2 ||
		a.StorageConstraints["disk"] != want["disk"] || a.StorageConstraints["logs"] != want["logs"] {
		t.Errorf("application = %+v", a)
	}
	if cfg, err := st.ApplicationConfig(t.Context(), m.UUID, "db"); err != nil || cfg["trust"] != true {
		t.Errorf("config = %v, %v", cfg, err)
	}
	if c, err := st.Charm(t.Context(), m.UUID, "local:db-0"); err != nil || c.Meta.Name != "db" {
		t.Errorf("charm = %+v, %v", c, err)
	}
	if _, err := st.AddIAASApplication(t.Context(), m.UUID, state.IAASApplicationParams{Name: "db", Charm: ch}); !errors.Is(err, jujuerrors.AlreadyExists) {
		t.Errorf("duplicate: %v", err)
	}
}

func cores2() state.Constraints {
	n := uint64(2)
	return state.Constraints{Cores: &n}
}
