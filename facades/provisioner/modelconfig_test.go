package provisioner_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// jujuModelConfigDefaults is the config Juju's controller stores when it
// creates a model, as its Provisioner.ModelConfig sends it (the
// attributes of its config.Config, by encoding/json), each value as the
// JSON on the wire. Written from Juju's source at 1752b71fcf00:
//
//   - environs/config/config.go, defaultConfigValues: the 65 keys and
//     their values, with the constants they name (FwInstance "instance",
//     HarvestDestroyed "destroyed", RequiresPromptsMode "requires-prompts",
//     DefaultUpdateStatusHookInterval "5m", DefaultStatusHistoryAge and
//     DefaultActionResultsAge "336h", DefaultStatusHistorySize and
//     DefaultActionResultsSize "5G", DefaultLxdSnapChannel "5.0/stable",
//     DefaultSecretBackend "auto", charmhub.DefaultServerURL
//     "https://api.charmhub.io");
//   - the types of configSchema as its checkers coerce them: Tint keys
//     (schema.ForceInt) are numbers, Tbool keys booleans, and
//     resource-tags (Tattrs) the map its "" parses to (Juju's
//     state/initialize_test.go: "Config as read from state has resources
//     tags coerced to a map");
//   - logging-config as config.New stores an empty one
//     (setLoggingFromEnviron: "<root>=INFO").
//
// The model's own keys (name, uuid, type, agent-version) are checked
// beside it. Juju also stores the controller's system SSH key as
// authorized-keys; provisiond has none, and Juju's schema leaves the key
// optional.
var jujuModelConfigDefaults = map[string]string{
	// Network.
	"firewall-mode":               `"instance"`,
	"disable-network-management":  `false`,
	"ignore-machine-addresses":    `false`,
	"ssl-hostname-verification":   `true`,
	"proxy-ssh":                   `false`,
	"default-space":               `""`,
	"net-bond-reconfigure-delay":  `17`,
	"container-networking-method": `""`,

	"default-base": `""`,

	"provisioner-harvest-mode":        `"destroyed"`,
	"num-provision-workers":           `16`,
	"num-container-provision-workers": `4`,
	"resource-tags":                   `{}`,
	"logging-config":                  `"<root>=INFO"`,
	"logging-output":                  `""`,
	"automatically-retry-hooks":       `true`,
	"enable-os-refresh-update":        `true`,
	"enable-os-upgrade":               `true`,
	"development":                     `false`,
	"test-mode":                       `false`,
	"mode":                            `"requires-prompts"`,
	"disable-telemetry":               `false`,
	"transmit-vendor-metrics":         `true`,
	"update-status-hook-interval":     `"5m"`,
	"egress-subnets":                  `""`,
	"fan-config":                      `""`,
	"cloudinit-userdata":              `""`,
	"container-inherit-properties":    `""`,
	"backup-dir":                      `""`,
	"lxd-snap-channel":                `"5.0/stable"`,

	"charmhub-url": `"https://api.charmhub.io"`,

	// Image and agent streams and URLs.
	"image-stream":                               `"released"`,
	"image-metadata-url":                         `""`,
	"image-metadata-defaults-disabled":           `false`,
	"agent-stream":                               `"released"`,
	"agent-metadata-url":                         `""`,
	"container-image-stream":                     `"released"`,
	"container-image-metadata-url":               `""`,
	"container-image-metadata-defaults-disabled": `false`,

	// Log forward settings.
	"logforward-enabled": `false`,

	// Proxy settings.
	"http-proxy":       `""`,
	"https-proxy":      `""`,
	"ftp-proxy":        `""`,
	"no-proxy":         `"127.0.0.1,localhost,::1"`,
	"juju-http-proxy":  `""`,
	"juju-https-proxy": `""`,
	"juju-ftp-proxy":   `""`,
	"juju-no-proxy":    `"127.0.0.1,localhost,::1"`,

	"apt-http-proxy":  `""`,
	"apt-https-proxy": `""`,
	"apt-ftp-proxy":   `""`,
	"apt-no-proxy":    `""`,
	"apt-mirror":      `""`,

	"snap-http-proxy":       `""`,
	"snap-https-proxy":      `""`,
	"snap-store-proxy":      `""`,
	"snap-store-assertions": `""`,
	"snap-store-proxy-url":  `""`,

	// Status history settings.
	"max-status-history-age":  `"336h"`,
	"max-status-history-size": `"5G"`,
	"max-action-results-age":  `"336h"`,
	"max-action-results-size": `"5G"`,

	// Secret settings.
	"secret-backend": `"auto"`,

	// Model firewall settings.
	"ssh-allow":          `"0.0.0.0/0,::/0"`,
	"saas-ingress-allow": `"0.0.0.0/0,::/0"`,
}

