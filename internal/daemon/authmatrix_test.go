package daemon_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// The authorisation matrix: every facade x version x method of
// the registry x identity, to "allowed" or the exact call-level error; and
// for the Provisioner's per-machine methods, every machine-agent identity x
// target machine (itself, another machine, its container, a grandchild,
// another machine's container, a machine of another model) to allowed or
// permission denied. The rules are written out here from the specs
// (rpc.md §1.6, provisioner.md §1, caasunitprovisioner.md §2,
// docs/decisions.md for ModelAdmin and users); the table is what the
// running daemon answers.

// identity is one way of being connected.
type identity struct {
	name  string
	model string // "" for /api
	login *params.LoginRequest
	// user, superuser, agent, controller describe the login.
	user, superuser, agent, controller bool
	caas                               bool // the model is a CAAS model
	self                               string
}

func matrixIdentities(w *world) []identity {
	creds := w.D.Credentials()
	ca := &params.LoginRequest{AuthTag: creds.ControllerAgent.Tag, Credentials: creds.ControllerAgent.Password, Nonce: creds.ControllerAgent.Nonce}
	admin := &params.LoginRequest{AuthTag: "user-admin", Credentials: creds.AdminPassword}
	return []identity{
		{name: "no login", model: w.Model},
		{name: "admin user", model: w.Model, login: admin, user: true, superuser: true},
		{name: "admin user on /api", login: admin, user: true, superuser: true},
		{name: "other user on /api", login: &params.LoginRequest{AuthTag: "user-bob", Credentials: bobPassword}, user: true},
		{name: "controller agent", model: w.Model, login: ca, agent: true, controller: true},
		{name: "controller agent on a CAAS model", model: w.caas, login: ca, agent: true, controller: true, caas: true},
		{name: "machine agent", model: w.Model, login: &params.LoginRequest{AuthTag: "machine-0", Credentials: m0Password, Nonce: m0Nonce},
			agent: true, self: "machine-0"},
		{name: "machine agent of another model", model: w.other, login: &params.LoginRequest{AuthTag: "machine-0", Credentials: otherM0Password, Nonce: otherM0Nonce},
			agent: true, self: "machine-0"},
	}
}

// managerOnly are the Provisioner methods only the controller agent may
// call (provisioner.md §1.2).
var managerOnly = map[string]bool{"WatchModelMachines": true, "WatchEnvironMachines": true,
	"WatchModelMachineStartTimes": true, "WatchMachineErrorRetry": true}

// hostMethods act for containers of the caller's own machine: the caller
// must be a machine of the connection's model (provisioner.md §2.3, the
// host is the caller's machine).
var hostMethods = map[string]bool{"PrepareContainerInterfaceInfo": true, "GetContainerInterfaceInfo": true,
	"HostChangesForContainers": true, "GetContainerProfileInfo": true}

