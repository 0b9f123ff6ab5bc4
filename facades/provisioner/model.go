package provisioner

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/environ"
	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// ModelUUID returns the UUID of the connection's model.
func (p *Provisioner) ModelUUID(ctx context.Context) (params.StringResult, error) {
	return params.StringResult{Result: p.model}, nil
}

// modelConfig returns the model's config as Juju's controller answers it
// (its config.Config's attributes): the stored config with name, uuid and
// the provider type, and resource-tags as the map Juju's schema coerces
// the stored string to.
func (p *Provisioner) modelConfig(ctx context.Context) (state.Model, map[string]any, error) {
	m, err := p.st.Model(ctx, p.model)
	if err != nil {
		return state.Model{}, nil, err
	}
	cfg := m.Config // the caller's own copy
	cfg["name"] = m.Name
	cfg["uuid"] = m.UUID
	if _, ok := cfg["type"]; !ok {
		cfg["type"] = m.Type.ProviderType()
	}
	if s, ok := cfg[state.ConfigResourceTags].(string); ok {
		if tags, err := state.ParseResourceTags(s); err == nil {
			wire := make(map[string]any, len(tags))
			for k, v := range tags {
				wire[k] = v
			}
			cfg[state.ConfigResourceTags] = wire
		}
	}
	return m, cfg, nil
}

// ModelConfig returns the current configuration of the model.
func (p *Provisioner) ModelConfig(ctx context.Context) (params.ModelConfigResult, error) {
	_, cfg, err := p.modelConfig(ctx)
	if err != nil {
		return params.ModelConfigResult{}, err
	}
	return params.ModelConfigResult{Config: cfg}, nil
}

// ControllerConfig returns the controller's configuration.
func (p *Provisioner) ControllerConfig(ctx context.Context) (params.ControllerConfigResult, error) {
	ctrl, err := p.st.Controller(ctx)
	if err != nil {
		return params.ControllerConfigResult{}, err
	}
	cfg := map[string]any{}
	for k, v := range ctrl.Config {
		cfg[k] = v
	}
	cfg["controller-uuid"] = ctrl.UUID
	return params.ControllerConfigResult{Config: cfg}, nil
}

// APIHostPorts returns every API server's addresses.
func (p *Provisioner) APIHostPorts(ctx context.Context) (params.APIHostPortsResult, error) {
	servers, err := p.st.APIHostPorts(ctx)
	if err != nil {
		return params.APIHostPortsResult{}, err
	}
	out := make([][]params.HostPort, len(servers))
	for i, hps := range servers {
		out[i] = make([]params.HostPort, len(hps))
		for j, hp := range hps {
			out[i][j] = params.HostPort{Value: hp.Value, Type: hp.Type, Scope: hp.Scope, Port: hp.Port}
		}
	}
	return params.APIHostPortsResult{Servers: out}, nil
}

// scopeRank orders address scopes internal-first.
func scopeRank(scope string) int {
	switch scope {
	case "local-cloud":
		return 0
	case "public":
		return 1
	case "":
		return 2
	case "local-machine":
		return 3
	}
	return 4
}

// apiAddresses lists "host:port": v11 every address of every server,
// internal first; 2015 the most internal one of each server.
func (p *Provisioner) apiAddresses(ctx context.Context) ([]string, error) {
	servers, err := p.st.APIHostPorts(ctx)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, hps := range servers {
		hps = slices.Clone(hps)
		slices.SortStableFunc(hps, func(a, b state.HostPort) int { return scopeRank(a.Scope) - scopeRank(b.Scope) })
		for i, hp := range hps {
			if p.v1 && i > 0 {
				break
			}
			out = append(out, net.JoinHostPort(hp.Value, strconv.Itoa(hp.Port)))
		}
	}
	return out, nil
}

// APIAddresses returns the API addresses as host:port strings.
func (p *Provisioner) APIAddresses(ctx context.Context) (params.StringsResult, error) {
	addrs, err := p.apiAddresses(ctx)
	if err != nil {
		return params.StringsResult{}, err
	}
	return params.StringsResult{Result: addrs}, nil
}

func (p *Provisioner) caCert(ctx context.Context) (string, error) {
	ctrl, err := p.st.Controller(ctx)
	if err != nil {
		return "", err
	}
	s, _ := ctrl.Config["ca-cert"].(string)
	return s, nil
}

