package state

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/juju/errors"
	"github.com/juju/loggo"
	"github.com/juju/names/v5"
	"go.yaml.in/yaml/v3"

	"github.com/provisiond/provisiond/environ"
	"github.com/provisiond/provisiond/size"
)

// A model's config is stored as Juju's controller stores it: every key of
// Juju's model config defaults is written when the model is created (and
// filled into older models by the schema migration to version 4), so
// Juju's agents, which fill in nothing themselves, read Juju's values
// (num-provision-workers 16, update-status-hook-interval "5m", ...).
// Known keys are checked and typed as Juju's config schema types them;
// unsetting a key that has a default sets it back to the default, as
// `juju model-config --reset` does.
//
// The defaults are those of Juju's environs/config (defaultConfigValues,
// logging-config as config.New stores it), plus, in a CAAS model, the keys
// Juju's kubernetes provider adds when it prepares a model's config. The
// model's name, uuid and provider type are not stored: the Provisioner
// answers them from the model itself (ProviderType).

// CAASProviderType is the provider type of CAAS models: Juju's kubernetes
// provider.
const CAASProviderType = "kubernetes"

// ProviderType is the "type" key of a model's config as Juju's agents read
// it: the provider's type, environ.Type (the built-in provider) for IAAS
// models and "kubernetes" for CAAS ones.
func (t ModelType) ProviderType() string {
	if t == ModelTypeCAAS {
		return CAASProviderType
	}
	return environ.Type
}

// Keys of the model config that the daemon reads.
const (
	ConfigResourceTags      = "resource-tags"
	ConfigCloudInitUserData = "cloudinit-userdata"
)

// configType is the type of a known config key, as Juju's schema has it
// (environschema: string, bool, int, attrs).
type configType int

const (
	configString configType = iota
	configBool
	configInt
	configTags // Juju's Tattrs: "k=v k2=v2", stored as the string
)

// configAttr is a known key: its type, Juju's default (nil: none), a
// check of a value of the right type, and whether it may change once set.
type configAttr struct {
	typ       configType
	def       any
	check     func(v any) error
	immutable bool
}