// expectCall is the call-level outcome of facade.method with empty params
// for id: "" when the call is allowed, else the exact error.
func expectCall(id identity, facadeName string, version int, method string) string {
	perm := errString(facade.ErrPerm)
	switch {
	case id.login == nil && facadeName == "Admin" && method == "Login":
		return errString(facade.ErrNoCreds)
	case facadeName == "Admin" && method == "Login":
		return errString(facade.ErrAlreadyLoggedIn)
	case facadeName == "Admin":
		return errString(&params.Error{Message: "not redirected"})
	case id.login == nil && version == 0:
		return errString(&params.Error{Message: fmt.Sprintf("unknown facade type %q", facadeName), Code: params.CodeNotImplemented})
	case id.login == nil:
		return errString(&params.Error{Message: fmt.Sprintf("unknown version %d for facade type %q", version, facadeName), Code: params.CodeNotImplemented})
	case id.model == "" && !facade.ControllerAPIFacades[facadeName]:
		return errString(&params.Error{Message: fmt.Sprintf("facade %q not supported for controller API connection", facadeName), Code: params.CodeNotSupported})
	}
	switch facadeName {
	case "Pinger":
		return ""
	case "NotifyWatcher", "StringsWatcher":
		return errString(facade.ErrUnknownWatcher) // allowed; id "" names no watcher
	case "Provisioner":
		switch {
		case !id.agent:
			return perm
		case id.caas:
			return errString(&params.Error{Message: `facade "Provisioner" not supported for a CAAS model API connection`, Code: params.CodeNotSupported})
		case managerOnly[method] && !id.controller:
			return perm
		case hostMethods[method] && id.self == "":
			return perm
		}
		return ""
	case "CAASUnitProvisioner":
		switch {
		case !id.controller:
			return perm
		case !id.caas:
			return errString(&params.Error{Message: `CAASUnitProvisioner on iaas model "default" not supported`, Code: params.CodeNotSupported})
		}
		return ""
	case "ModelAdmin":
		if !id.superuser {
			return perm
		}
		return ""
	case "MachineUndertaker":
		// Juju's facade: AuthController; its restricted root refuses it
		// on container models (apiserver/restrict_caasmodel.go).
		switch {
		case !id.controller:
			return perm
		case id.caas:
			return errString(&params.Error{Message: `facade "MachineUndertaker" not supported on container models`, Code: params.CodeNotSupported})
		}
		return ""
	}
	return "no rule for facade " + facadeName
}

// refusal reports whether a call-level error is one of the access errors
// expectCall names (anything else means the call got past access).
func refusal(e *params.Error) bool {
	if e == nil {
		return false
	}
	switch {
	case e.Message == "permission denied" && e.Code == params.CodeUnauthorized,
		e.Code == params.CodeNotImplemented,
		e.Code == params.CodeNotSupported && (strings.Contains(e.Message, "not supported for") || strings.Contains(e.Message, "not supported on container models") ||
			strings.HasPrefix(e.Message, "CAASUnitProvisioner on")),
		facadeErrs[errString(e)]:
		return true
	}
	return false
}

var facadeErrs = map[string]bool{errString(facade.ErrNoCreds): true, errString(facade.ErrAlreadyLoggedIn): true,
	errString(&params.Error{Message: "not redirected"}): true, errString(facade.ErrUnknownWatcher): true}

// matrixParams overrides the empty params of methods that write when
// allowed, so that allowed calls do not disturb the world.
var matrixParams = map[string]string{
	"ModelAdmin/v1/AddMachines": `{"model":"scratch"}`,
}

// Targets of the per-machine part, and which identity reaches which
// (canAccess, provisioner.md §1.2).
var matrixTargets = []string{"machine-0", "machine-1", "machine-0-lxd-0", "machine-0-lxd-0-lxd-0", "machine-1-lxd-0", "machine-2"}

func canAccess(id identity, target string) bool {
	if id.self != "" && target == id.self {
		return true
	}
	parts := strings.Split(strings.TrimPrefix(target, "machine-"), "-")
	switch {
	case len(parts) == 1:
		return id.controller
	case len(parts) == 3:
		return id.self != "" && "machine-"+parts[0] == id.self
	}
	return false // grandchildren
}

// ownerOnly methods reach only the caller's own machine (AuthOwner).
var ownerOnly = map[string]bool{"Tools": true, "SetObservedNetworkConfig": true, "SetHostMachineNetworkConfig": true}

// notMachineTags are per-entity methods whose tags are not machine tags.
var notMachineTags = map[string]bool{"ControllerAPIInfoForModels": true}

// readOnly are the Provisioner methods sent allowed targets too; any other
// method gets only the targets it must refuse, which never write.
var readOnly = map[string]bool{
	"AvailabilityZone": true, "Constraints": true, "DistributionGroup": true, "DistributionGroupByMachineId": true,
	"GetContainerInterfaceInfo": true, "GetContainerProfileInfo": true, "HostChangesForContainers": true,
	"InstanceId": true, "InstanceStatus": true, "KeepInstance": true, "Life": true, "ProvisioningInfo": true,
	"Status": true, "SupportedContainers": true, "Tools": true, "WatchContainers": true, "WatchAllContainers": true,
	"RequestedNetworks": true, "Series": true,
}

