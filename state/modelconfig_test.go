package state_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
)

// configJSON is v as it is stored and sent: its JSON.
func configJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A new model's config is the defaults of its type with the config it was
// created with over them; the models Initialize makes have them too. (The
// defaults themselves are checked key by key against Juju's, through the
// wire, in internal/daemon's TestModelConfigJujuDefaults.)
func TestModelConfigDefaultsAtCreation(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	iaas, caas := state.ModelConfigDefaults(state.ModelTypeIAAS), state.ModelConfigDefaults(state.ModelTypeCAAS)
	if len(iaas) != 65 {
		t.Errorf("%d IAAS defaults, want Juju's 65: %v", len(iaas), slices.Sorted(maps.Keys(iaas)))
	}
	for k, v := range map[string]any{"storage-default-block-source": "kubernetes",
		"storage-default-filesystem-source": "kubernetes", "workload-storage": "", "operator-storage": ""} {
		if _, ok := iaas[k]; ok {
			t.Errorf("IAAS default %q: it is the kubernetes provider's", k)
		}
		if caas[k] != v {
			t.Errorf("CAAS default %q = %#v, want %#v", k, caas[k], v)
		}
	}
	if len(caas) != len(iaas)+4 {
		t.Errorf("%d CAAS defaults, want %d", len(caas), len(iaas)+4)
	}

	check := func(what string, got map[string]any, defaults map[string]any, own map[string]any) {
		t.Helper()
		want := maps.Clone(defaults)
		maps.Copy(want, own)
		if g, w := configJSON(t, got), configJSON(t, want); g != w {
			t.Errorf("%s config:\n got %s\nwant %s", what, g, w)
		}
	}
	for _, uuid := range []string{statetest.ControllerModelUUID, statetest.DefaultModelUUID} {
		m, err := st.Model(uuid)
		if err != nil {
			t.Fatal(err)
		}
		check(m.Name, m.Config, iaas, nil)
	}
	own := map[string]any{"agent-version": "3.3.0", "num-provision-workers": 8, "logging-config": "<root>=DEBUG", "x": "y"}
	m, err := st.AddModel("k8s", state.ModelTypeCAAS, own)
	if err != nil {
		t.Fatal(err)
	}
	check("k8s", m.Config, caas, own)
	if m.Config["num-provision-workers"] != 8.0 {
		t.Errorf("num-provision-workers read back as %#v, want the number 8", m.Config["num-provision-workers"])
	}
	m, err = st.AddModel("edge", state.ModelTypeIAAS, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("edge", m.Config, iaas, nil)
	if m.Type.ProviderType() != "builtin" || state.ModelTypeCAAS.ProviderType() != "kubernetes" {
		t.Errorf("provider types %q, %q", m.Type.ProviderType(), state.ModelTypeCAAS.ProviderType())
	}
}

// Known keys are typed and checked as Juju's schema and Validate do, at
// creation and on update; a refused update writes nothing.
func TestModelConfigValidation(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	model := statetest.DefaultModelUUID

	// Juju's coercion: strings of the key's type are taken, stored typed.
	if err := st.UpdateModelConfig(model, map[string]any{
		"num-provision-workers": "32", "enable-os-upgrade": "false", "net-bond-reconfigure-delay": 30.0,
	}, nil); err != nil {
		t.Fatal(err)
	}
	m, err := st.Model(model)
	if err != nil {
		t.Fatal(err)
	}
	if m.Config["num-provision-workers"] != 32.0 || m.Config["enable-os-upgrade"] != false || m.Config["net-bond-reconfigure-delay"] != 30.0 {
		t.Errorf("coerced values: %#v, %#v, %#v", m.Config["num-provision-workers"], m.Config["enable-os-upgrade"], m.Config["net-bond-reconfigure-delay"])
	}

	for _, c := range []struct {
		key  string
		v    any
		want string
	}{
		{"num-provision-workers", 0, `model config "num-provision-workers": 0 is out of range (1 to 100)`},
		{"num-provision-workers", 101, "101 is out of range (1 to 100)"},
		{"num-provision-workers", 2.5, "want an integer, got the number 2.5"},
		{"num-provision-workers", "many", `want an integer, got the string "many"`},
		{"num-provision-workers", true, "want an integer, got the boolean true"},
		{"num-container-provision-workers", 26, "26 is out of range (1 to 25)"},
		{"net-bond-reconfigure-delay", -1, "-1 is out of range"},
		{"update-status-hook-interval", "30s", "30s is out of range (1m to 60m)"},
		{"update-status-hook-interval", "2h", "2h is out of range (1m to 60m)"},
		{"update-status-hook-interval", "often", `"often" is not a duration`},
		{"update-status-hook-interval", 5, "want a string, got the number 5"},
		{"max-status-history-age", "2 weeks", "is not a duration"},
		{"max-action-results-size", "5 gigs", `size "5 gigs"`},
		{"enable-os-upgrade", "maybe", `want a boolean, got the string "maybe"`},
		{"enable-os-upgrade", 1, "want a boolean, got the number 1"},
		{"provisioner-harvest-mode", "some", `"some" is not one of "all", "none", "unknown", "destroyed"`},
		{"firewall-mode", "wall", `"wall" is not one of "instance", "global", "none"`},
		{"mode", "requires-prompts,lax", `"lax" is not one of "requires-prompts", "strict"`},
		{"logging-output", "file", `"file" is not one of "database", "syslog"`},
		{"container-networking-method", "bridge", `"bridge" is not one of`},
		{"container-inherit-properties", "apt-primary,ssh-keys", `"ssh-keys" is not one of`},
		{"logging-config", "<root>=LOUD", "LOUD"},
		{"secret-backend", "", "empty"},
		{"charmhub-url", "", "empty"},
		{"default-space", "Bad Space", "not a valid space name"},
		{"default-base", "windows@10", "not valid"},
		{"agent-version", "three", `invalid version "three"`},
		{"egress-subnets", "10.0.0.0/8,0.0.0.0/0", `CIDR "0.0.0.0/0" not allowed`},
		{"egress-subnets", "10.0.0.0", `"10.0.0.0" is not a CIDR`},
		{"ssh-allow", "anywhere", `"anywhere" is not a CIDR`},
		{"saas-ingress-allow", "", "empty: want one or more CIDRs"},
		{"fan-config", "10.0.0.0/8", "is not UNDERLAY=OVERLAY"},
		{"fan-config", "10.0.0.0/8=252.0.0.0/16", "the underlay's mask must be longer"},
		{"resource-tags", "owner", `expected "key=value", got "owner"`},
		{"resource-tags", "juju-x=1", `reserved prefix "juju-"`},
		{"resource-tags", "a=1 a=2", `key "a" specified more than once`},
		{"cloudinit-userdata", "runcmd: [ls]", "runcmd not allowed, use preruncmd or postruncmd instead"},
		{"cloudinit-userdata", "users: []", "users not allowed"},
		{"cloudinit-userdata", "packages: [1, 2]", "packages must be a list of strings"},
		{"cloudinit-userdata", "- a list", "must be valid YAML holding a mapping"},
	} {
		rev := st.Revision()
		err := st.UpdateModelConfig(model, map[string]any{c.key: c.v}, nil)
		if !errors.Is(err, errors.NotValid) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `"`+c.key+`"`) {
			t.Errorf("%s=%#v: %v; want NotValid with %q", c.key, c.v, err, c.want)
		}
		if st.Revision() != rev {
			t.Errorf("%s=%#v: a refused update committed", c.key, c.v)
		}
		if _, err := st.AddModel("bad", state.ModelTypeIAAS, map[string]any{c.key: c.v}); !errors.Is(err, errors.NotValid) {
			t.Errorf("AddModel with %s=%#v: %v; want NotValid", c.key, c.v, err)
		}
	}

	// Good values of the checked keys pass; unknown keys keep any type.
	good := map[string]any{
		"update-status-hook-interval": "60m", "mode": "", "logging-output": "syslog, database",
		"container-networking-method": "local", "default-space": "db", "default-base": "ubuntu@24.04",
		"egress-subnets": "10.0.0.0/8, 192.168.0.0/16", "ssh-allow": "", "fan-config": "10.0.0.0/16=252.0.0.0/8",
		"resource-tags": "owner=ops team=", "cloudinit-userdata": "packages: [jq]\npreruncmd: [ls]\n",
		"logging-config": "<root>=WARNING;juju.worker=DEBUG", "max-status-history-size": "512M",
		"custom-key": []any{"anything"},
	}
	if err := st.UpdateModelConfig(model, good, nil); err != nil {
		t.Fatalf("good values: %v", err)
	}
	m, _ = st.Model(model)
	if got := state.CloudInitUserData(m.Config); configJSON(t, got) != `{"packages":["jq"],"preruncmd":["ls"]}` {
		t.Errorf("CloudInitUserData = %v", got)
	}
	if got := state.ResourceTags(m.Config); configJSON(t, got) != `{"owner":"ops","team":""}` {
		t.Errorf("ResourceTags = %v", got)
	}
}