// modelConfigSchema holds the keys of Juju's model config schema
// (environs/config/config.go configSchema), with the defaults of its
// defaultConfigValues, and the kubernetes provider's keys
// (caas/kubernetes/provider/providerconfig.go). Checks follow Juju's
// Validate; where Juju takes a value that breaks its own agents (a worker
// pool of 0 or less) provisiond refuses it.
var modelConfigSchema = map[string]configAttr{
	// Identity and agents.
	"agent-version":   {typ: configString, check: checkAgentVersion},
	"authorized-keys": {typ: configString},
	"extra-info":      {typ: configString},

	// Network.
	"firewall-mode":               {typ: configString, def: "instance", check: oneOf("instance", "global", "none"), immutable: true},
	"disable-network-management":  {typ: configBool, def: false},
	"ignore-machine-addresses":    {typ: configBool, def: false},
	"ssl-hostname-verification":   {typ: configBool, def: true},
	"proxy-ssh":                   {typ: configBool, def: false},
	"default-space":               {typ: configString, def: "", check: checkSpaceName},
	"net-bond-reconfigure-delay":  {typ: configInt, def: 17, check: intRange(0, math.MaxInt32)},
	"container-networking-method": {typ: configString, def: "", check: oneOf("", "fan", "provider", "local")},
	"egress-subnets":              {typ: configString, def: "", check: checkEgressSubnets},
	"fan-config":                  {typ: configString, def: "", check: checkFanConfig},
	"ssh-allow":                   {typ: configString, def: "0.0.0.0/0,::/0", check: cidrList(true)},
	"saas-ingress-allow":          {typ: configString, def: "0.0.0.0/0,::/0", check: cidrList(false)},

	// Provisioning.
	"default-base":                      {typ: configString, def: "", check: checkDefaultBase},
	"provisioner-harvest-mode":          {typ: configString, def: "destroyed", check: oneOf("all", "none", "unknown", "destroyed")},
	"num-provision-workers":             {typ: configInt, def: 16, check: intRange(1, 100)},
	"num-container-provision-workers":   {typ: configInt, def: 4, check: intRange(1, 25)},
	ConfigResourceTags:                  {typ: configTags, def: "", check: checkResourceTags},
	"enable-os-refresh-update":          {typ: configBool, def: true},
	"enable-os-upgrade":                 {typ: configBool, def: true},
	ConfigCloudInitUserData:             {typ: configString, def: "", check: checkCloudInitUserData},
	"container-inherit-properties":      {typ: configString, def: "", check: listOf("apt-primary", "apt-sources", "apt-security", "ca-certs")},
	"lxd-snap-channel":                  {typ: configString, def: "5.0/stable"},
	"storage-default-block-source":      {typ: configString},
	"storage-default-filesystem-source": {typ: configString},

	// Agents and hooks.
	"logging-config":              {typ: configString, def: "<root>=INFO", check: checkLoggingConfig},
	"logging-output":              {typ: configString, def: "", check: listOf("database", "syslog")},
	"automatically-retry-hooks":   {typ: configBool, def: true},
	"update-status-hook-interval": {typ: configString, def: "5m", check: checkHookInterval},
	"backup-dir":                  {typ: configString, def: ""},
	"charmhub-url":                {typ: configString, def: "https://api.charmhub.io", check: checkCharmhubURL, immutable: true},
	"secret-backend":              {typ: configString, def: "auto", check: nonEmpty},

	// Modes and telemetry.
	"development":             {typ: configBool, def: false},
	"test-mode":               {typ: configBool, def: false},
	"mode":                    {typ: configString, def: "requires-prompts", check: listOf("requires-prompts", "strict")},
	"disable-telemetry":       {typ: configBool, def: false},
	"transmit-vendor-metrics": {typ: configBool, def: true},

	// Image and agent streams and URLs.
	"image-stream":                               {typ: configString, def: "released"},
	"image-metadata-url":                         {typ: configString, def: ""},
	"image-metadata-defaults-disabled":           {typ: configBool, def: false},
	"agent-stream":                               {typ: configString, def: "released"},
	"agent-metadata-url":                         {typ: configString, def: ""},
	"container-image-stream":                     {typ: configString, def: "released"},
	"container-image-metadata-url":               {typ: configString, def: ""},
	"container-image-metadata-defaults-disabled": {typ: configBool, def: false},

	// Log forwarding.
	"logforward-enabled": {typ: configBool, def: false},
	"syslog-host":        {typ: configString},
	"syslog-ca-cert":     {typ: configString},
	"syslog-client-cert": {typ: configString},
	"syslog-client-key":  {typ: configString},

	// Proxies.
	"http-proxy":       {typ: configString, def: ""},
	"https-proxy":      {typ: configString, def: ""},
	"ftp-proxy":        {typ: configString, def: ""},
	"no-proxy":         {typ: configString, def: "127.0.0.1,localhost,::1"},
	"juju-http-proxy":  {typ: configString, def: ""},
	"juju-https-proxy": {typ: configString, def: ""},
	"juju-ftp-proxy":   {typ: configString, def: ""},
	"juju-no-proxy":    {typ: configString, def: "127.0.0.1,localhost,::1"},
	"apt-http-proxy":   {typ: configString, def: ""},
	"apt-https-proxy":  {typ: configString, def: ""},
	"apt-ftp-proxy":    {typ: configString, def: ""},
	"apt-no-proxy":     {typ: configString, def: ""},
	"apt-mirror":       {typ: configString, def: ""},

	"snap-http-proxy":       {typ: configString, def: ""},
	"snap-https-proxy":      {typ: configString, def: ""},
	"snap-store-proxy":      {typ: configString, def: ""},
	"snap-store-assertions": {typ: configString, def: ""},
	"snap-store-proxy-url":  {typ: configString, def: ""},

	// Status history and action results.
	"max-status-history-age":  {typ: configString, def: "336h", check: checkDuration},
	"max-status-history-size": {typ: configString, def: "5G", check: checkSize},
	"max-action-results-age":  {typ: configString, def: "336h", check: checkDuration},
	"max-action-results-size": {typ: configString, def: "5G", check: checkSize},

	// The kubernetes provider's keys.
	"workload-storage": {typ: configString},
	"operator-storage": {typ: configString},
}

// caasConfigDefaults are the keys Juju's kubernetes provider adds to a new
// model's config (PrepareConfig: the default storage sources; Validate:
// its own keys with their defaults).
var caasConfigDefaults = map[string]any{
	"storage-default-block-source":      CAASProviderType,
	"storage-default-filesystem-source": CAASProviderType,
	"workload-storage":                  "",
	"operator-storage":                  "",
}