func TestAuthorisationMatrix(t *testing.T) {
	w := newWorld(t)
	reg := buildRegistry()
	cells, entityCells := 0, 0
	for _, id := range matrixIdentities(w) {
		t.Run(id.name, func(t *testing.T) {
			c := newRawConn(t, w.D, id.model)
			if id.login != nil {
				c.login(*id.login)
			}
			for _, fv := range reg.Facades() {
				for _, v := range fv.Versions {
					for _, m := range reg.MethodNames(fv.Name, v) {
						name := fmt.Sprintf("%s/v%d/%s", fv.Name, v, m)
						pt := reg.ParamsType(fv.Name, v, m)
						var p []byte
						if pt != nil {
							p = []byte(`{}`)
							if o, ok := matrixParams[name]; ok {
								p = []byte(o)
							}
						}
						rev := w.St.Revision()
						r, err := c.call(fv.Name, v, "", m, p)
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						cells++
						want := expectCall(id, fv.Name, v, m)
						got := ""
						if refusal(r.err) {
							got = errString(r.err)
						}
						if got != want {
							if want == "" {
								want = "allowed"
							}
							if got == "" {
								got = "allowed (" + outcome(r) + ")"
							}
							t.Errorf("%s: %s; want %s", name, got, want)
						}
						if _, writes := matrixParams[name]; !writes && w.St.Revision() != rev {
							t.Errorf("%s: revision %d -> %d", name, rev, w.St.Revision())
						}
						if want == "" && fv.Name == "Provisioner" && !notMachineTags[m] && pt != nil {
							entityCells += checkTargets(t, w, c, id, name, fv.Name, v, m, pt)
						}
					}
				}
			}
			if err := c.alive(id.login != nil); err != nil {
				t.Fatal(err)
			}
		})
	}
	w.noPanics(t)
	t.Logf("%d method x identity cells, %d machine-target cells", cells, entityCells)
}

// checkTargets sends the per-machine targets to one allowed method: the
// items the identity may not reach are "permission denied" and change
// nothing; the others are anything but, and for an agent of another
// model never succeed on the default model's machines.
func checkTargets(t *testing.T, w *world, c *rawConn, id identity, name, facadeName string, v int, method string, pt reflect.Type) int {
	t.Helper()
	allowed := func(target string) bool {
		if ownerOnly[method] {
			return id.self != "" && target == id.self
		}
		return canAccess(id, target)
	}
	var targets []string
	for _, tg := range matrixTargets {
		if readOnly[method] || !allowed(tg) {
			targets = append(targets, tg)
		}
	}
	if len(targets) == 0 {
		return 0
	}
	bodies, single := targetParams(pt, targets)
	if bodies == nil && !mentionsTag(pt, 0) {
		return 0 // not a per-entity method (ContainerManagerConfig, FindTools)
	}
	if bodies == nil {
		t.Errorf("%s: cannot place machine tags in %v: list it in notMachineTags or teach targetParams", name, pt)
		return 0
	}
	var errs []*params.Error
	rev := w.St.Revision()
	for _, body := range bodies {
		r, err := c.call(facadeName, v, "", method, body)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if single {
			errs = append(errs, r.err)
			continue
		}
		if r.err != nil {
			if why := preconditions[method]; why != "" && !refusal(r.err) {
				t.Logf("%s as %s: %s: %s", name, id.name, errString(r.err), why)
				return 0
			}
			t.Errorf("%s %v: call error %s", name, targets, errString(r.err))
			return 0
		}
		errs, _ = itemErrors(r.response)
	}
	if len(errs) != len(targets) {
		t.Errorf("%s: %d results for %d targets", name, len(errs), len(targets))
		return 0
	}
	for i, tg := range targets {
		denied := errString(errs[i]) == errString(facade.ErrPerm)
		switch {
		case !allowed(tg) && !denied:
			t.Errorf("%s(%s) as %s: %s; want permission denied", name, tg, id.name, errString(errs[i]))
		case allowed(tg) && denied:
			t.Errorf("%s(%s) as %s: permission denied; want allowed", name, tg, id.name)
		case allowed(tg) && id.model == w.other && tg != id.self && (errs[i] == nil || errs[i].Code != params.CodeNotFound):
			t.Errorf("%s(%s) as %s: %s; want not found: the default model's machine is not this model's",
				name, tg, id.name, errString(errs[i]))
		}
	}
	if got := w.St.Revision(); got != rev && !readOnly[method] {
		t.Errorf("%s: refused targets changed state (revision %d -> %d)", name, rev, got)
	}
	return len(targets)
}