// jujuCAASConfigDefaults are the keys Juju's kubernetes provider adds to a
// new model's config (caas/kubernetes/provider: PrepareConfig sets the
// default storage sources to its own type; Validate adds
// providerConfigDefaults), stored as they are.
var jujuCAASConfigDefaults = map[string]string{
	"storage-default-block-source":      `"kubernetes"`,
	"storage-default-filesystem-source": `"kubernetes"`,
	"workload-storage":                  `""`,
	"operator-storage":                  `""`,
}

// checkJujuConfig compares a config's JSON, key by key, with the table
// want: every key with the same JSON value, none missing, none extra.
// Numbers compare as written (16 is not 16.0); strings as decoded
// (encoding/json, Juju's as ours, escapes "<" as \u003c).
func checkJujuConfig(t *testing.T, what string, raw json.RawMessage, want map[string]string) {
	t.Helper()
	var got map[string]json.RawMessage
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("%s: %v in %s", what, err, raw)
	}
	literal := func(b []byte) any {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("%s: %v in %s", what, err, b)
		}
		return v
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("%s: key %q missing; Juju sends %s", what, k, want[k])
		case !reflect.DeepEqual(literal(g), literal([]byte(want[k]))):
			t.Errorf("%s: %q is %s on the wire; Juju sends %s", what, k, g, want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: key %q (%s) is not Juju's", what, k, got[k])
		}
	}
}

// jujuWant is the table with the model's own keys added.
func jujuWant(t *testing.T, own map[string]any, tables ...map[string]string) map[string]string {
	t.Helper()
	want := map[string]string{}
	for _, tab := range tables {
		maps.Copy(want, tab)
	}
	for k, v := range own {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		want[k] = string(b)
	}
	return want
}