// CACert returns the controller's CA certificate.
func (p *Provisioner) CACert(ctx context.Context) (params.BytesResult, error) {
	s, err := p.caCert(ctx)
	if err != nil {
		return params.BytesResult{}, err
	}
	return params.BytesResult{Result: []byte(s)}, nil
}

// ControllerAPIInfoForModels returns, for each model tag, this
// controller's API addresses and CA certificate.
func (p *Provisioner) ControllerAPIInfoForModels(ctx context.Context, args params.Entities) (params.ControllerAPIInfoResults, error) {
	return params.ControllerAPIInfoResults{Results: facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.ControllerAPIInfoResult, error) {
		t, err := facade.ParseModelTag(e.Tag)
		if err != nil {
			return params.ControllerAPIInfoResult{}, err
		}
		if _, err := p.st.Model(ctx, t.Id()); err != nil {
			return params.ControllerAPIInfoResult{}, err
		}
		addrs, err := p.apiAddresses(ctx)
		if err != nil {
			return params.ControllerAPIInfoResult{}, err
		}
		ca, err := p.caCert(ctx)
		if err != nil {
			return params.ControllerAPIInfoResult{}, err
		}
		return params.ControllerAPIInfoResult{Addresses: addrs, CACert: ca}, nil
	})}, nil
}