// preconditions are call-level checks that run after access and before
// the items (a host without interfaces fails them all).
var preconditions = map[string]string{
	"PrepareContainerInterfaceInfo": "the caller's host needs interfaces first (provisioner.md §2.3, call-level step 4.1)",
	"GetContainerInterfaceInfo":     "the caller's host needs interfaces first (provisioner.md §2.3, call-level step 4.1)",
}

// mentionsTag reports whether t has a field named like a tag, at any depth.
func mentionsTag(t reflect.Type, depth int) bool {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || depth > 4 {
		return false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if strings.Contains(strings.ToLower(jsonName(f)), "tag") || mentionsTag(f.Type, depth+1) {
			return true
		}
	}
	return false
}

var tagKeys = []string{"tag", "Tag", "machine-tag", "MachineTag"}

// targetParams places each target in a params value of type pt: one body
// with a list item per target, or (single) one body per target when the
// tag is a top-level field. nil when pt holds no machine tag.
func targetParams(pt reflect.Type, targets []string) (bodies [][]byte, single bool) {
	if pt.Kind() != reflect.Struct {
		return nil, false
	}
	for i := range pt.NumField() {
		f := pt.Field(i)
		if slices.Contains(tagKeys, jsonName(f)) && f.Type.Kind() == reflect.String {
			for _, tg := range targets {
				bodies = append(bodies, mustJSON(map[string]string{jsonName(f): tg}))
			}
			return bodies, true
		}
	}
	for i := range pt.NumField() {
		f := pt.Field(i)
		if f.Type.Kind() != reflect.Slice || f.Type.Elem().Kind() != reflect.Struct {
			continue
		}
		path := tagPath(f.Type.Elem(), 0)
		if path == nil {
			continue
		}
		items := make([]any, len(targets))
		for j, tg := range targets {
			var v any = tg
			for k := len(path) - 1; k >= 0; k-- {
				v = map[string]any{path[k]: v}
			}
			items[j] = v
		}
		return [][]byte{mustJSON(map[string]any{jsonName(f): items})}, false
	}
	return nil, false
}

func tagPath(t reflect.Type, depth int) []string {
	if depth > 2 {
		return nil
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if slices.Contains(tagKeys, jsonName(f)) && f.Type.Kind() == reflect.String {
			return []string{jsonName(f)}
		}
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type.Kind() == reflect.Struct && jsonName(f) != "" {
			if p := tagPath(f.Type, depth+1); p != nil {
				return append([]string{jsonName(f)}, p...)
			}
		}
	}
	return nil
}