// modelConfigDefaults are the defaults of each model type, as stored (a
// JSON round trip: numbers are float64).
var modelConfigDefaults = func() map[ModelType]map[string]any {
	iaas := map[string]any{}
	for k, a := range modelConfigSchema {
		if a.def != nil {
			iaas[k] = a.def
		}
	}
	caas := maps.Clone(iaas)
	maps.Copy(caas, caasConfigDefaults)
	out := map[ModelType]map[string]any{}
	for t, d := range map[ModelType]map[string]any{ModelTypeIAAS: iaas, ModelTypeCAAS: caas} {
		b, err := json.Marshal(d)
		if err != nil {
			panic(err)
		}
		n := map[string]any{}
		if err := json.Unmarshal(b, &n); err != nil {
			panic(err)
		}
		out[t] = n
	}
	return out
}()

// ModelConfigDefaults returns the config a new model of type t starts
// with, before the config it is created with: Juju's defaults. The caller
// may modify it.
func ModelConfigDefaults(t ModelType) map[string]any {
	return maps.Clone(modelConfigDefaults[t])
}

// withConfigDefaults returns cfg (normalized) with the defaults of model
// type t it lacks, and whether it lacked any. cfg is not modified.
func withConfigDefaults(t ModelType, cfg map[string]any) (map[string]any, bool) {
	defs := modelConfigDefaults[t]
	out := make(map[string]any, len(cfg)+len(defs))
	added := false
	for k, v := range defs {
		if _, ok := cfg[k]; !ok {
			out[k] = v
			added = true
		}
	}
	maps.Copy(out, cfg)
	return out, added
}

// coerceModelConfig returns set with the values of known keys in their
// types (Juju's schema coercion: "16" is the int 16 and "true" the
// boolean for keys of those types) and checked; other keys are left as
// they are. The first bad value, in key order, is reported.
func coerceModelConfig(set map[string]any) (map[string]any, error) {
	out := maps.Clone(set)
	for _, k := range slices.Sorted(maps.Keys(set)) {
		a, ok := modelConfigSchema[k]
		if !ok {
			continue
		}
		v, err := a.coerce(set[k])
		if err == nil && a.check != nil {
			err = a.check(v)
		}
		if err != nil {
			return nil, errors.NewNotValid(nil, fmt.Sprintf("model config %q: %v", k, err))
		}
		out[k] = v
	}
	return out, nil
}

// coerce converts v to the key's type as Juju's schema checkers do.
func (a configAttr) coerce(v any) (any, error) {
	switch a.typ {
	case configBool:
		switch x := v.(type) {
		case bool:
			return x, nil
		case string:
			if b, err := strconv.ParseBool(x); err == nil {
				return b, nil
			}
		}
		return nil, fmt.Errorf("want a boolean, got %s", describe(v))
	case configInt:
		switch x := v.(type) {
		case int:
			return x, nil
		case int64:
			return x, nil
		case float64:
			if x == math.Trunc(x) && math.Abs(x) <= 1<<53 {
				return int64(x), nil
			}
		case string:
			if n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64); err == nil {
				return n, nil
			}
		}
		return nil, fmt.Errorf("want an integer, got %s", describe(v))
	default:
		if s, ok := v.(string); ok {
			return s, nil
		}
		return nil, fmt.Errorf("want a string, got %s", describe(v))
	}
}

// describe names a value for an error: its JSON type and the value.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		return "the string " + quotePrefix(x)
	case bool:
		return fmt.Sprintf("the boolean %t", x)
	case float64, int, int64:
		return fmt.Sprintf("the number %v", x)
	case nil:
		return "null"
	}
	return fmt.Sprintf("a %T", v)
}

// applyModelConfig is applyConfig for a model of type t: an unset key
// with a default takes the default back.
func applyModelConfig(t ModelType, old, set map[string]any, unset []string) (map[string]any, bool) {
	next, _ := applyConfig(old, set, unset)
	defs := modelConfigDefaults[t]
	for _, k := range unset {
		if v, ok := defs[k]; ok {
			next[k] = v
		}
	}
	return next, !configEqual(old, next)
}