func cfgString(cfg map[string]any, key string) string {
	switch v := cfg[key].(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

func cfgBool(cfg map[string]any, key string, def bool) bool {
	switch v := cfg[key].(type) {
	case bool:
		return v
	case string:
		b, err := strconv.ParseBool(v)
		if err == nil {
			return b
		}
	}
	return def
}

// Proxy settings as Juju's config accessors derive them from the model
// config (environs/config: LegacyProxySettings, JujuProxySettings,
// AptProxySettings, SnapProxySettings). Juju's controller never fills
// AutoNoProxy here: it is sent empty.

func proxy(cfg map[string]any, prefix string) params.Settings {
	return params.Settings{
		Http:    cfgString(cfg, prefix+"http-proxy"),
		Https:   cfgString(cfg, prefix+"https-proxy"),
		Ftp:     cfgString(cfg, prefix+"ftp-proxy"),
		NoProxy: cfgString(cfg, prefix+"no-proxy"),
	}
}

// aptProxy is the apt-*-proxy keys, each falling back to the juju- key,
// then the legacy one, with a scheme added when it has none; apt-no-proxy
// falls back to no-proxy when a legacy proxy is set, else to
// juju-no-proxy.
func aptProxy(cfg map[string]any) params.Settings {
	first := func(scheme, key string) string {
		for _, k := range []string{"apt-" + key, "juju-" + key, key} {
			if v := cfgString(cfg, k); v != "" {
				if !strings.Contains(v, "://") {
					v = scheme + "://" + v
				}
				return v
			}
		}
		return ""
	}
	s := params.Settings{
		Http:    first("http", "http-proxy"),
		Https:   first("https", "https-proxy"),
		Ftp:     first("ftp", "ftp-proxy"),
		NoProxy: cfgString(cfg, "apt-no-proxy"),
	}
	if s.NoProxy == "" {
		if state.HasLegacyProxy(cfg) {
			s.NoProxy = cfgString(cfg, "no-proxy")
		} else {
			s.NoProxy = cfgString(cfg, "juju-no-proxy")
		}
	}
	return s
}

// ContainerConfig returns what containers' cloud-init needs from the
// model config.
func (p *Provisioner) ContainerConfig(ctx context.Context) (params.ContainerConfig, error) {
	_, cfg, err := p.modelConfig(ctx)
	if err != nil {
		return params.ContainerConfig{}, err
	}
	return params.ContainerConfig{
		ProviderType:            cfgString(cfg, "type"),
		AuthorizedKeys:          cfgString(cfg, "authorized-keys"),
		SSLHostnameVerification: cfgBool(cfg, "ssl-hostname-verification", true),
		LegacyProxy:             proxy(cfg, ""),
		JujuProxy:               proxy(cfg, "juju-"),
		AptProxy:                aptProxy(cfg),
		AptMirror:               cfgString(cfg, "apt-mirror"),
		SnapProxy: params.Settings{Http: cfgString(cfg, "snap-http-proxy"),
			Https: cfgString(cfg, "snap-https-proxy")},
		SnapStoreAssertions:        cfgString(cfg, "snap-store-assertions"),
		SnapStoreProxyID:           cfgString(cfg, "snap-store-proxy"),
		SnapStoreProxyURL:          cfgString(cfg, "snap-store-proxy-url"),
		CloudInitUserData:          state.CloudInitUserData(cfg),
		ContainerInheritProperties: cfgString(cfg, "container-inherit-properties"),
		UpdateBehavior: &params.UpdateBehavior{ // embedded: flat on the wire
			EnableOSRefreshUpdate: cfgBool(cfg, "enable-os-refresh-update", true),
			EnableOSUpgrade:       cfgBool(cfg, "enable-os-upgrade", true),
		},
	}, nil
}

// ContainerManagerConfig returns what the container manager of type
// args.Type needs.
func (p *Provisioner) ContainerManagerConfig(ctx context.Context, args params.ContainerManagerConfigParams) (params.ContainerManagerConfig, error) {
	_, cfg, err := p.modelConfig(ctx)
	if err != nil {
		return params.ContainerManagerConfig{}, err
	}
	out := map[string]string{}
	if p.v1 {
		out["name"] = "juju"
		if args.Type == "lxc" {
			for key, name := range map[string]string{"lxc-clone": "use-clone", "lxc-clone-aufs": "use-aufs", "lxc-default-mtu": "lxc-default-mtu"} {
				if _, ok := cfg[key]; ok {
					out[name] = cfgString(cfg, key)
				}
			}
		}
		subnets, err := p.environSubnets(ctx)
		if err != nil {
			return params.ContainerManagerConfig{}, err
		}
		if p.env.AnySupportsAddressAllocation(subnets) {
			out["ip-forwarding"] = "true"
		}
		if cfgString(cfg, "type") == "ec2" {
			out["enable-nat"] = "true"
		}
		return params.ContainerManagerConfig{ManagerConfig: out}, nil
	}
	out["model-uuid"] = p.model
	if args.Type == "lxd" {
		out["lxd-snap-channel"] = cfgStringDefault(cfg, "lxd-snap-channel", "5.0/stable")
	}
	if v := cfgString(cfg, "container-image-metadata-url"); v != "" {
		out["container-image-metadata-url"] = v
	}
	if cfgBool(cfg, "container-image-metadata-defaults-disabled", false) {
		out["container-image-metadata-defaults-disabled"] = "true"
	}
	out["container-image-stream"] = cfgStringDefault(cfg, "container-image-stream", "released")
	out["container-networking-method"] = cfgStringDefault(cfg, "container-networking-method", "")
	return params.ContainerManagerConfig{ManagerConfig: out}, nil
}

func cfgStringDefault(cfg map[string]any, key, def string) string {
	if s := cfgString(cfg, key); s != "" {
		return s
	}
	return def
}

// environSubnets returns the model's subnets as the provider sees them.
func (p *Provisioner) environSubnets(ctx context.Context) ([]environ.Subnet, error) {
	subnets, err := p.st.Subnets(ctx, p.model)
	if err != nil {
		return nil, err
	}
	out := make([]environ.Subnet, len(subnets))
	for i, s := range subnets {
		out[i] = s.Environ()
	}
	return out, nil
}

// toolsURL rewrites an agent binary's URL to this controller.
func (p *Provisioner) toolsURL(ctx context.Context, b environ.Binary) string {
	addr := "localhost:17070"
	if addrs, err := p.apiAddresses(ctx); err == nil && len(addrs) > 0 {
		addr = addrs[0]
	}
	if p.v1 {
		return "https://" + addr + "/environment/" + p.model + "/tools/" + b.String()
	}
	return environ.ToolsURL(addr, p.model, b)
}

// wireTools lists catalog entries for the wire. series, for a 2015
// client, names the entries kept by OS with the series asked for
// (environ.Binary.ForSeries): 2015 agents take the instance's series from
// the version.
func (p *Provisioner) wireTools(ctx context.Context, ts []environ.Tools, series string) []params.Tools {
	out := make([]params.Tools, len(ts))
	for i, t := range ts {
		v := t.Version.ForSeries(series)
		out[i] = params.Tools{Version: v.String(), URL: p.toolsURL(ctx, v), SHA256: t.SHA256, Size: t.Size}
	}
	return out
}

// findTools matches the catalog with f; no match is a NotFound error.
func (p *Provisioner) findTools(ctx context.Context, f environ.ToolsFilter) ([]environ.Tools, error) {
	catalog, err := p.st.AgentBinaries(ctx)
	if err != nil {
		return nil, err
	}
	found := environ.FindTools(catalog, f)
	if len(found) == 0 {
		if p.v1 {
			return nil, errors.NewNotFound(nil, "no matching tools available")
		}
		return nil, errors.NewNotFound(nil, "no matching agent binaries available")
	}
	return found, nil
}

// FindTools returns the agent binaries matching args; the error travels
// in the result.
func (p *Provisioner) FindTools(ctx context.Context, args params.FindToolsParams) (params.FindToolsResult, error) {
	f := environ.ToolsFilter{Major: args.MajorVersion, Minor: -1, Release: args.OSType, Arch: args.Arch}
	if args.Number != "" {
		n, err := environ.ParseNumber(args.Number)
		if err != nil {
			return params.FindToolsResult{List: []params.Tools{}, Error: p.ctx.ServerError(errors.NewNotValid(nil, err.Error()))}, nil
		}
		f.Number = n
	}
	found, err := p.findTools(ctx, f)
	if err != nil {
		return params.FindToolsResult{List: []params.Tools{}, Error: p.ctx.ServerError(err)}, nil
	}
	return params.FindToolsResult{List: p.wireTools(ctx, found, "")}, nil
}

// Tools returns the agent binaries each machine should run: the model's
// agent-version for the machine's OS and architecture. Only the caller's
// own machine is reachable.
func (p *Provisioner) Tools(ctx context.Context, args params.Entities) (params.ToolsResults, error) {
	_, cfg, err := p.modelConfig(ctx)
	if err != nil {
		return params.ToolsResults{}, err
	}
	v := cfgString(cfg, "agent-version")
	if v == "" {
		where := "model config"
		if p.v1 {
			where = "environment config"
		}
		return params.ToolsResults{}, errors.Errorf("agent version not set in %s", where)
	}
	n, err := environ.ParseNumber(v)
	if err != nil {
		return params.ToolsResults{}, errors.Annotate(err, "agent-version")
	}
	return params.ToolsResults{Results: facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.ToolsResult, error) {
		t, err := facade.ParseTag(e.Tag)
		if err != nil || !p.ctx.IsOwner(t) {
			return params.ToolsResult{}, facade.ErrPerm
		}
		m, err := p.st.Machine(ctx, p.model, t.Id())
		if err != nil {
			return params.ToolsResult{}, err
		}
		release, arch := p.machineRelease(ctx, m)
		found, err := p.findTools(ctx, environ.ToolsFilter{Number: n, Release: release, Arch: arch})
		if err != nil {
			return params.ToolsResult{}, errors.NewNotFound(nil, "tools not found")
		}
		series := ""
		if p.v1 {
			series = release
		}
		return params.ToolsResult{Tools: p.wireTools(ctx, found, series)}, nil
	})}, nil
}

