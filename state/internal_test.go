package state

import (
	"slices"
	"testing"

	"github.com/juju/errors"
)

// The expected values were computed with github.com/juju/utils/v3
// (UserPasswordHash, AgentPasswordHash), so agents and clients that hash
// the Juju way agree with us.
func TestPasswordHashesMatchJuju(t *testing.T) {
	t.Parallel()
	if got, want := userPasswordHash("admin-password", "c2FsdHNhbHRzYWx0"), "At7jv7es06t5IXDrCS1jLg1T"; got != want {
		t.Errorf("userPasswordHash = %q, want %q", got, want)
	}
	if got, want := agentPasswordHash("controller-agent-password"), "nOCGglpDs0hp+NX0GooY0x0N"; got != want {
		t.Errorf("agentPasswordHash = %q, want %q", got, want)
	}
	if s := newSalt(); len(s) != 16 {
		t.Errorf("salt %q: want 16 base64 characters (12 bytes)", s)
	}
}

func TestNewUUID(t *testing.T) {
	t.Parallel()
	a, b := newUUID(), newUUID()
	if !IsValidUUID(a) || !IsValidUUID(b) || a == b {
		t.Fatalf("newUUID gave %q and %q", a, b)
	}
	if a[14] != '4' || !slices.Contains([]byte("89ab"), a[19]) {
		t.Errorf("%q is not a version 4, RFC 4122 variant UUID", a)
	}
}

func TestUserName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"admin", "admin", true},
		{"admin@local", "admin", true},
		{"user-admin", "admin", true},
		{"user-admin@local", "admin", true},
		{"bob-smith", "bob-smith", true},
		{"bob@external", "", false},
		{"user-bob@external", "", false},
		{"user-", "", false},
		{"", "", false},
		{"machine-0", "machine-0", true}, // a valid user name; no such user
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := userName(tc.in)
			if tc.ok && (err != nil || got != tc.want) {
				t.Errorf("userName(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
			if !tc.ok && !errors.Is(err, errors.NotValid) {
				t.Errorf("userName(%q) = %q, %v; want NotValid", tc.in, got, err)
			}
		})
	}
}

func TestCompareMachineIDs(t *testing.T) {
	t.Parallel()
	ids := []string{"10", "0/lxd/1", "2", "0", "1", "0/lxd/0", "0/kvm/0", "0/lxd/10", "0/lxd/2"}
	slices.SortFunc(ids, compareMachineIDs)
	want := []string{"0", "0/kvm/0", "0/lxd/0", "0/lxd/1", "0/lxd/2", "0/lxd/10", "1", "2", "10"}
	if !slices.Equal(ids, want) {
		t.Errorf("sorted = %v, want %v", ids, want)
	}
}

func TestConfigChange(t *testing.T) {
	t.Parallel()
	old, _ := normalizeConfig(map[string]any{"a": 1, "b": "x"})
	for _, tc := range []struct {
		name    string
		set     map[string]any
		unset   []string
		changed bool
	}{
		{"nothing", nil, nil, false},
		{"same int", map[string]any{"a": 1}, nil, false},
		{"same float", map[string]any{"a": 1.0}, nil, false},
		{"unset missing", nil, []string{"zz"}, false},
		{"new value", map[string]any{"a": 2}, nil, true},
		{"new key", map[string]any{"c": nil}, nil, true},
		{"unset present", nil, []string{"b"}, true},
		{"set and unset same", map[string]any{"b": "x"}, []string{"b"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, err := normalizeConfig(tc.set)
			if err != nil {
				t.Fatal(err)
			}
			next, changed := applyConfig(old, set, tc.unset)
			if changed != tc.changed {
				t.Errorf("changed = %v (next %v), want %v", changed, next, tc.changed)
			}
			if len(old) != 2 {
				t.Errorf("applyConfig modified its input: %v", old)
			}
		})
	}
	if _, err := normalizeConfig(map[string]any{"f": func() {}}); !errors.Is(err, errors.NotValid) {
		t.Errorf("unencodable config: %v, want NotValid", err)
	}
}

// The removal of a dying model's last entity removes the model, its name
// and its sequences in the same transaction. No entity can be removed
// through the API yet, so this drives txn.remove directly.
func TestRemovingLastEntityRemovesDyingModel(t *testing.T) {
	t.Parallel()
	st, err := openBolt(t.TempDir() + "/state.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Initialize(t.Context(), InitArgs{AdminPassword: "pw", AgentPassword: "agent-password-long-enough", AgentNonce: "n"}); err != nil {
		t.Fatal(err)
	}
	m, err := st.AddModel(t.Context(), "prod", ModelTypeIAAS, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := st.AddMachine(t.Context(), m.UUID, MachineParams{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, removed, err := st.RemoveModel(t.Context(), m.UUID); err != nil || removed {
		t.Fatalf("RemoveModel = %v, %v", removed, err)
	}
	removeMachine := func(id string) {
		t.Helper()
		if err := st.update(t.Context(), func(tx *txn) error { return tx.remove(KindMachine, m.UUID, id) }); err != nil {
			t.Fatal(err)
		}
	}
	removeMachine("0")
	if got, err := st.Model(t.Context(), m.UUID); err != nil || got.Life != Dying {
		t.Fatalf("after removing one of two machines: %+v, %v", got, err)
	}
	removeMachine("1")
	if _, err := st.Model(t.Context(), m.UUID); !errors.Is(err, errors.NotFound) {
		t.Fatalf("model left after its last machine: %v", err)
	}
	err = st.view(t.Context(), func(r reader) error {
		if uuids, err := modelNameIndex.lookup(r, "", "prod"); err != nil || len(uuids) != 0 {
			t.Errorf("name index entry left: %v (%v)", uuids, err)
		}
		return scan(r, kindSequence+"/"+m.UUID+"/", func(k string, _ []byte) error {
			t.Errorf("sequence %q left", k)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}
