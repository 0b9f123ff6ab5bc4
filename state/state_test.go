package state_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
	"github.com/provisiond/provisiond/state/store/boltstore"
	"github.com/provisiond/provisiond/watcher"
)

// Change sets are published before a write returns, so an event a write
// caused is already pending when the write returns: assertChange never
// really waits, and assertNoChange's short wait cannot miss one.
const (
	changeTimeout   = 5 * time.Second
	noChangeTimeout = 20 * time.Millisecond
)

func assertChange(t *testing.T, w *watcher.Notify) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), changeTimeout)
	defer cancel()
	if err := w.Next(ctx); err != nil {
		t.Fatalf("expected a change: %v", err)
	}
}

func assertNoChange(t *testing.T, w *watcher.Notify) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), noChangeTimeout)
	defer cancel()
	if err := w.Next(ctx); err != context.DeadlineExceeded {
		t.Fatalf("expected no change, got %v", err)
	}
}

func TestInitializeAndReopen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := statetest.OpenBolt(path, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := st.Initialized(t.Context()); ok || err != nil {
		t.Fatalf("new database: Initialized = %v, %v", ok, err)
	}
	if _, err := st.Controller(t.Context()); !errors.Is(err, errors.NotFound) {
		t.Errorf("Controller before Initialize: %v, want NotFound", err)
	}
	if _, err := st.ControllerIdentity(t.Context()); !errors.Is(err, errors.NotFound) {
		t.Errorf("ControllerIdentity before Initialize: %v, want NotFound", err)
	}
	res, err := st.Initialize(t.Context(), statetest.InitArgs())
	if err != nil {
		t.Fatal(err)
	}
	want := state.InitResult{
		ControllerUUID:      statetest.ControllerUUID,
		ControllerModelUUID: statetest.ControllerModelUUID,
		DefaultModelUUID:    statetest.DefaultModelUUID,
	}
	if res != want {
		t.Errorf("InitResult = %+v, want %+v", res, want)
	}
	if st.Revision() != 1 {
		t.Errorf("Initialize took revision %d, want 1 (one transaction)", st.Revision())
	}
	if _, err := st.Initialize(t.Context(), statetest.InitArgs()); !errors.Is(err, errors.AlreadyExists) {
		t.Errorf("second Initialize: %v, want AlreadyExists", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st, err = statetest.OpenBolt(path, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if ok, err := st.Initialized(t.Context()); !ok || err != nil {
		t.Fatalf("reopened: Initialized = %v, %v", ok, err)
	}
	if st.Revision() != 1 {
		t.Errorf("reopened revision = %d, want 1", st.Revision())
	}
	ctrl, err := st.Controller(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if ctrl.UUID != statetest.ControllerUUID || ctrl.ModelUUID != statetest.ControllerModelUUID ||
		ctrl.Config["api-port"] != 17070.0 {
		t.Errorf("Controller = %+v", ctrl)
	}
	if id, err := st.ControllerIdentity(t.Context()); err != nil || id.UUID != ctrl.UUID || id.ModelUUID != ctrl.ModelUUID {
		t.Errorf("ControllerIdentity = %+v, %v; want the controller's %s, %s", id, err, ctrl.UUID, ctrl.ModelUUID)
	}
	models, err := st.Models(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(models) != 2 ||
		models[0].Name != "controller" || models[0].UUID != statetest.ControllerModelUUID ||
		models[1].Name != "default" || models[1].UUID != statetest.DefaultModelUUID {
		t.Fatalf("Models = %+v", models)
	}
	for _, m := range models {
		if m.Type != state.ModelTypeIAAS || m.Life != state.Alive || m.Config["logging-config"] != "<root>=INFO" {
			t.Errorf("model %+v", m)
		}
	}
	admin, err := st.User(t.Context(), "admin")
	if err != nil || admin.Access != state.AccessSuperuser || admin.CreatedAt.IsZero() {
		t.Errorf("User(admin) = %+v, %v", admin, err)
	}
	m0, err := st.Machine(t.Context(), statetest.ControllerModelUUID, "0")
	if err != nil {
		t.Fatal(err)
	}
	wantM0 := state.Machine{
		Model: statetest.ControllerModelUUID, ID: "0", Life: state.Alive,
		Jobs:  []string{state.JobHostUnits, state.JobManageModel},
		Nonce: statetest.AgentNonce, InstanceID: "controller-0",
	}
	if !machineEqual(m0, wantM0) || !state.IsController(m0) {
		t.Errorf("machine 0 = %+v, want %+v", m0, wantM0)
	}
	if _, err := st.AuthenticateMachine(t.Context(), statetest.ControllerModelUUID, "0", statetest.AgentPassword, statetest.AgentNonce); err != nil {
		t.Errorf("controller agent login after reopen: %v", err)
	}
	if _, err := st.CheckUserPassword(t.Context(), "user-admin", statetest.AdminPassword); err != nil {
		t.Errorf("admin login after reopen: %v", err)
	}
	if ms, err := st.Machines(t.Context(), statetest.DefaultModelUUID); err != nil || len(ms) != 0 {
		t.Errorf("default model machines = %v, %v", ms, err)
	}
	if err := st.Store().(*boltstore.Store).Check(); err != nil {
		t.Errorf("bbolt's check: %v", err)
	}
}

func machineEqual(a, b state.Machine) bool {
	return a.Model == b.Model && a.ID == b.ID && a.Life == b.Life && slices.Equal(a.Jobs, b.Jobs) &&
		a.Nonce == b.Nonce && a.InstanceID == b.InstanceID
}

func TestInitializeGeneratesUUIDs(t *testing.T) {
	t.Parallel()
	st := statetest.NewWithOptions(t, statetest.Options{Uninitialized: true})
	args := statetest.InitArgs()
	args.ControllerUUID, args.ControllerModelUUID, args.DefaultModelUUID = "", "", ""
	res, err := st.Initialize(t.Context(), args)
	if err != nil {
		t.Fatal(err)
	}
	uuids := []string{res.ControllerUUID, res.ControllerModelUUID, res.DefaultModelUUID}
	for _, u := range uuids {
		if !state.IsValidUUID(u) {
			t.Errorf("generated UUID %q is not valid", u)
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(uuids)))) != 3 {
		t.Errorf("generated UUIDs are not distinct: %v", uuids)
	}
	if m, err := st.ModelByName(t.Context(), "default"); err != nil || m.UUID != res.DefaultModelUUID {
		t.Errorf("default model = %+v, %v", m, err)
	}
}

func TestInitializeValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		edit func(*state.InitArgs)
		msg  string
	}{
		{"short agent password", func(a *state.InitArgs) { a.AgentPassword = "short" },
			"password is only 5 bytes long, and is not a valid Agent password"},
		{"no admin password", func(a *state.InitArgs) { a.AdminPassword = "" }, "empty admin password not valid"},
		{"no nonce", func(a *state.InitArgs) { a.AgentNonce = "" }, "empty agent nonce not valid"},
		{"bad uuid", func(a *state.InitArgs) { a.DefaultModelUUID = "nope" }, `UUID "nope" not valid`},
		{"same model uuids", func(a *state.InitArgs) { a.DefaultModelUUID = a.ControllerModelUUID },
			"same UUID for the controller and default models not valid"},
		{"unencodable config", func(a *state.InitArgs) { a.ModelConfig = map[string]any{"f": make(chan int)} }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := statetest.NewWithOptions(t, statetest.Options{Uninitialized: true})
			rev := st.Revision()
			args := statetest.InitArgs()
			tc.edit(&args)
			_, err := st.Initialize(t.Context(), args)
			if !errors.Is(err, errors.NotValid) {
				t.Fatalf("err = %v, want NotValid", err)
			}
			if tc.msg != "" && err.Error() != tc.msg {
				t.Errorf("message %q, want %q", err, tc.msg)
			}
			if ok, _ := st.Initialized(t.Context()); ok || st.Revision() != rev {
				t.Errorf("a refused Initialize wrote something (revision %d)", st.Revision())
			}
		})
	}
}

func TestUserPasswords(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	statetest.AddUser(t, st, "bob", "bob-password", state.AccessLogin)
	for _, tc := range []struct {
		name, user, password string
		ok                   bool
	}{
		{"admin right", "admin", statetest.AdminPassword, true},
		{"admin tag", "user-admin", statetest.AdminPassword, true},
		{"admin local tag", "user-admin@local", statetest.AdminPassword, true},
		{"admin local name", "admin@local", statetest.AdminPassword, true},
		{"bob right", "bob", "bob-password", true},
		{"admin wrong", "admin", "bob-password", false},
		{"admin empty", "admin", "", false},
		{"unknown", "carol", "bob-password", false},
		{"external", "user-bob@external", "bob-password", false},
		{"malformed", "user-", "bob-password", false},
		{"machine tag", "machine-0", statetest.AgentPassword, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u, err := st.CheckUserPassword(t.Context(), tc.user, tc.password)
			if tc.ok {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				if wantName, _, _ := strings.Cut(strings.TrimPrefix(tc.user, "user-"), "@"); u.Name != wantName {
					t.Errorf("user %+v", u)
				}
				return
			}
			if err != state.ErrBadCredentials || !errors.Is(err, errors.Unauthorized) {
				t.Fatalf("err = %v, want ErrBadCredentials matching Unauthorized", err)
			}
			if err.Error() != "invalid entity name or password" {
				t.Errorf("message %q", err)
			}
		})
	}
}

