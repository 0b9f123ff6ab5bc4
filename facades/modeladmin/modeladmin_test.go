package modeladmin_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/internal/leaktest"
	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"

	_ "github.com/provisiond/provisiond/provisiondtest/embeddedetcd" // WithStore(StoreEtcd)
)

func TestMain(m *testing.M) { leaktest.Main(m) }

func modelNames(t testing.TB, c *client.Conn) []string {
	t.Helper()
	var res params.ListModelsResult
	if err := testkit.ModelAdmin(t, c, "ListModels", nil, &res); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range res.Models {
		out = append(out, m.Name+":"+m.Life)
	}
	return out
}

func TestModelAdminAccess(t *testing.T) {
	d := testkit.Start(t, nil)
	creds := d.Credentials()
	if _, err := d.State().AddUser(t.Context(), "bob", "", "bob-password", state.AccessLogin); err != nil {
		t.Fatal(err)
	}
	bob := testkit.Dial(t, d, "")
	if _, err := bob.LoginUser(testkit.Ctx(t), "bob", "bob-password"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		c    *client.Conn
		ok   bool
	}{
		{"admin on /api", testkit.LoginAdmin(t, d, ""), true},
		{"admin on a model endpoint", testkit.LoginAdmin(t, d, creds.DefaultModelUUID), true},
		{"controller agent on /api", testkit.LoginController(t, d, ""), false},
		{"controller agent on the controller model", testkit.LoginController(t, d, creds.ControllerModelUUID), false},
		{"controller agent on a hosted model", testkit.LoginController(t, d, creds.DefaultModelUUID), false},
		{"non-superuser on /api", bob, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, method := range []string{"ListModels", "AddModel", "RemoveModel", "ModelConfig",
				"SetModelConfig", "ControllerConfig", "SetControllerConfig", "WatchModel",
				"AddMachines", "RemoveMachines", "AddSpace", "Spaces", "AddSubnet", "Subnets",
				"AddAgentBinaries", "AgentBinaries", "Status"} {
				var res map[string]any
				err := testkit.ModelAdmin(t, tc.c, method, map[string]any{"name": "x", "model": "x"}, &res)
				if tc.ok {
					if client.IsCode(err, params.CodeUnauthorized) {
						t.Errorf("%s: %v", method, err)
					}
					continue
				}
				testkit.WantErr(t, err, "permission denied", params.CodeUnauthorized)
			}
		})
	}
	// The admin rows added model "x" and removed it again; the refused
	// rows must not have left anything either.
	if got := modelNames(t, testkit.LoginAdmin(t, d, "")); !slices.Equal(got, []string{"controller:alive", "default:alive"}) {
		t.Errorf("refused calls changed the models: %v", got)
	}
}