// Rules that tie keys together are checked when one of their keys
// changes; firewall-mode and charmhub-url never change (Juju's immutable
// attributes), though they may be set to their value again.
func TestModelConfigRulesAndImmutables(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	model := statetest.DefaultModelUUID
	update := func(set map[string]any, unset ...string) error {
		return st.UpdateModelConfig(model, set, unset)
	}
	if err := update(map[string]any{"http-proxy": "http://squid:3128"}); err != nil {
		t.Fatal(err)
	}
	if err := update(map[string]any{"juju-http-proxy": "http://squid:3128"}); !errors.Is(err, errors.NotValid) ||
		!strings.Contains(err.Error(), "cannot specify both legacy proxy values and juju proxy values") {
		t.Errorf("both proxies: %v", err)
	}
	if err := update(map[string]any{"juju-https-proxy": "http://squid:3128"}, "http-proxy"); err != nil {
		t.Errorf("swapping the legacy proxy for a juju one in one update: %v", err)
	}
	if err := update(map[string]any{"container-networking-method": "fan"}); err == nil ||
		!strings.Contains(err.Error(), "without fan-config") {
		t.Errorf("fan without fan-config: %v", err)
	}
	if err := update(map[string]any{"container-networking-method": "fan", "fan-config": "10.0.0.0/16=252.0.0.0/8"}); err != nil {
		t.Errorf("fan with fan-config: %v", err)
	}
	if err := update(map[string]any{"logforward-enabled": true}); err == nil || !strings.Contains(err.Error(), "without a syslog-host") {
		t.Errorf("log forwarding without a host: %v", err)
	}
	if err := update(map[string]any{"logforward-enabled": true, "syslog-host": "logs:6514"}); err == nil ||
		!strings.Contains(err.Error(), "syslog-client-cert and syslog-client-key") {
		t.Errorf("log forwarding without certificates: %v", err)
	}

	if err := update(map[string]any{"firewall-mode": "instance", "charmhub-url": "https://api.charmhub.io"}); err != nil {
		t.Errorf("setting the immutable keys to their values: %v", err)
	}
	for k, v := range map[string]any{"firewall-mode": "global", "charmhub-url": "https://hub.example.com"} {
		if err := update(map[string]any{k: v}); !errors.Is(err, errors.NotValid) || !strings.Contains(err.Error(), "cannot change") {
			t.Errorf("changing %s: %v", k, err)
		}
	}
	// A new model may choose them.
	m, err := st.AddModel("global", state.ModelTypeIAAS, map[string]any{"firewall-mode": "global"})
	if err != nil || m.Config["firewall-mode"] != "global" {
		t.Fatalf("AddModel with firewall-mode global: %v, %v", m.Config["firewall-mode"], err)
	}
	if err := st.UpdateModelConfig(m.UUID, nil, []string{"firewall-mode"}); err == nil || !strings.Contains(err.Error(), "cannot change") {
		t.Errorf("resetting a changed immutable key: %v", err)
	}
}