// checkModelConfigChange checks an update from old to next (both
// normalized; old nil for a new model): immutable keys keep their value,
// and the rules that tie keys together hold when one of their keys
// changed (so a store written before a rule does not block unrelated
// updates).
func checkModelConfigChange(old, next map[string]any) error {
	changed := func(keys ...string) bool {
		for _, k := range keys {
			ov, had := old[k]
			nv, has := next[k]
			if had != has || (had && !configValueEqual(ov, nv)) {
				return true
			}
		}
		return false
	}
	if old != nil {
		for _, k := range slices.Sorted(maps.Keys(modelConfigSchema)) {
			if !modelConfigSchema[k].immutable {
				continue
			}
			ov, had := old[k]
			if had && changed(k) {
				return errors.NewNotValid(nil, fmt.Sprintf("model config %q cannot change from %s to %s", k, describe(ov), describe(next[k])))
			}
		}
	}
	for _, r := range modelConfigRules {
		if changed(r.keys...) {
			if err := r.check(next); err != nil {
				return errors.NewNotValid(nil, "model config: "+err.Error())
			}
		}
	}
	return nil
}

// configValueEqual compares two normalized values.
func configValueEqual(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// modelConfigRules tie keys together, as Juju's Validate does.
var modelConfigRules = []struct {
	keys  []string
	check func(cfg map[string]any) error
}{{
	// The user should not specify both old and new proxy values (the
	// no-proxy keys have defaults, so they do not count).
	keys: []string{"http-proxy", "https-proxy", "ftp-proxy", "juju-http-proxy", "juju-https-proxy", "juju-ftp-proxy"},
	check: func(cfg map[string]any) error {
		if HasLegacyProxy(cfg) && HasJujuProxy(cfg) {
			return errors.New("cannot specify both legacy proxy values and juju proxy values")
		}
		return nil
	},
}, {
	keys: []string{"container-networking-method", "fan-config"},
	check: func(cfg map[string]any) error {
		if cfg["container-networking-method"] == "fan" && configStr(cfg, "fan-config") == "" {
			return errors.New("container-networking-method cannot be set to 'fan' without fan-config set")
		}
		return nil
	},
}, {
	keys:  []string{"logforward-enabled", "syslog-host", "syslog-ca-cert", "syslog-client-cert", "syslog-client-key"},
	check: checkLogForwarding,
}}

// configStr is key k of cfg when it is a string, else "".
func configStr(cfg map[string]any, k string) string {
	s, _ := cfg[k].(string)
	return s
}

// HasLegacyProxy reports whether cfg sets an http, https or ftp proxy with
// the legacy keys; HasJujuProxy with the juju- keys (Juju's config
// accessors of the same names).
func HasLegacyProxy(cfg map[string]any) bool {
	return configStr(cfg, "http-proxy") != "" || configStr(cfg, "https-proxy") != "" || configStr(cfg, "ftp-proxy") != ""
}

// HasJujuProxy: see HasLegacyProxy.
func HasJujuProxy(cfg map[string]any) bool {
	return configStr(cfg, "juju-http-proxy") != "" || configStr(cfg, "juju-https-proxy") != "" || configStr(cfg, "juju-ftp-proxy") != ""
}

// Checks of single values, by the rule Juju's Validate applies.

func oneOf(values ...string) func(any) error {
	return func(v any) error {
		if !slices.Contains(values, v.(string)) {
			return fmt.Errorf("%q is not one of %s", v, quoteList(values))
		}
		return nil
	}
}

// listOf checks a comma-separated list whose items (spaces trimmed) are
// among values; empty items are ignored.
func listOf(values ...string) func(any) error {
	return func(v any) error {
		for _, item := range strings.Split(v.(string), ",") {
			item = strings.TrimSpace(item)
			if item != "" && !slices.Contains(values, item) {
				return fmt.Errorf("%q is not one of %s", item, quoteList(values))
			}
		}
		return nil
	}
}

func quoteList(values []string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}

func intRange(lo, hi int64) func(any) error {
	return func(v any) error {
		var n int64
		switch x := v.(type) {
		case int:
			n = int64(x)
		case int64:
			n = x
		}
		if n < lo || n > hi {
			return fmt.Errorf("%d is out of range (%d to %d)", n, lo, hi)
		}
		return nil
	}
}

func checkDuration(v any) error {
	if _, err := time.ParseDuration(v.(string)); err != nil {
		return fmt.Errorf("%q is not a duration such as 5m or 336h", v)
	}
	return nil
}

// checkHookInterval checks update-status-hook-interval: a duration from
// 1m to 60m.
func checkHookInterval(v any) error {
	if err := checkDuration(v); err != nil {
		return err
	}
	if d, _ := time.ParseDuration(v.(string)); d < time.Minute || d > time.Hour {
		return fmt.Errorf("%s is out of range (1m to 60m)", v)
	}
	return nil
}

func nonEmpty(v any) error {
	if v.(string) == "" {
		return errors.New("empty")
	}
	return nil
}

func checkAgentVersion(v any) error {
	_, err := environ.ParseNumber(v.(string))
	return err
}

func checkSpaceName(v any) error {
	if s := v.(string); s != "" && !names.IsValidSpace(s) {
		return fmt.Errorf("%q is not a valid space name", s)
	}
	return nil
}

func checkDefaultBase(v any) error {
	if s := v.(string); s != "" {
		if _, err := ParseBase(s); err != nil {
			return err
		}
	}
	return nil
}

func checkSize(v any) error {
	_, err := size.ParseMiB(v.(string))
	return err
}

// cidrList checks a comma-separated list of CIDRs; empty only when
// allowEmpty.
func cidrList(allowEmpty bool) func(any) error {
	return func(v any) error {
		s := v.(string)
		if s == "" && !allowEmpty {
			return errors.New("empty: want one or more CIDRs")
		}
		_, err := splitCIDRs(s, false)
		return err
	}
}

// splitCIDRs splits a comma-separated list of CIDRs ("": none), each
// trimmed of spaces when trim, and checks them.
func splitCIDRs(s string, trim bool) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	cidrs := strings.Split(s, ",")
	for _, c := range cidrs {
		if trim {
			c = strings.TrimSpace(c)
		}
		if _, _, err := net.ParseCIDR(c); err != nil {
			return nil, fmt.Errorf("%q is not a CIDR", c)
		}
	}
	return cidrs, nil
}