func TestModelAdminModels(t *testing.T) {
	d := testkit.Start(t, nil)
	c := testkit.LoginAdmin(t, d, "")

	var list params.ListModelsResult
	if err := testkit.ModelAdmin(t, c, "ListModels", nil, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Models) != 2 || list.Models[0].Name != "controller" || !list.Models[0].IsController ||
		list.Models[1].Name != "default" || list.Models[1].IsController || list.Models[1].UUID != d.Credentials().DefaultModelUUID ||
		list.Models[1].Type != "iaas" || list.Models[1].Life != "alive" {
		t.Fatalf("ListModels = %+v", list)
	}

	var added params.ModelSummary
	if err := testkit.ModelAdmin(t, c, "AddModel", params.AddModelArgs{Name: "k8s", Type: "caas",
		Config: map[string]any{"logging-config": "<root>=DEBUG", "n": 3, "b": true}}, &added); err != nil {
		t.Fatal(err)
	}
	if added.Name != "k8s" || added.Type != "caas" || added.Life != "alive" || !state.IsValidUUID(added.UUID) {
		t.Fatalf("AddModel = %+v", added)
	}
	if err := testkit.ModelAdmin(t, c, "AddModel", params.AddModelArgs{Name: "vms"}, &added); err != nil || added.Type != "iaas" {
		t.Fatalf("AddModel without a type = %+v, %v", added, err)
	}
	var cfg params.ModelConfigInfo
	if err := testkit.ModelAdmin(t, c, "ModelConfig", params.ModelArgs{Model: "k8s"}, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Model != "k8s" || cfg.Config["logging-config"] != "<root>=DEBUG" || cfg.Config["n"] != 3.0 || cfg.Config["b"] != true {
		t.Fatalf("ModelConfig = %+v", cfg)
	}

	// Bad input: a clear error, and nothing changes.
	rev := d.State().Revision()
	for _, tc := range []struct {
		name string
		args any
		msg  string
		code string
	}{
		{"duplicate", params.AddModelArgs{Name: "default"}, `model "default" already exists`, params.CodeAlreadyExists},
		{"empty name", params.AddModelArgs{}, `model name "" not valid: lowercase letters, digits and hyphens, starting with a letter, at most 63 characters`, params.CodeNotValid},
		{"bad name", params.AddModelArgs{Name: "My_Model"}, `model name "My_Model" not valid: lowercase letters, digits and hyphens, starting with a letter, at most 63 characters`, params.CodeNotValid},
		{"bad type", params.AddModelArgs{Name: "x", Type: "vm"}, `model type "vm" not valid`, params.CodeNotValid},
		{"bad key", params.AddModelArgs{Name: "x", Config: map[string]any{"a b": 1}}, `config key "a b" not valid`, params.CodeNotValid},
		{"read-only key", params.AddModelArgs{Name: "x", Config: map[string]any{"uuid": "u"}}, `config key "uuid" is read-only`, params.CodeNotValid},
		{"null value", params.AddModelArgs{Name: "x", Config: map[string]any{"a": nil}}, `config value of "a": null is not a string, number or boolean`, params.CodeNotValid},
		{"list value", params.AddModelArgs{Name: "x", Config: map[string]any{"a": []int{1}}}, `config value of "a": a list is not a string, number or boolean`, params.CodeNotValid},
		{"object value", params.AddModelArgs{Name: "x", Config: map[string]any{"a": map[string]int{}}}, `config value of "a": an object is not a string, number or boolean`, params.CodeNotValid},
		{"malformed params", map[string]any{"name": 7}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := testkit.ModelAdmin(t, c, "AddModel", tc.args, nil)
			if tc.msg == "" {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			testkit.WantErr(t, err, tc.msg, tc.code)
		})
	}
	if d.State().Revision() != rev {
		t.Errorf("refused AddModel calls wrote: revision %d -> %d", rev, d.State().Revision())
	}
	if got := modelNames(t, c); !slices.Equal(got, []string{"controller:alive", "default:alive", "k8s:alive", "vms:alive"}) {
		t.Errorf("models = %v", got)
	}
}

func TestModelAdminRemoveModel(t *testing.T) {
	d := testkit.Start(t, nil)
	c := testkit.LoginAdmin(t, d, d.Credentials().DefaultModelUUID)
	for _, name := range []string{"empty", "busy"} {
		if err := testkit.ModelAdmin(t, c, "AddModel", params.AddModelArgs{Name: name}, nil); err != nil {
			t.Fatal(err)
		}
	}
	busy, err := d.State().ModelByName(t.Context(), "busy")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.State().AddMachine(t.Context(), busy.UUID, state.MachineParams{}); err != nil {
		t.Fatal(err)
	}

	rev := d.State().Revision()
	for _, tc := range []struct {
		name, model, msg, code string
	}{
		{"no name", "", "model name is required", params.CodeNotValid},
		{"unknown", "nope", `model "nope" not found`, params.CodeNotFound},
		{"bad name", "No", `model name "No" not valid: lowercase letters, digits and hyphens, starting with a letter, at most 63 characters`, params.CodeNotValid},
		{"controller model", "controller", "cannot remove the controller model", params.CodeForbidden},
	} {
		err := testkit.ModelAdmin(t, c, "RemoveModel", params.RemoveModelArgs{Model: tc.model}, nil)
		t.Run(tc.name, func(t *testing.T) { testkit.WantErr(t, err, tc.msg, tc.code) })
	}
	if d.State().Revision() != rev {
		t.Errorf("refused RemoveModel calls wrote: revision %d -> %d", rev, d.State().Revision())
	}

	var res params.RemoveModelResult
	if err := testkit.ModelAdmin(t, c, "RemoveModel", params.RemoveModelArgs{Model: "empty"}, &res); err != nil {
		t.Fatal(err)
	}
	if !res.Removed || res.Life != "dead" || res.Name != "empty" {
		t.Errorf("RemoveModel(empty) = %+v", res)
	}
	if err := testkit.ModelAdmin(t, c, "RemoveModel", params.RemoveModelArgs{Model: "busy"}, &res); err != nil {
		t.Fatal(err)
	}
	if res.Removed || res.Life != "dying" || res.UUID != busy.UUID {
		t.Errorf("RemoveModel(busy) = %+v", res)
	}
	if got := modelNames(t, c); !slices.Equal(got, []string{"busy:dying", "controller:alive", "default:alive"}) {
		t.Errorf("models = %v", got)
	}
	// The name of a removed model can be used again.
	if err := testkit.ModelAdmin(t, c, "AddModel", params.AddModelArgs{Name: "empty"}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestModelAdminConfig(t *testing.T) {
	d := testkit.Start(t, nil)
	creds := d.Credentials()
	api := testkit.LoginAdmin(t, d, "")
	onCtrl := testkit.LoginAdmin(t, d, creds.ControllerModelUUID)

	// The default model: "default" on /api, the connection's model elsewhere.
	var cfg params.ModelConfigInfo
	if err := testkit.ModelAdmin(t, api, "ModelConfig", params.ModelArgs{}, &cfg); err != nil || cfg.Model != "default" || cfg.UUID != creds.DefaultModelUUID {
		t.Fatalf("ModelConfig on /api = %+v, %v", cfg, err)
	}
	if err := testkit.ModelAdmin(t, onCtrl, "ModelConfig", params.ModelArgs{}, &cfg); err != nil || cfg.Model != "controller" {
		t.Fatalf("ModelConfig on the controller model = %+v, %v", cfg, err)
	}

	if err := testkit.ModelAdmin(t, api, "SetModelConfig", params.SetModelConfigArgs{
		Config: map[string]any{"a": "x", "b": 2.5, "c": false}}, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg = params.ModelConfigInfo{} // decoding into a map merges
	if err := testkit.ModelAdmin(t, api, "SetModelConfig", params.SetModelConfigArgs{
		Config: map[string]any{"a": "y"}, Unset: []string{"b", "never-set"}}, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Config["a"] != "y" || cfg.Config["c"] != false || cfg.Config["b"] != nil {
		t.Fatalf("SetModelConfig = %+v", cfg)
	}
	// The Provisioner sees it (agents read what operators set).
	var pcfg params.ModelConfigResult
	agent := testkit.LoginController(t, d, creds.DefaultModelUUID)
	if err := agent.Call(testkit.Ctx(t), "Provisioner", 11, "", "ModelConfig", nil, &pcfg); err != nil || pcfg.Config["a"] != "y" {
		t.Fatalf("Provisioner.ModelConfig = %+v, %v", pcfg, err)
	}

	// Juju's keys are typed as Juju types them ("8" is the number 8);
	// unsetting one sets its default back; the defaults come along.
	cfg = params.ModelConfigInfo{}
	if err := testkit.ModelAdmin(t, api, "SetModelConfig", params.SetModelConfigArgs{
		Config: map[string]any{"num-provision-workers": "8", "enable-os-upgrade": "false"}}, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Config["num-provision-workers"] != 8.0 || cfg.Config["enable-os-upgrade"] != false ||
		cfg.Defaults["num-provision-workers"] != 16.0 || cfg.Defaults["enable-os-upgrade"] != true || cfg.Defaults["a"] != nil {
		t.Fatalf("SetModelConfig typed = %v, defaults %v", cfg.Config, cfg.Defaults)
	}
	cfg = params.ModelConfigInfo{}
	if err := testkit.ModelAdmin(t, api, "SetModelConfig", params.SetModelConfigArgs{Unset: []string{"num-provision-workers", "enable-os-upgrade"}}, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Config["num-provision-workers"] != 16.0 || cfg.Config["enable-os-upgrade"] != true {
		t.Fatalf("SetModelConfig reset = %v", cfg.Config)
	}

	rev := d.State().Revision()
	for _, tc := range []struct {
		name   string
		method string
		args   any
		msg    string
		code   string
	}{
		{"unknown model", "SetModelConfig", params.SetModelConfigArgs{Model: "nope", Config: map[string]any{"a": 1}}, `model "nope" not found`, params.CodeNotFound},
		{"set and unset", "SetModelConfig", params.SetModelConfigArgs{Config: map[string]any{"a": 1}, Unset: []string{"a"}}, `config key "a" is both set and unset`, params.CodeNotValid},
		{"read-only model key", "SetModelConfig", params.SetModelConfigArgs{Config: map[string]any{"name": "x"}}, `config key "name" is read-only`, params.CodeNotValid},
		{"unset read-only", "SetModelConfig", params.SetModelConfigArgs{Unset: []string{"type"}}, `config key "type" is read-only`, params.CodeNotValid},
		{"bad unset key", "SetModelConfig", params.SetModelConfigArgs{Unset: []string{""}}, `config key "" not valid`, params.CodeNotValid},
		{"long key", "SetModelConfig", params.SetModelConfigArgs{Config: map[string]any{"a" + strings.Repeat("b", 128): 1}}, "", params.CodeNotValid},
		{"Juju key out of range", "SetModelConfig", params.SetModelConfigArgs{Config: map[string]any{"num-container-provision-workers": 0}},
			`model config "num-container-provision-workers": 0 is out of range (1 to 25)`, params.CodeNotValid},
		{"Juju key of the wrong type", "SetModelConfig", params.SetModelConfigArgs{Config: map[string]any{"automatically-retry-hooks": "sometimes"}},
			`model config "automatically-retry-hooks": want a boolean, got the string "sometimes"`, params.CodeNotValid},
		{"Juju key not among its values", "SetModelConfig", params.SetModelConfigArgs{Config: map[string]any{"provisioner-harvest-mode": "everything"}},
			`model config "provisioner-harvest-mode": "everything" is not one of "all", "none", "unknown", "destroyed"`, params.CodeNotValid},
		{"immutable Juju key", "SetModelConfig", params.SetModelConfigArgs{Unset: []string{"charmhub-url"}, Config: map[string]any{"firewall-mode": "none"}},
			`model config "firewall-mode" cannot change from the string "instance" to the string "none"`, params.CodeNotValid},
		{"AddModel with a bad Juju key", "AddModel", params.AddModelArgs{Name: "bad", Config: map[string]any{"update-status-hook-interval": "1h1m"}},
			`model config "update-status-hook-interval": 1h1m is out of range (1m to 60m)`, params.CodeNotValid},
		{"read-only controller key", "SetControllerConfig", params.SetControllerConfigArgs{Config: map[string]any{"ca-cert": "x"}}, `config key "ca-cert" is read-only`, params.CodeNotValid},
		{"controller-uuid", "SetControllerConfig", params.SetControllerConfigArgs{Unset: []string{"controller-uuid"}}, `config key "controller-uuid" is read-only`, params.CodeNotValid},
		{"controller value", "SetControllerConfig", params.SetControllerConfigArgs{Config: map[string]any{"x": []any{}}}, `config value of "x": a list is not a string, number or boolean`, params.CodeNotValid},
	} {
		err := testkit.ModelAdmin(t, api, tc.method, tc.args, nil)
		t.Run(tc.name, func(t *testing.T) { testkit.WantErr(t, err, tc.msg, tc.code) })
	}
	if d.State().Revision() != rev {
		t.Errorf("refused config calls wrote: revision %d -> %d", rev, d.State().Revision())
	}

	var ccfg params.ControllerConfigResult
	if err := testkit.ModelAdmin(t, api, "SetControllerConfig", params.SetControllerConfigArgs{Config: map[string]any{"max-logs": 10}}, &ccfg); err != nil {
		t.Fatal(err)
	}
	if ccfg.Config["max-logs"] != 10.0 || ccfg.Config["controller-uuid"] != creds.ControllerUUID || ccfg.Config["ca-cert"] != creds.CACert {
		t.Fatalf("SetControllerConfig = %+v", ccfg)
	}
	if err := testkit.ModelAdmin(t, onCtrl, "ControllerConfig", nil, &ccfg); err != nil || ccfg.Config["max-logs"] != 10.0 {
		t.Fatalf("ControllerConfig = %+v, %v", ccfg, err)
	}
}

func TestModelAdminWatchModel(t *testing.T) {
	d := testkit.Start(t, nil)
	creds := d.Credentials()
	c := testkit.LoginAdmin(t, d, "")
	var res params.StringsWatchResult
	if err := testkit.ModelAdmin(t, c, "WatchModel", params.ModelArgs{}, &res); err != nil {
		t.Fatal(err)
	}
	if res.StringsWatcherId == "" || len(res.Changes) != 0 {
		t.Fatalf("WatchModel = %+v", res)
	}
	w := client.NewStringsWatcher(c, res.StringsWatcherId)

	// A change to another model comes first; it must not be reported.
	if err := testkit.ModelAdmin(t, c, "SetModelConfig", params.SetModelConfigArgs{Model: "controller", Config: map[string]any{"a": 1}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := d.State().AddMachine(t.Context(), creds.DefaultModelUUID, state.MachineParams{}); err != nil {
		t.Fatal(err)
	}
	if err := testkit.ModelAdmin(t, c, "SetModelConfig", params.SetModelConfigArgs{Config: map[string]any{"a": 1}}, nil); err != nil {
		t.Fatal(err)
	}
	// Both changes were published before the writes returned, so one Next
	// sees them together.
	got, err := w.Next(testkit.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"machine/0", "model/" + creds.DefaultModelUUID}; !slices.Equal(got, want) {
		t.Fatalf("Next = %v, want %v", got, want)
	}
	if err := w.Stop(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}

	err = testkit.ModelAdmin(t, c, "WatchModel", params.ModelArgs{Model: "nope"}, &res)
	testkit.WantErr(t, err, `model "nope" not found`, params.CodeNotFound)
}