// modelConfigBytes is the "config" of a Provisioner v11 ModelConfig reply,
// as sent.
func modelConfigBytes(t *testing.T, c *client.Conn) json.RawMessage {
	t.Helper()
	var res struct {
		Config json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal(testkit.RawCall(t, c, 11, "ModelConfig", nil), &res); err != nil {
		t.Fatal(err)
	}
	return res.Config
}

// A new model's config, as the Provisioner sends it, is Juju's: every key
// of Juju's defaults with Juju's value and JSON type (16, not "16" or
// 16.0), plus the model's name, uuid, type and agent-version. The models
// made at bootstrap and those added later alike; a CAAS model holds the
// kubernetes provider's keys too (read through ModelAdmin, which shows the
// stored config: resource-tags is the stored string there).
func TestModelConfigJujuDefaults(t *testing.T) {
	s := provisiondtest.Start(t)
	creds := s.Credentials()
	for _, m := range []struct{ name, uuid string }{
		{"default", creds.DefaultModelUUID},
		{"controller", creds.ControllerModelUUID},
		{"edge", s.AddModel(t, "edge", "iaas", nil)},
	} {
		own := map[string]any{"name": m.name, "uuid": m.uuid, "type": "builtin", "agent-version": daemon.ServerVersion}
		checkJujuConfig(t, m.name, modelConfigBytes(t, s.ControllerAgent(t, m.uuid)), jujuWant(t, own, jujuModelConfigDefaults))
	}

	s.AddModel(t, "k8s", "caas", nil)
	var info struct {
		Config   json.RawMessage `json:"config"`
		Defaults json.RawMessage `json:"defaults"`
	}
	if err := s.Admin(t, "").Call(testkit.Ctx(t), "ModelAdmin", 1, "", "ModelConfig", params.ModelArgs{Model: "k8s"}, &info); err != nil {
		t.Fatal(err)
	}
	stored := jujuWant(t, map[string]any{"agent-version": daemon.ServerVersion, "resource-tags": ""},
		jujuModelConfigDefaults, jujuCAASConfigDefaults)
	checkJujuConfig(t, "k8s (ModelAdmin)", info.Config, stored)
	delete(stored, "agent-version")
	checkJujuConfig(t, "k8s defaults (ModelAdmin)", info.Defaults, stored)
}

// A store written by the previous schema version (3), whose models hold
// only the keys set on them, gets Juju's defaults when the daemon opens
// it: the Provisioner then sends Juju's config, with the values set before
// the upgrade (of any type) kept.
func TestModelConfigMigratedStoreJujuDefaults(t *testing.T) {
	dir := t.TempDir()
	s, err := provisiondtest.New(provisiondtest.WithDataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	creds := s.Credentials()
	edge := s.AddModel(t, "edge", "iaas", nil)
	before := map[string]map[string]any{
		creds.DefaultModelUUID: {"agent-version": "3.3.0", "num-provision-workers": 3, "logging-config": "<root>=DEBUG"},
		edge:                   {"agent-version": "3.3.0", "apt-mirror": "http://mirror", "enable-os-upgrade": "no"},
	}
	// Write the records as a version 3 build left them: each model's
	// config as set, and the state schema version 3.
	testkit.WriteModelConfigs(t, testkit.Daemon(s), before, "3")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = provisiondtest.Start(t, provisiondtest.WithDataDir(dir))
	if !strings.Contains(s.Log(), "state schema migrated") {
		t.Errorf("no migration logged:\n%s", s.Log())
	}
	for uuid, cfg := range before {
		name := "default"
		if uuid == edge {
			name = "edge"
		}
		own := map[string]any{"name": name, "uuid": uuid, "type": "builtin"}
		maps.Copy(own, cfg)
		checkJujuConfig(t, name+" after the migration", modelConfigBytes(t, s.ControllerAgent(t, uuid)), jujuWant(t, own, jujuModelConfigDefaults))
	}
}

// ContainerConfig's proxies come from the model config as Juju's config
// accessors derive them (environs/config: LegacyProxySettings,
// JujuProxySettings, AptProxySettings with its fallbacks and
// addSchemeIfMissing, SnapProxySettings), each object with all five keys
// of Juju's proxy.Settings, AutoNoProxy always "" from a controller.
func TestContainerConfigProxiesAsJuju(t *testing.T) {
	d := testkit.Start(t, nil)
	model := d.Credentials().DefaultModelUUID
	agent := testkit.LoginController(t, d, model)
	const local = "127.0.0.1,localhost,::1"
	settings := func(http, https, ftp, noProxy string) string {
		b, err := json.Marshal(map[string]string{"Http": http, "Https": https, "Ftp": ftp, "NoProxy": noProxy, "AutoNoProxy": ""})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, c := range []struct {
		name  string
		set   map[string]any
		unset []string
		want  map[string]string // ContainerConfig key: Settings JSON
	}{
		{"the defaults", nil, nil, map[string]string{
			"legacy-proxy": settings("", "", "", local),
			"juju-proxy":   settings("", "", "", local),
			"apt-proxy":    settings("", "", "", local), // apt-no-proxy falls back to juju-no-proxy
			"snap-proxy":   settings("", "", "", ""),
		}},
		{"legacy proxies", map[string]any{"http-proxy": "squid:3128", "https-proxy": "https://squid:3129", "no-proxy": "10.0.0.1"}, nil, map[string]string{
			"legacy-proxy": settings("squid:3128", "https://squid:3129", "", "10.0.0.1"),
			"juju-proxy":   settings("", "", "", local),
			"apt-proxy":    settings("http://squid:3128", "https://squid:3129", "", "10.0.0.1"), // no-proxy: a legacy proxy is set
			"snap-proxy":   settings("", "", "", ""),
		}},
		{"juju proxies under apt ones", map[string]any{"juju-http-proxy": "http://j:1", "juju-ftp-proxy": "j:21", "juju-no-proxy": "10.0.0.0/8",
			"apt-https-proxy": "a:2", "snap-http-proxy": "s:3", "snap-https-proxy": "s:4"}, []string{"http-proxy", "https-proxy", "no-proxy"}, map[string]string{
			"legacy-proxy": settings("", "", "", local),
			"juju-proxy":   settings("http://j:1", "", "j:21", "10.0.0.0/8"),
			"apt-proxy":    settings("http://j:1", "https://a:2", "ftp://j:21", "10.0.0.0/8"),
			"snap-proxy":   settings("s:3", "s:4", "", ""),
		}},
	} {
		if err := d.State().UpdateModelConfig(t.Context(), model, c.set, c.unset); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(testkit.RawCall(t, agent, 11, "ContainerConfig", nil), &got); err != nil {
			t.Fatal(err)
		}
		for k, want := range c.want {
			var g, w map[string]string
			if err := json.Unmarshal(got[k], &g); err != nil {
				t.Fatalf("%s: %s = %s: %v", c.name, k, got[k], err)
			}
			_ = json.Unmarshal([]byte(want), &w)
			if !maps.Equal(g, w) {
				t.Errorf("%s: %s = %s; want %s", c.name, k, got[k], want)
			}
		}
	}
}
