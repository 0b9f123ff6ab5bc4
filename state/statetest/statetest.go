// Package statetest opens real, initialized state databases for tests and
// builds fixtures in them. There are no mocks: every test gets its own
// bbolt file in t.TempDir(), or, when a test binary sets Store, its own
// store of another engine (the state package's tests run on etcd that way:
// one embedded etcd per binary, a prefix per test); either is closed by
// t.Cleanup.
package statetest

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/boltstore"
	"github.com/provisiond/provisiond/watcher"
)

// Store, when set, opens the store of each state New makes instead of a
// bbolt file in t.TempDir(): it returns the opener of a new, empty store
// for the test t, which opens it with the feed it is given. A TestMain sets it before the tests run
// and never changes it while they do.
var Store func(t testing.TB) func(store.Feed) (store.Store, error)

// What New initializes the controller with. The UUIDs are fixed so golden
// files can name them.
const (
	ControllerUUID      = "deadbeef-0bad-400d-8000-4b1d0d000001"
	ControllerModelUUID = "deadbeef-0bad-400d-8000-4b1d0d000002"
	DefaultModelUUID    = "deadbeef-0bad-400d-8000-4b1d0d000003"

	AdminPassword = "admin-password-for-tests"
	// AgentPassword and AgentNonce are the controller agent's (machine 0
	// of the controller model).
	AgentPassword = "controller-agent-password-for-tests"
	AgentNonce    = "user-admin:bootstrap"

	// MachinePassword is a valid agent password for fixture machines.
	MachinePassword = "machine-agent-password-for-tests"
)

// Options adjusts New. The zero value is what New uses.
type Options struct {
	// Hub, if set, receives the state's change sets.
	Hub *watcher.Hub
	// Now is the state's clock; defaults to time.Now.
	Now func() time.Time
	// Uninitialized skips Initialize.
	Uninitialized bool
}

// New returns a state in a new temporary database, initialized with the
// constants above. It is closed when the test ends.
func New(t testing.TB) *state.State {
	t.Helper()
	return NewWithOptions(t, Options{})
}

// NewWithOptions is New with options.
func NewWithOptions(t testing.TB, opts Options) *state.State {
	t.Helper()
	so := state.Options{Hub: opts.Hub, Now: opts.Now}
	var st *state.State
	var err error
	if Store != nil {
		st, err = OpenStore(Store(t), so)
	} else {
		st, err = OpenBolt(filepath.Join(t.TempDir(), "state.db"), so)
	}
	if err != nil {
		t.Fatalf("statetest: opening state: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("statetest: closing state: %v", err)
		}
	})
	if !opts.Uninitialized {
		if _, err := st.Initialize(t.Context(), InitArgs()); err != nil {
			t.Fatalf("statetest: initializing state: %v", err)
		}
	}
	return st
}

// OpenBolt opens the state in the bbolt file at path (created if missing)
// as the daemon does; the caller closes it. For tests that open a file
// again, or open it twice.
func OpenBolt(path string, opts state.Options) (*state.State, error) {
	return OpenStore(func(feed store.Feed) (store.Store, error) {
		return boltstore.Open(path, boltstore.Options{Feed: feed, InitialMmapSize: boltstore.MmapSize})
	}, opts)
}

// OpenStore opens the state in the store open returns, handing open the
// feed of opts.Hub (a hub of its own if nil, which State.Hub returns);
// the caller closes it.
func OpenStore(open func(store.Feed) (store.Store, error), opts state.Options) (*state.State, error) {
	if opts.Hub == nil {
		opts.Hub = watcher.NewHub()
	}
	s, err := open(state.Feed(opts.Hub, opts.Logger))
	if err != nil {
		return nil, err
	}
	return state.Open(s, opts)
}

// InitArgs returns the arguments New initializes with.
func InitArgs() state.InitArgs {
	return state.InitArgs{
		ControllerUUID:      ControllerUUID,
		ControllerModelUUID: ControllerModelUUID,
		DefaultModelUUID:    DefaultModelUUID,
		AdminPassword:       AdminPassword,
		AgentPassword:       AgentPassword,
		AgentNonce:          AgentNonce,
		ControllerConfig:    map[string]any{"api-port": 17070},
		ModelConfig:         map[string]any{"logging-config": "<root>=INFO"},
	}
}

// AddModel adds a model or fails the test.
func AddModel(t testing.TB, st *state.State, name string, typ state.ModelType) state.Model {
	t.Helper()
	m, err := st.AddModel(t.Context(), name, typ, nil)
	if err != nil {
		t.Fatalf("statetest: adding model %q: %v", name, err)
	}
	return m
}

// AddMachine adds a machine with MachinePassword and the given nonce
// (provisioned when nonce is not empty) or fails the test.
func AddMachine(t testing.TB, st *state.State, model, nonce string, jobs ...string) state.Machine {
	t.Helper()
	p := state.MachineParams{Jobs: jobs, Password: MachinePassword, Nonce: nonce}
	if nonce != "" {
		p.InstanceID = "inst-" + nonce
	}
	m, err := st.AddMachine(t.Context(), model, p)
	if err != nil {
		t.Fatalf("statetest: adding machine to %s: %v", model, err)
	}
	return m
}

// AddUser adds a user or fails the test.
func AddUser(t testing.TB, st *state.State, name, password, access string) state.User {
	t.Helper()
	u, err := st.AddUser(t.Context(), name, name, password, access)
	if err != nil {
		t.Fatalf("statetest: adding user %q: %v", name, err)
	}
	return u
}