// Logins with a changed or revoked password fail with the one login error
// that tells nothing ("invalid entity name or password"); the new password
// works. Changes: a user's password (state), a machine agent's password
// set by the provisioner (Provisioner.SetPasswords, as Juju's agents
// rotate theirs) and by state; revoked: the machine removed.
func TestLoginAfterPasswordChangeOrRevocation(t *testing.T) {
	w := newWorld(t)
	login := func(model string, req params.LoginRequest) error {
		c := newRawConn(t, w.D, model)
		r := c.mustCall("Admin", 3, "", "Login", req)
		if r.err != nil {
			return r.err
		}
		return nil
	}
	badCreds := errString(facade.ErrBadCreds)
	mustFail := func(what string, err error) {
		t.Helper()
		var pe *params.Error
		if err == nil {
			t.Fatalf("%s: login succeeded", what)
		}
		if errors.As(err, &pe); errString(pe) != badCreds {
			t.Fatalf("%s: %v; want %s", what, err, badCreds)
		}
	}
	mustWork := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	// A user's password changed.
	bob := params.LoginRequest{AuthTag: "user-bob", Credentials: bobPassword}
	mustWork("bob", login("", bob))
	if err := w.St.SetUserPassword(t.Context(), "bob", "bob-new-password-987654"); err != nil {
		t.Fatal(err)
	}
	mustFail("bob with the old password", login("", bob))
	mustWork("bob with the new password", login("", params.LoginRequest{AuthTag: "user-bob", Credentials: "bob-new-password-987654"}))

	// A machine agent's password rotated through the Provisioner.
	m0 := params.LoginRequest{AuthTag: "machine-0", Credentials: m0Password, Nonce: m0Nonce}
	mustWork("machine 0", login(w.Model, m0))
	const rotated = "machine-0-rotated-password-xyz"
	res := mustCall[params.ErrorResults](t, w.Ctrl, 11, "SetPasswords",
		params.EntityPasswords{Changes: []params.EntityPassword{{Tag: "machine-0", Password: rotated}}})
	if len(res.Results) != 1 || res.Results[0].Error != nil {
		t.Fatalf("SetPasswords = %+v", res)
	}
	mustFail("machine 0 with the old password", login(w.Model, m0))
	m0.Credentials = rotated
	mustWork("machine 0 with the new password", login(w.Model, m0))
	// ... and through state.
	if err := w.St.SetMachinePassword(t.Context(), w.Model, "0", "machine-0-third-password-xyz"); err != nil {
		t.Fatal(err)
	}
	mustFail("machine 0 after the state change", login(w.Model, m0))
	// The machine's password does not open another model's machine 0.
	mustFail("machine 0 of the default model on the other model", login(w.other, params.LoginRequest{
		AuthTag: "machine-0", Credentials: "machine-0-third-password-xyz", Nonce: m0Nonce}))

	// Revoked: a removed machine cannot log in.
	const pw = "machine-3-agent-password-xyz"
	m, err := w.St.AddMachine(t.Context(), w.Model, state.MachineParams{Password: pw, Nonce: "n3", InstanceID: "i-3"})
	if err != nil {
		t.Fatal(err)
	}
	req := params.LoginRequest{AuthTag: "machine-" + m.ID, Credentials: pw, Nonce: "n3"}
	mustWork("new machine", login(w.Model, req))
	if err := w.St.EnsureMachineDead(t.Context(), w.Model, m.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := w.St.RemoveMachine(t.Context(), w.Model, m.ID); err != nil {
		t.Fatal(err)
	}
	mustFail("removed machine", login(w.Model, req))
}

// Authorisation is not fixed at login: when an entity's
// password changes, or the entity is removed, every connection logged in
// as it is closed at once (close code 1008), the one that changed it
// included once it has its reply; the old password then fails
// everywhere. Connections of other entities, the controller agent's on
// the same model among them, stay.
func TestCredentialChangeEndsSessions(t *testing.T) {
	f := newProvFixture(t)
	closed := func(what string, c *client.Conn) {
		t.Helper()
		select {
		case <-c.Done():
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: the connection is still open", what)
		}
		if code := c.CloseCode(); code != websocket.ClosePolicyViolation {
			t.Fatalf("%s: close code %d; want 1008", what, code)
		}
	}
	alive := func(what string, c *client.Conn) {
		t.Helper()
		if err := c.Ping(ctxT(t)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	agent := func(tag, password, nonce string) *client.Conn {
		t.Helper()
		c := dial(t, f.D, f.Model)
		if _, err := c.LoginAgent(ctxT(t), tag, password, nonce); err != nil {
			t.Fatalf("%s: %v", tag, err)
		}
		return c
	}

	// The controller rotates machine 0's password: both of machine 0's
	// connections close; the controller's own stays.
	second := agent("machine-0", m0Password, m0Nonce)
	const rotated = "machine-0-rotated-password-xyz"
	res := mustCall[params.ErrorResults](t, f.Ctrl, 11, "SetPasswords",
		params.EntityPasswords{Changes: []params.EntityPassword{{Tag: "machine-0", Password: rotated}}})
	if res.Results[0].Error != nil {
		t.Fatal(res.Results[0].Error)
	}
	closed("machine 0's agent", f.Agent)
	closed("machine 0's second connection", second)
	alive("the controller agent", f.Ctrl)
	alive("the admin", f.Admin)
	if _, err := dial(t, f.D, f.Model).LoginAgent(ctxT(t), "machine-0", m0Password, m0Nonce); !isCode(err, params.CodeUnauthorized) {
		t.Fatalf("login with the old password: %v", err)
	}
	// Setting the same password again changes nothing and closes nothing.
	fresh := agent("machine-0", rotated, m0Nonce)
	mustCall[params.ErrorResults](t, f.Ctrl, 11, "SetPasswords",
		params.EntityPasswords{Changes: []params.EntityPassword{{Tag: "machine-0", Password: rotated}}})
	alive("machine 0 after a SetPasswords to the same password", fresh)

	// A container's host sets its container's password: the container's
	// agent is closed, the host's connection gets its reply and stays.
	if err := f.St.SetMachinePassword(t.Context(), f.Model, "0/lxd/0", "container-password-0123456789"); err != nil {
		t.Fatal(err)
	}
	if err := f.St.SetInstanceInfo(t.Context(), f.Model, "0/lxd/0", state.InstanceInfo{InstanceID: "c-0", Nonce: "cn"}); err != nil {
		t.Fatal(err)
	}
	container := agent("machine-0-lxd-0", "container-password-0123456789", "cn")
	res = mustCall[params.ErrorResults](t, fresh, 11, "SetPasswords",
		params.EntityPasswords{Changes: []params.EntityPassword{{Tag: "machine-0-lxd-0", Password: "container-password-new-0123456"}}})
	if res.Results[0].Error != nil {
		t.Fatal(res.Results[0].Error)
	}
	closed("the container's agent", container)
	alive("the host's agent", fresh)

	// A removed machine's agent is closed.
	const pw = "machine-3-agent-password-xyz"
	m, err := f.St.AddMachine(t.Context(), f.Model, state.MachineParams{Password: pw, Nonce: "n3", InstanceID: "i-3"})
	if err != nil {
		t.Fatal(err)
	}
	removed := agent("machine-"+m.ID, pw, "n3")
	if err := f.St.EnsureMachineDead(t.Context(), f.Model, m.ID); err != nil {
		t.Fatal(err)
	}
	alive("a dead machine's agent (Juju's agents see their death and stop)", removed)
	if _, err := f.St.RemoveMachine(t.Context(), f.Model, m.ID); err != nil {
		t.Fatal(err)
	}
	closed("the removed machine's agent", removed)

	// A user's password changed: the user's connections close.
	if _, err := f.St.AddUser(t.Context(), "carol", "Carol", "carol-password-0123456789", state.AccessLogin); err != nil {
		t.Fatal(err)
	}
	carol := dial(t, f.D, "")
	if _, err := carol.LoginUser(ctxT(t), "carol", "carol-password-0123456789"); err != nil {
		t.Fatal(err)
	}
	if err := f.St.SetUserPassword(t.Context(), "carol", "carol-new-password-987654"); err != nil {
		t.Fatal(err)
	}
	closed("carol", carol)
	alive("the admin", f.Admin)
	alive("machine 0", fresh)
}