// checkEgressSubnets checks egress-subnets: CIDRs, spaces around them
// allowed, but not the whole IPv4 space.
func checkEgressSubnets(v any) error {
	cidrs, err := splitCIDRs(v.(string), true)
	for _, c := range cidrs {
		if c == "0.0.0.0/0" {
			return fmt.Errorf("CIDR %q not allowed", c)
		}
	}
	return err
}

// checkFanConfig checks Juju's fan configuration: space-separated
// UNDERLAY=OVERLAY pairs of CIDRs, the underlay's mask longer.
func checkFanConfig(v any) error {
	s := v.(string)
	if s == "" {
		return nil
	}
	for _, entry := range strings.Split(s, " ") {
		cidrs := strings.Split(entry, "=")
		if len(cidrs) != 2 {
			return fmt.Errorf("%q is not UNDERLAY=OVERLAY", entry)
		}
		var bits [2]int
		for i, c := range cidrs {
			_, n, err := net.ParseCIDR(strings.TrimSpace(c))
			if err != nil {
				return fmt.Errorf("%q is not a CIDR", c)
			}
			bits[i], _ = n.Mask.Size()
		}
		if bits[0] <= bits[1] {
			return fmt.Errorf("%q: the underlay's mask must be longer than the overlay's", entry)
		}
	}
	return nil
}

func checkLoggingConfig(v any) error {
	_, err := loggo.ParseConfigString(v.(string))
	return err
}

func checkCharmhubURL(v any) error {
	s := v.(string)
	if s == "" {
		return errors.New("empty")
	}
	if _, err := url.ParseRequestURI(s); err != nil {
		return fmt.Errorf("%q is not a URL", s)
	}
	return nil
}

// ParseResourceTags parses resource-tags as Juju does: space-separated
// KEY=VALUE pairs (the value may be empty), each key once, none with
// Juju's reserved prefix "juju-".
func ParseResourceTags(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Fields(s) {
		k, v, ok := strings.Cut(kv, "=")
		switch {
		case !ok || k == "":
			return nil, fmt.Errorf("expected \"key=value\", got %q", kv)
		case strings.HasPrefix(k, "juju-"):
			return nil, fmt.Errorf("tag %q uses reserved prefix \"juju-\"", k)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("key %q specified more than once", k)
		}
		out[k] = v
	}
	return out, nil
}