func TestSetUserPassword(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	if err := st.SetUserPassword(t.Context(), "user-admin", "new-password"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CheckUserPassword(t.Context(), "admin", statetest.AdminPassword); err != state.ErrBadCredentials {
		t.Errorf("old password: %v, want ErrBadCredentials", err)
	}
	if _, err := st.CheckUserPassword(t.Context(), "admin", "new-password"); err != nil {
		t.Errorf("new password: %v", err)
	}
	if err := st.SetUserPassword(t.Context(), "carol", "x"); !errors.Is(err, errors.NotFound) {
		t.Errorf("unknown user: %v, want NotFound", err)
	}
	if err := st.SetUserPassword(t.Context(), "admin", ""); !errors.Is(err, errors.NotValid) {
		t.Errorf("empty password: %v, want NotValid", err)
	}
}

func TestAddUser(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	st := statetest.NewWithOptions(t, statetest.Options{Now: func() time.Time { return now }})
	u, err := st.AddUser(t.Context(), "bob", "Bob Smith", "bob-password", "")
	if err != nil {
		t.Fatal(err)
	}
	if u != (state.User{Name: "bob", DisplayName: "Bob Smith", Access: state.AccessLogin, CreatedAt: now}) {
		t.Errorf("AddUser = %+v", u)
	}
	if got, err := st.User(t.Context(), "user-bob@local"); err != nil || got != u {
		t.Errorf("User = %+v, %v; want %+v", got, err, u)
	}
	for _, tc := range []struct {
		name, user, password, access string
		want                         errors.ConstError
	}{
		{"duplicate", "bob", "pw", "", errors.AlreadyExists},
		{"duplicate admin tag", "user-admin@local", "pw", "", errors.AlreadyExists},
		{"bad access", "carol", "pw", "admin", errors.NotValid},
		{"empty password", "carol", "", "", errors.NotValid},
		{"bad name", "-carol", "pw", "", errors.NotValid},
		{"external", "carol@ext", "pw", "", errors.NotValid},
		{"tag-like name", "user-user-carol", "pw", "", errors.NotValid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := st.AddUser(t.Context(), tc.user, "", tc.password, tc.access); !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
	users, err := st.Users(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 2 || users[0].Name != "admin" || users[1].Name != "bob" {
		t.Errorf("Users = %+v", users)
	}
	if _, err := st.User(t.Context(), "carol"); !errors.Is(err, errors.NotFound) || err.Error() != `user "carol" not found` {
		t.Errorf("User(carol) = %v, want NotFound", err)
	}
}

func TestAuthenticateMachine(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	hosted := statetest.AddModel(t, st, "hosted", state.ModelTypeIAAS)
	hosted0 := statetest.AddMachine(t, st, hosted.UUID, "hosted-nonce")
	unprov := statetest.AddMachine(t, st, hosted.UUID, "")
	if hosted0.ID != "0" || unprov.ID != "1" {
		t.Fatalf("hosted machine ids %q, %q; want 0, 1 (ids are per model)", hosted0.ID, unprov.ID)
	}
	ctrlModel := statetest.ControllerModelUUID

	const (
		ok             = ""
		badCredentials = "bad credentials"
		notProvisioned = "not provisioned"
	)
	for _, tc := range []struct {
		name                       string
		model, id, password, nonce string
		want                       string
	}{
		{"controller agent", ctrlModel, "0", statetest.AgentPassword, statetest.AgentNonce, ok},
		{"wrong nonce", ctrlModel, "0", statetest.AgentPassword, "other", notProvisioned},
		{"empty nonce", ctrlModel, "0", statetest.AgentPassword, "", notProvisioned},
		{"wrong password", ctrlModel, "0", statetest.MachinePassword, statetest.AgentNonce, badCredentials},
		{"wrong password and nonce", ctrlModel, "0", "wrong-password-but-long", "x", badCredentials},
		{"empty password", ctrlModel, "0", "", statetest.AgentNonce, badCredentials},
		{"unknown machine", ctrlModel, "7", statetest.AgentPassword, statetest.AgentNonce, badCredentials},
		{"malformed id", ctrlModel, "machine-0", statetest.AgentPassword, statetest.AgentNonce, badCredentials},
		{"unknown model", "nope", "0", statetest.AgentPassword, statetest.AgentNonce, badCredentials},
		{"hosted machine 0", hosted.UUID, "0", statetest.MachinePassword, "hosted-nonce", ok},
		{"controller password on hosted 0", hosted.UUID, "0", statetest.AgentPassword, statetest.AgentNonce, badCredentials},
		{"hosted nonce on controller 0", ctrlModel, "0", statetest.AgentPassword, "hosted-nonce", notProvisioned},
		{"unprovisioned, no nonce", hosted.UUID, "1", statetest.MachinePassword, "", notProvisioned},
		{"unprovisioned, a nonce", hosted.UUID, "1", statetest.MachinePassword, "x", notProvisioned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := st.AuthenticateMachine(t.Context(), tc.model, tc.id, tc.password, tc.nonce)
			switch tc.want {
			case ok:
				if err != nil || m.ID != tc.id || m.Model != tc.model {
					t.Fatalf("= %+v, %v; want machine %s", m, err, tc.id)
				}
			case badCredentials:
				if err != state.ErrBadCredentials {
					t.Fatalf("err = %v, want ErrBadCredentials", err)
				}
			case notProvisioned:
				var npe *state.NotProvisionedError
				if !errors.Is(err, errors.NotProvisioned) || !errors.As(err, &npe) {
					t.Fatalf("err = %v, want NotProvisionedError", err)
				}
				if want := fmt.Sprintf("machine %s not provisioned", tc.id); err.Error() != want {
					t.Errorf("message %q, want %q", err, want)
				}
			}
		})
	}
}

func TestSetMachinePassword(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	model := statetest.ControllerModelUUID
	err := st.SetMachinePassword(t.Context(), model, "0", "too-short")
	if !errors.Is(err, errors.NotValid) || err.Error() != "password is only 9 bytes long, and is not a valid Agent password" {
		t.Errorf("short password: %v", err)
	}
	rev := st.Revision()
	if err := st.SetMachinePassword(t.Context(), model, "0", statetest.AgentPassword); err != nil || st.Revision() != rev {
		t.Errorf("setting the same password: %v, revision %d -> %d", err, rev, st.Revision())
	}
	const newPassword = "a-new-password-of-enough-length"
	if err := st.SetMachinePassword(t.Context(), model, "0", newPassword); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AuthenticateMachine(t.Context(), model, "0", statetest.AgentPassword, statetest.AgentNonce); err != state.ErrBadCredentials {
		t.Errorf("old password: %v", err)
	}
	if _, err := st.AuthenticateMachine(t.Context(), model, "0", newPassword, statetest.AgentNonce); err != nil {
		t.Errorf("new password: %v", err)
	}
	if err := st.SetMachinePassword(t.Context(), model, "9", newPassword); !errors.Is(err, errors.NotFound) {
		t.Errorf("unknown machine: %v, want NotFound", err)
	}
}

func TestAddMachine(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	model := statetest.DefaultModelUUID
	for i := range 12 {
		m := statetest.AddMachine(t, st, model, "")
		if m.ID != fmt.Sprint(i) || m.Life != state.Alive || !slices.Equal(m.Jobs, []string{state.JobHostUnits}) || state.IsController(m) {
			t.Fatalf("machine %d = %+v", i, m)
		}
	}
	ms, err := st.Machines(t.Context(), model)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	if want := []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"}; !slices.Equal(ids, want) {
		t.Errorf("Machines ids = %v, want %v", ids, want)
	}
	// The controller model's sequence continues after machine 0.
	if m := statetest.AddMachine(t, st, statetest.ControllerModelUUID, ""); m.ID != "1" {
		t.Errorf("second controller model machine has id %q, want 1", m.ID)
	}
	for _, tc := range []struct {
		name  string
		model string
		p     state.MachineParams
		want  errors.ConstError
	}{
		{"unknown model", "nope", state.MachineParams{}, errors.NotFound},
		{"bad job", model, state.MachineParams{Jobs: []string{"JobFly"}}, errors.NotValid},
		{"short password", model, state.MachineParams{Password: "short"}, errors.NotValid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := st.AddMachine(t.Context(), tc.model, tc.p); !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := st.Machines(t.Context(), "nope"); !errors.Is(err, errors.NotFound) {
		t.Errorf("Machines(unknown model): %v, want NotFound", err)
	}
	if _, err := st.Machine(t.Context(), model, "99"); !errors.Is(err, errors.NotFound) || err.Error() != "machine 99 not found" {
		t.Errorf("Machine(99): %v, want NotFound", err)
	}
}

func TestAddModel(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	for _, tc := range []struct {
		name    string
		model   string
		typ     state.ModelType
		wantErr errors.ConstError // "" for success
	}{
		{"simple", "prod", state.ModelTypeIAAS, ""},
		{"hyphens and digits", "k8s-prod-2", state.ModelTypeCAAS, ""},
		{"63 characters", "a" + strings.Repeat("b", 62), state.ModelTypeIAAS, ""},
		{"64 characters", "a" + strings.Repeat("b", 63), state.ModelTypeIAAS, errors.NotValid},
		{"empty", "", state.ModelTypeIAAS, errors.NotValid},
		{"uppercase", "Prod", state.ModelTypeIAAS, errors.NotValid},
		{"leading digit", "1prod", state.ModelTypeIAAS, errors.NotValid},
		{"leading hyphen", "-prod", state.ModelTypeIAAS, errors.NotValid},
		{"underscore", "my_model", state.ModelTypeIAAS, errors.NotValid},
		{"unknown type", "vms", state.ModelType("vm"), errors.NotValid},
		{"empty type", "vms", "", errors.NotValid},
		{"duplicate", "default", state.ModelTypeIAAS, errors.AlreadyExists},
		{"duplicate of new", "prod", state.ModelTypeCAAS, errors.AlreadyExists},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := st.AddModel(t.Context(), tc.model, tc.typ, map[string]any{"k": "v"})
			if tc.wantErr != "" {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Name != tc.model || m.Type != tc.typ || m.Life != state.Alive || !state.IsValidUUID(m.UUID) || m.Config["k"] != "v" {
				t.Errorf("AddModel = %+v", m)
			}
			if got, err := st.Model(t.Context(), m.UUID); err != nil || got.Name != tc.model {
				t.Errorf("Model(%s) = %+v, %v", m.UUID, got, err)
			}
			if got, err := st.ModelByName(t.Context(), tc.model); err != nil || got.UUID != m.UUID {
				t.Errorf("ModelByName(%s) = %+v, %v", tc.model, got, err)
			}
		})
	}
	models, err := st.Models(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range models {
		names = append(names, m.Name)
	}
	want := []string{"a" + strings.Repeat("b", 62), "controller", "default", "k8s-prod-2", "prod"}
	if !slices.Equal(names, want) {
		t.Errorf("Models names = %v, want %v", names, want)
	}
	if _, err := st.Model(t.Context(), "no-such-uuid"); !errors.Is(err, errors.NotFound) || err.Error() != `model "no-such-uuid" not found` {
		t.Errorf("Model(unknown) = %v", err)
	}
	if _, err := st.ModelByName(t.Context(), "nope"); !errors.Is(err, errors.NotFound) {
		t.Errorf("ModelByName(unknown) = %v", err)
	}
}

func TestWatchModelConfig(t *testing.T) {
	t.Parallel()
	hub := watcher.NewHub()
	st := statetest.NewWithOptions(t, statetest.Options{Hub: hub})
	model := statetest.DefaultModelUUID
	w, err := st.WatchModelConfig(t.Context(), model)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if hub.Subscriptions() != 1 {
		t.Fatalf("Subscriptions = %d, want 1", hub.Subscriptions())
	}
	// The caller consumes the initial event itself: nothing is pending.
	assertNoChange(t, w)

	steps := []struct {
		name   string
		model  string
		set    map[string]any
		unset  []string
		change bool
	}{
		{"set a new key", model, map[string]any{"foo": 1}, nil, true},
		{"set it again", model, map[string]any{"foo": 1}, nil, false},
		{"set it again as float", model, map[string]any{"foo": 1.0}, nil, false},
		{"unset a missing key", model, nil, []string{"bar"}, false},
		{"empty update", model, nil, nil, false},
		{"another model", statetest.ControllerModelUUID, map[string]any{"foo": 2}, nil, false},
		{"change the value", model, map[string]any{"foo": "two"}, nil, true},
		{"two keys at once", model, map[string]any{"a": true, "b": []any{"x"}}, nil, true},
		{"unset a key", model, nil, []string{"foo"}, true},
		{"set a key with a default", model, map[string]any{"num-provision-workers": 8}, nil, true},
		{"reset it to the default", model, nil, []string{"num-provision-workers"}, true},
		{"reset a key at its default", model, nil, []string{"num-provision-workers"}, false},
	}
	for _, s := range steps {
		rev := st.Revision()
		if err := st.UpdateModelConfig(t.Context(), s.model, s.set, s.unset); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if s.change {
			assertChange(t, w)
			assertNoChange(t, w) // exactly one event per change
			if !revisionsAfter(st, rev, 1) {
				t.Errorf("%s: revision %d -> %d, want one more", s.name, rev, st.Revision())
			}
		} else {
			assertNoChange(t, w)
			if s.model == model && st.Revision() != rev {
				t.Errorf("%s: a no-op update took revision %d", s.name, st.Revision())
			}
		}
	}
	m, err := st.Model(t.Context(), model)
	if err != nil {
		t.Fatal(err)
	}
	defaults := state.ModelConfigDefaults(state.ModelTypeIAAS)
	if len(m.Config) != len(defaults)+2 || m.Config["a"] != true || m.Config["logging-config"] != "<root>=INFO" ||
		m.Config["num-provision-workers"] != 16.0 {
		t.Errorf("final config %v", m.Config)
	}
	if err := st.UpdateModelConfig(t.Context(), "nope", map[string]any{"a": 1}, nil); !errors.Is(err, errors.NotFound) {
		t.Errorf("unknown model: %v, want NotFound", err)
	}

	// Stop cancels the hub subscription.
	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
	if hub.Subscriptions() != 0 {
		t.Errorf("Subscriptions after Stop = %d, want 0", hub.Subscriptions())
	}
	if err := w.Next(context.Background()); err != watcher.ErrStopped {
		t.Errorf("Next after Stop = %v, want ErrStopped", err)
	}
}

func TestWatchModelConfigUnknownModel(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	w, err := st.WatchModelConfig(t.Context(), "nope")
	if !errors.Is(err, errors.NotFound) || w != nil {
		t.Fatalf("= %v, %v; want NotFound", w, err)
	}
	if n := st.Hub().Subscriptions(); n != 0 {
		t.Errorf("Subscriptions = %d after a failed watch, want 0", n)
	}
}

func TestControllerConfigAndAPIHostPorts(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	w := watcher.NewNotify()
	w.OnStop(st.Hub().Subscribe(watcher.Filter{Kind: state.KindController, ID: state.APIHostPortsID}, w.Sink()))
	defer w.Stop()

	if hps, err := st.APIHostPorts(t.Context()); err != nil || len(hps) != 0 {
		t.Errorf("APIHostPorts before set = %v, %v", hps, err)
	}
	servers := [][]state.HostPort{{
		{Value: "10.0.0.1", Type: "ipv4", Scope: "local-cloud", Port: 17070},
		{Value: "localhost", Type: "hostname", Scope: "public", Port: 17070},
	}}
	if err := st.SetAPIHostPorts(t.Context(), servers); err != nil {
		t.Fatal(err)
	}
	assertChange(t, w)
	got, err := st.APIHostPorts(t.Context())
	if err != nil || len(got) != 1 || !slices.Equal(got[0], servers[0]) {
		t.Errorf("APIHostPorts = %v, %v", got, err)
	}
	rev := st.Revision()
	if err := st.SetAPIHostPorts(t.Context(), servers); err != nil {
		t.Fatal(err)
	}
	assertNoChange(t, w)
	if st.Revision() != rev {
		t.Errorf("setting the same addresses took a revision")
	}
	if err := st.SetAPIHostPorts(t.Context(), [][]state.HostPort{{{Value: "x", Port: 0}}}); !errors.Is(err, errors.NotValid) {
		t.Errorf("port 0: %v, want NotValid", err)
	}

	if err := st.UpdateControllerConfig(t.Context(), map[string]any{"api-port": 17070}, nil); err != nil || st.Revision() != rev {
		t.Errorf("no-op controller config update: %v, revision %d -> %d", err, rev, st.Revision())
	}
	if err := st.UpdateControllerConfig(t.Context(), map[string]any{"audit-log": false}, []string{"api-port"}); err != nil {
		t.Fatal(err)
	}
	ctrl, err := st.Controller(t.Context())
	if err != nil || len(ctrl.Config) != 1 || ctrl.Config["audit-log"] != false {
		t.Errorf("Controller config = %v, %v", ctrl.Config, err)
	}
	assertNoChange(t, w) // the config is not the addresses
}

// TestChangeSetsInCommitOrder checks that concurrent writes are published
// once each, with increasing revisions, and before the writer returns.
func TestChangeSetsInCommitOrder(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	model := statetest.DefaultModelUUID
	type event struct {
		rev uint64
		c   watcher.Change
	}
	var (
		mu     sync.Mutex
		events []event
	)
	cancel := st.Hub().Subscribe(watcher.Filter{Kind: state.KindMachine, Model: model}, func(rev uint64, c watcher.Change) {
		mu.Lock()
		events = append(events, event{rev, c})
		mu.Unlock()
	})
	defer cancel()

	const n = 32
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			m, err := st.AddMachine(t.Context(), model, state.MachineParams{})
			if err != nil {
				t.Error(err)
				return
			}
			// Published before AddMachine returned.
			mu.Lock()
			defer mu.Unlock()
			if !slices.ContainsFunc(events, func(e event) bool { return e.c.ID == m.ID }) {
				t.Errorf("machine %s: AddMachine returned before its change was published", m.ID)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(events) != n {
		t.Fatalf("%d events, want %d", len(events), n)
	}
	seen := map[string]bool{}
	for i, e := range events {
		if i > 0 && e.rev <= events[i-1].rev {
			t.Errorf("event %d has revision %d after %d", i, e.rev, events[i-1].rev)
		}
		if e.c.Kind != state.KindMachine || e.c.Model != model || !e.c.Has(watcher.FieldCreated) || seen[e.c.ID] {
			t.Errorf("event %d: %+v", i, e.c)
		}
		seen[e.c.ID] = true
	}
	if last := events[n-1].rev; last != st.Revision() {
		t.Errorf("last published revision %d, state revision %d", last, st.Revision())
	}
}

func TestObserveCommitAndClose(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		writes int
	)
	path := filepath.Join(t.TempDir(), "state.db")
	hub := watcher.NewHub()
	s, err := boltstore.Open(path, boltstore.Options{Feed: state.Feed(hub, nil), ObserveCommit: func(_ time.Duration, n int) {
		mu.Lock()
		writes += n
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Open(s, state.Options{Hub: hub})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Initialize(t.Context(), statetest.InitArgs()); err != nil {
		t.Fatal(err)
	}
	if _, err := statetest.OpenBolt(path, state.Options{}); err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Errorf("second Open of the same file: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if writes != 1 {
		t.Errorf("ObserveCommit counted %d writes, want 1", writes)
	}
	mu.Unlock()
	if _, err := st.AddModel(t.Context(), "late", state.ModelTypeIAAS, nil); err == nil {
		t.Error("AddModel after Close succeeded")
	}
}