// Unsetting a key with a default sets it back to the default (as Juju's
// --reset); unsetting a key at its default, or one without a default
// that is not set, changes nothing and commits nothing.
func TestModelConfigReset(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	m := statetest.AddModel(t, st, "k8s", state.ModelTypeCAAS)
	w, err := st.WatchModelConfig(m.UUID)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := st.UpdateModelConfig(m.UUID, map[string]any{"num-provision-workers": 2, "workload-storage": "fast", "own": 1}, nil); err != nil {
		t.Fatal(err)
	}
	assertChange(t, w)
	if err := st.UpdateModelConfig(m.UUID, nil, []string{"num-provision-workers", "workload-storage", "own"}); err != nil {
		t.Fatal(err)
	}
	assertChange(t, w)
	got, err := st.Model(m.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if g, want := configJSON(t, got.Config), configJSON(t, state.ModelConfigDefaults(state.ModelTypeCAAS)); g != want {
		t.Errorf("after the reset:\n got %s\nwant %s", g, want)
	}
	rev := st.Revision()
	if err := st.UpdateModelConfig(m.UUID, nil, []string{"num-provision-workers", "own", "never-set"}); err != nil {
		t.Fatal(err)
	}
	assertNoChange(t, w)
	if st.Revision() != rev {
		t.Errorf("resetting keys at their defaults committed (revision %d -> %d)", rev, st.Revision())
	}
}

// The migration to schema version 4 fills Juju's defaults into every
// model, of each type, leaving the values already set (whatever their
// type) as they are, in one transaction; a second run has nothing to do.
func TestMigrateModelConfigDefaults(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	caas := statetest.AddModel(t, st, "k8s", state.ModelTypeCAAS)
	old := map[string]map[string]any{
		statetest.DefaultModelUUID:    {"agent-version": "3.3.0", "num-provision-workers": "7", "logging-config": "<root>=DEBUG", "own": true},
		statetest.ControllerModelUUID: {},
		caas.UUID:                     {"agent-version": "3.3.0", "workload-storage": "standard", "update-status-hook-interval": 10},
	}
	for uuid, cfg := range old {
		if err := state.RegressModelConfig(st, uuid, cfg, 3); err != nil {
			t.Fatal(err)
		}
	}
	w, err := st.WatchModelConfig(caas.UUID)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	rev := st.Revision()
	if err := state.Migrate(st); err != nil {
		t.Fatal(err)
	}
	if !revisionsAfter(st, rev, 1) {
		t.Errorf("the migration took revisions %d -> %d; want one transaction", rev, st.Revision())
	}
	assertChange(t, w)
	if v, err := state.StoredSchemaVersion(st); err != nil || v != state.SchemaVersion {
		t.Errorf("schema version after the migration: %d, %v", v, err)
	}
	for uuid, cfg := range old {
		m, err := st.Model(uuid)
		if err != nil {
			t.Fatal(err)
		}
		want := state.ModelConfigDefaults(m.Type)
		maps.Copy(want, cfg)
		if g, w := configJSON(t, m.Config), configJSON(t, want); g != w {
			t.Errorf("model %s after the migration:\n got %s\nwant %s", m.Name, g, w)
		}
	}
	rev = st.Revision()
	if err := state.Migrate(st); err != nil || st.Revision() != rev {
		t.Errorf("a second migration: %v, revision %d -> %d", err, rev, st.Revision())
	}
}

// A store whose engine refuses the migration as one transaction (etcd's
// --max-txn-ops below one put per model) is migrated in steps: every
// model gets its defaults, the version is stamped once all have them.
func TestMigrateModelConfigDefaultsInSteps(t *testing.T) {
	t.Parallel()
	st := smallTxnState(t, 12)
	var uuids []string
	for i := range 30 {
		m := statetest.AddModel(t, st, fmt.Sprintf("m%d", i), state.ModelTypeIAAS)
		uuids = append(uuids, m.UUID)
	}
	for _, uuid := range uuids {
		if err := state.RegressModelConfig(st, uuid, map[string]any{"own": "x"}, 3); err != nil {
			t.Fatal(err)
		}
	}
	if err := state.Migrate(st); err != nil {
		t.Fatal(err)
	}
	if v, err := state.StoredSchemaVersion(st); err != nil || v != state.SchemaVersion {
		t.Errorf("schema version after the migration: %d, %v", v, err)
	}
	for _, uuid := range uuids {
		m, err := st.Model(uuid)
		if err != nil {
			t.Fatal(err)
		}
		want := state.ModelConfigDefaults(m.Type)
		want["own"] = "x"
		if g, w := configJSON(t, m.Config), configJSON(t, want); g != w {
			t.Errorf("model %s after the migration:\n got %s\nwant %s", m.Name, g, w)
		}
	}
}