func checkResourceTags(v any) error {
	_, err := ParseResourceTags(v.(string))
	return err
}

// ResourceTags reads a config's resource-tags: the stored string, or a
// map. Pairs that do not parse are skipped.
func ResourceTags(cfg map[string]any) map[string]string {
	out := map[string]string{}
	switch v := cfg[ConfigResourceTags].(type) {
	case string:
		for _, kv := range strings.Fields(v) {
			if k, val, ok := strings.Cut(kv, "="); ok && k != "" {
				out[k] = val
			}
		}
	case map[string]any:
		for k, val := range v {
			out[k] = fmt.Sprint(val)
		}
	}
	return out
}

// ParseCloudInitUserData parses cloudinit-userdata as Juju does: YAML
// holding a mapping; its packages a list of strings; users, runcmd and
// bootcmd refused (Juju writes them itself; preruncmd and postruncmd are
// the user's). "" is nil.
func ParseCloudInitUserData(s string) (map[string]any, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("must be valid YAML holding a mapping: %v", yamlReason(err))
	}
	if pkgs, ok := m["packages"]; ok {
		list, ok := pkgs.([]any)
		if !ok {
			return nil, errors.New("packages must be a list of strings")
		}
		for _, p := range list {
			if _, ok := p.(string); !ok {
				return nil, errors.New("packages must be a list of strings")
			}
		}
	}
	for _, k := range []string{"users", "bootcmd"} {
		if _, ok := m[k]; ok {
			return nil, fmt.Errorf("%s not allowed", k)
		}
	}
	if _, ok := m["runcmd"]; ok {
		return nil, errors.New("runcmd not allowed, use preruncmd or postruncmd instead")
	}
	// A round trip through JSON makes it what the wire carries (YAML's
	// integers and times become numbers and strings).
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("holds a value JSON cannot carry: %v", err)
	}
	out := map[string]any{}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// yamlReason is the message of a YAML error without the package's prefix.
func yamlReason(err error) string {
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

func checkCloudInitUserData(v any) error {
	_, err := ParseCloudInitUserData(v.(string))
	return err
}

// CloudInitUserData returns a config's cloudinit-userdata as a mapping
// (nil when unset, empty or not valid).
func CloudInitUserData(cfg map[string]any) map[string]any {
	switch v := cfg[ConfigCloudInitUserData].(type) {
	case string:
		m, _ := ParseCloudInitUserData(v)
		return m
	case map[string]any:
		return v
	}
	return nil
}

// checkLogForwarding checks the syslog forwarding keys as Juju does: when
// forwarding is enabled the host is set, and once forwarding is enabled
// or a certificate or key is given, the client key pair and the CA
// certificate parse.
func checkLogForwarding(cfg map[string]any) error {
	enabled, _ := cfg["logforward-enabled"].(bool)
	host := configStr(cfg, "syslog-host")
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if enabled && host == "" {
		return errors.New("log forwarding is enabled without a syslog-host")
	}
	caCert, cert, key := configStr(cfg, "syslog-ca-cert"), configStr(cfg, "syslog-client-cert"), configStr(cfg, "syslog-client-key")
	if !enabled && caCert == "" && cert == "" && key == "" {
		return nil
	}
	if _, err := tls.X509KeyPair([]byte(cert), []byte(key)); err != nil {
		return fmt.Errorf("syslog-client-cert and syslog-client-key: %v", err)
	}
	block, _ := pem.Decode([]byte(caCert))
	if block == nil || block.Type != "CERTIFICATE" {
		return errors.New("syslog-ca-cert: no PEM certificate found")
	}
	if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		return fmt.Errorf("syslog-ca-cert: %v", err)
	}
	return nil
}

// newModelConfig is the config of a new model of type t created with cfg:
// cfg typed and checked, over the defaults.
func newModelConfig(t ModelType, cfg map[string]any) (map[string]any, error) {
	cfg, err := coerceModelConfig(cfg)
	if err != nil {
		return nil, err
	}
	cfg, err = normalizeConfig(cfg)
	if err != nil {
		return nil, err
	}
	cfg, _ = withConfigDefaults(t, cfg)
	if err := checkModelConfigChange(nil, cfg); err != nil {
		return nil, err
	}
	return cfg, checkConfigTotal(cfg)
}