// machineRelease is the OS (v11 os type; 2015 series) and architecture
// of the agent binaries machine m runs.
func (p *Provisioner) machineRelease(ctx context.Context, m state.Machine) (release, arch string) {
	if b, err := environ.ParseBinary(m.AgentVersion); err == nil {
		return b.Release, b.Arch
	}
	arch = "amd64"
	if m.Hardware != nil && m.Hardware.Arch != nil {
		arch = *m.Hardware.Arch
	} else if m.Constraints.Arch != nil {
		arch = *m.Constraints.Arch
	}
	if p.v1 {
		release = p.machineSeries(ctx, m)
		if release == "" {
			release = "trusty"
		}
		return release, arch
	}
	release = m.Base.Name
	if release == "" {
		release = "ubuntu"
	}
	return release, arch
}

// DefaultBase is the base of a machine added without one when the model
// config names no default-base: Juju 3.3's default LTS.
var DefaultBase = state.Base{Name: "ubuntu", Channel: "22.04/stable"}

// machineBase is the base m is provisioned with: its own, else the model
// config's default-base, else DefaultBase. Juju's clients parse the base
// (v11) and need the series (2015): an empty one fails provisioning.
func (p *Provisioner) machineBase(ctx context.Context, m state.Machine) state.Base {
	if m.Base != (state.Base{}) {
		return m.Base
	}
	if _, cfg, err := p.modelConfig(ctx); err == nil {
		if b, err := state.ParseBase(cfgString(cfg, "default-base")); err == nil {
			return b
		}
	}
	return DefaultBase
}
