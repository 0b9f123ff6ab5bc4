package daemon_test

import (
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"testing"

	"github.com/provisiond/provisiond/facades/admin"
	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/schematest"
	"github.com/provisiond/provisiond/rpc/params"
)

// Conformance of the served facades with Juju's facade schema
// (protocol/facades-schema.json, read in place by schematest): method sets,
// and the JSON keys of the params and result types.

// envStrict makes facades still being built fail on missing methods.
const envStrict = "PROVISIOND_SCHEMA_STRICT"

// buildRegistry is the registry daemon.Start serves.
func buildRegistry() *facade.Registry { return daemon.NewRegistry(nil) }

type fv = schematest.FacadeVersion

// completeFacades must serve every method of their schema entry.
var completeFacades = []fv{
	{Name: "Admin", Version: 3},
	{Name: "Pinger", Version: 1},
	{Name: "NotifyWatcher", Version: 1},
	{Name: "StringsWatcher", Version: 1},
	{Name: "Provisioner", Version: 11},
	{Name: "CAASUnitProvisioner", Version: 2},
}

// incrementalFacades are being built method by method: missing methods are
// logged, and fail only with PROVISIOND_SCHEMA_STRICT=1.
//
// None is left: Provisioner v11 and CAASUnitProvisioner v2 are
// complete. A facade built method by method goes here.
var incrementalFacades = map[fv]bool{}

// nonSchemaFacades are served but are not in the Juju 3.3 schema, with why.
// Any other registered facade version missing from the schema fails.
var nonSchemaFacades = map[fv]string{
	{Name: "Provisioner", Version: 0}: "the 2015 seed's method set and shapes (design.md); same as v1",
	{Name: "Provisioner", Version: 1}: "the 2015 seed's method set and shapes (design.md)",
	{Name: "ModelAdmin", Version: 1}:  "provisiond's own operator facade (design.md)",
	{Name: "MachineUndertaker", Version: 1}: "Juju's controller facade, not in the 3.3 schema: its shapes are Juju's rpc/params " +
		"(machineundertaker_test.go checks them on the wire)",
}

// TestSchemaRegistryInStep checks that buildRegistry serves the facade
// versions a running daemon announces at login.
func TestSchemaRegistryInStep(t *testing.T) {
	d := start(t, nil)
	c := loginAdmin(t, d, d.Credentials().DefaultModelUUID)
	got := map[string][]int{}
	for _, f := range c.LoginResult().Facades {
		got[f.Name] = f.Versions
	}
	want := map[string][]int{}
	for _, f := range buildRegistry().Facades() {
		if !admin.Unlisted[f.Name] {
			want[f.Name] = f.Versions
		}
	}
	if !maps.EqualFunc(got, want, slices.Equal[[]int]) {
		t.Errorf("daemon lists %v; buildRegistry serves %v (less admin.Unlisted): bring buildRegistry in step with daemon.go", got, want)
	}
}

func TestSchemaMethods(t *testing.T) {
	s := schematest.Open(t)
	reg := buildRegistry()
	strict := os.Getenv(envStrict) == "1"

	served := map[fv]bool{}
	for _, f := range reg.Facades() {
		for _, v := range f.Versions {
			served[fv{Name: f.Name, Version: v}] = true
		}
	}
	for _, f := range completeFacades {
		if !served[f] {
			t.Errorf("%s v%d is not registered", f.Name, f.Version)
		}
	}
	for f := range served {
		if !s.Has(f.Name, f.Version) {
			if why, ok := nonSchemaFacades[f]; ok {
				t.Logf("%s v%d: not in the schema, not checked: %s", f.Name, f.Version, why)
			} else {
				t.Errorf("%s v%d is registered but not in the schema %s (if it is not a Juju facade, list it in nonSchemaFacades)",
					f.Name, f.Version, s.Path())
			}
		}
	}

	for _, f := range s.Facades() {
		t.Run(fmt.Sprintf("%s/v%d", f.Name, f.Version), func(t *testing.T) {
			if !served[f] {
				if incrementalFacades[f] {
					t.Logf("%s v%d is not registered yet", f.Name, f.Version)
					if strict {
						t.Errorf("%s v%d is not registered (%s=1)", f.Name, f.Version, envStrict)
					}
				}
				return
			}
			want := s.Methods(f.Name, f.Version)
			got := reg.MethodNames(f.Name, f.Version)
			if extra := minus(got, want); len(extra) > 0 {
				t.Errorf("%s v%d registers methods the schema does not have: %v", f.Name, f.Version, extra)
			}
			missing := minus(want, got)
			switch {
			case len(missing) == 0:
			case !incrementalFacades[f]:
				t.Errorf("%s v%d is missing schema methods: %v", f.Name, f.Version, missing)
			default:
				t.Logf("%s v%d: %d of %d schema methods not implemented yet: %v",
					f.Name, f.Version, len(missing), len(want), missing)
				if strict {
					t.Errorf("%s v%d is missing schema methods (%s=1): %v", f.Name, f.Version, envStrict, missing)
				}
			}
		})
	}
}

// wireTypes gives the Go params and result types of each registered schema
// method that has params or a result (nil: none). Every such method must
// be listed.
var wireTypes = []struct {
	facade         string
	version        int
	method         string
	params, result any
}{
	{"Admin", 3, "Login", params.LoginRequest{}, params.LoginResult{}},
	{"Admin", 3, "RedirectInfo", nil, params.RedirectInfoResult{}},
	{"StringsWatcher", 1, "Next", nil, params.StringsWatchResult{}},
	{"Provisioner", 11, "APIAddresses", nil, params.StringsResult{}},
	{"Provisioner", 11, "APIHostPorts", nil, params.APIHostPortsResult{}},
	{"Provisioner", 11, "AvailabilityZone", params.Entities{}, params.StringResults{}},
	{"Provisioner", 11, "CACert", nil, params.BytesResult{}},
	{"Provisioner", 11, "Constraints", params.Entities{}, params.ConstraintsResults{}},
	{"Provisioner", 11, "ContainerConfig", nil, params.ContainerConfig{}},
	{"Provisioner", 11, "ContainerManagerConfig", params.ContainerManagerConfigParams{}, params.ContainerManagerConfig{}},
	{"Provisioner", 11, "ControllerAPIInfoForModels", params.Entities{}, params.ControllerAPIInfoResults{}},
	{"Provisioner", 11, "ControllerConfig", nil, params.ControllerConfigResult{}},
	{"Provisioner", 11, "DistributionGroup", params.Entities{}, params.DistributionGroupResults{}},
	{"Provisioner", 11, "DistributionGroupByMachineId", params.Entities{}, params.StringsResults{}},
	{"Provisioner", 11, "EnsureDead", params.Entities{}, params.ErrorResults{}},
	{"Provisioner", 11, "FindTools", params.FindToolsParams{}, params.FindToolsResult{}},
	{"Provisioner", 11, "GetContainerInterfaceInfo", params.Entities{}, params.MachineNetworkConfigResults{}},
	{"Provisioner", 11, "GetContainerProfileInfo", params.Entities{}, params.ContainerProfileResults{}},
	{"Provisioner", 11, "HostChangesForContainers", params.Entities{}, params.HostNetworkChangeResults{}},
	{"Provisioner", 11, "InstanceId", params.Entities{}, params.StringResults{}},
	{"Provisioner", 11, "InstanceStatus", params.Entities{}, params.StatusResults{}},
	{"Provisioner", 11, "KeepInstance", params.Entities{}, params.BoolResults{}},
	{"Provisioner", 11, "Life", params.Entities{}, params.LifeResults{}},
	{"Provisioner", 11, "MachinesWithTransientErrors", nil, params.StatusResults{}},
	{"Provisioner", 11, "MarkMachinesForRemoval", params.Entities{}, params.ErrorResults{}},
	{"Provisioner", 11, "ModelConfig", nil, params.ModelConfigResult{}},
	{"Provisioner", 11, "ModelUUID", nil, params.StringResult{}},
	{"Provisioner", 11, "PrepareContainerInterfaceInfo", params.Entities{}, params.MachineNetworkConfigResults{}},
	{"Provisioner", 11, "ProvisioningInfo", params.Entities{}, params.ProvisioningInfoResults{}},
	{"Provisioner", 11, "ReleaseContainerAddresses", params.Entities{}, params.ErrorResults{}},
	{"Provisioner", 11, "Remove", params.Entities{}, params.ErrorResults{}},
	{"Provisioner", 11, "SetCharmProfiles", params.SetProfileArgs{}, params.ErrorResults{}},
	{"Provisioner", 11, "SetHostMachineNetworkConfig", params.SetMachineNetworkConfig{}, nil},
	{"Provisioner", 11, "SetInstanceInfo", params.InstancesInfo{}, params.ErrorResults{}},
	{"Provisioner", 11, "SetInstanceStatus", params.SetStatus{}, params.ErrorResults{}},
	{"Provisioner", 11, "SetModificationStatus", params.SetStatus{}, params.ErrorResults{}},
	{"Provisioner", 11, "SetObservedNetworkConfig", params.SetMachineNetworkConfig{}, nil},
	{"Provisioner", 11, "SetPasswords", params.EntityPasswords{}, params.ErrorResults{}},
	{"Provisioner", 11, "SetStatus", params.SetStatus{}, params.ErrorResults{}},
	{"Provisioner", 11, "SetSupportedContainers", params.MachineContainersParams{}, params.ErrorResults{}},
	{"Provisioner", 11, "Status", params.Entities{}, params.StatusResults{}},
	{"Provisioner", 11, "SupportedContainers", params.Entities{}, params.MachineContainerResults{}},
	{"Provisioner", 11, "Tools", params.Entities{}, params.ToolsResults{}},
	{"Provisioner", 11, "WatchAPIHostPorts", nil, params.NotifyWatchResult{}},
	{"Provisioner", 11, "WatchAllContainers", params.WatchContainers{}, params.StringsWatchResults{}},
	{"Provisioner", 11, "WatchContainers", params.WatchContainers{}, params.StringsWatchResults{}},
	{"Provisioner", 11, "WatchForModelConfigChanges", nil, params.NotifyWatchResult{}},
	{"Provisioner", 11, "WatchMachineErrorRetry", nil, params.NotifyWatchResult{}},
	{"Provisioner", 11, "WatchModelMachineStartTimes", nil, params.StringsWatchResult{}},
	{"Provisioner", 11, "WatchModelMachines", nil, params.StringsWatchResult{}},

	{"CAASUnitProvisioner", 2, "WatchApplications", nil, params.StringsWatchResult{}},
	{"CAASUnitProvisioner", 2, "CharmInfo", params.CharmURL{}, params.Charm{}},
	{"CAASUnitProvisioner", 2, "ApplicationCharmInfo", params.Entity{}, params.Charm{}},
	{"CAASUnitProvisioner", 2, "Watch", params.Entities{}, params.NotifyWatchResults{}},
	{"CAASUnitProvisioner", 2, "Life", params.Entities{}, params.LifeResults{}},
	{"CAASUnitProvisioner", 2, "WatchApplicationsScale", params.Entities{}, params.NotifyWatchResults{}},
	{"CAASUnitProvisioner", 2, "WatchPodSpec", params.Entities{}, params.NotifyWatchResults{}},
	{"CAASUnitProvisioner", 2, "ApplicationsScale", params.Entities{}, params.IntResults{}},
	{"CAASUnitProvisioner", 2, "ApplicationsTrust", params.Entities{}, params.BoolResults{}},
	{"CAASUnitProvisioner", 2, "WatchApplicationsTrustHash", params.Entities{}, params.StringsWatchResults{}},
	{"CAASUnitProvisioner", 2, "DeploymentMode", params.Entities{}, params.StringResults{}},
	{"CAASUnitProvisioner", 2, "ProvisioningInfo", params.Entities{}, params.KubernetesProvisioningInfoResults{}},
	{"CAASUnitProvisioner", 2, "ApplicationsConfig", params.Entities{}, params.ApplicationGetConfigResults{}},
	{"CAASUnitProvisioner", 2, "UpdateApplicationsUnits", params.UpdateApplicationUnitArgs{}, params.UpdateApplicationUnitResults{}},
	{"CAASUnitProvisioner", 2, "UpdateApplicationsService", params.UpdateApplicationServiceArgs{}, params.ErrorResults{}},
	{"CAASUnitProvisioner", 2, "ClearApplicationsResources", params.Entities{}, params.ErrorResults{}},
	{"CAASUnitProvisioner", 2, "SetOperatorStatus", params.SetStatus{}, params.ErrorResults{}},
}

// nestedDefs must be reached by the key check below; the embedded ones
// (UpdateBehavior, Address, ProvisioningNetworkTopology) prove that the
// flattening rule ran.
var nestedDefs = []string{"HostPort", "FacadeVersions", "AuthUserInfo", "Error",
	"UpdateBehavior", "Address", "ProvisioningNetworkTopology"}

func TestSchemaWireKeys(t *testing.T) {
	s := schematest.Open(t)
	reg := buildRegistry()

	listed := map[string]bool{}
	seen := map[string]bool{}
	for _, w := range wireTypes {
		name := fmt.Sprintf("%s/v%d/%s", w.facade, w.version, w.method)
		listed[name] = true
		t.Run(name, func(t *testing.T) {
			if _, err := reg.Find(w.facade, w.version, w.method); err != nil {
				t.Errorf("listed in wireTypes but not registered: %v", err)
			}
			if !s.HasMethod(w.facade, w.version, w.method) {
				t.Fatalf("not in the schema")
			}
			_, pdef, pok := s.ParamsKeys(w.facade, w.version, w.method)
			_, rdef, rok := s.ResultKeys(w.facade, w.version, w.method)
			for _, c := range []struct {
				what string
				goV  any
				def  string
				ok   bool
			}{{"params", w.params, pdef, pok}, {"result", w.result, rdef, rok}} {
				switch {
				case c.goV == nil && c.def == "":
				case c.goV == nil:
					t.Errorf("%s: schema has %s; wireTypes has none", c.what, c.def)
				case c.def == "":
					t.Errorf("%s: wireTypes has %T; schema has none", c.what, c.goV)
				case !c.ok:
					t.Errorf("%s: schema $ref %q does not resolve", c.what, c.def)
				default:
					k := schematest.KeyCheck{T: t, S: s, Facade: w.facade, Version: w.version, Seen: seen}
					k.Value(fmt.Sprintf("%s(%T)", c.what, c.goV), c.def, schematest.Populated(c.goV))
					if c.what == "result" {
						// What a reply sends when its fields are empty:
						// Juju's keys without omitempty, no others.
						k.Omissions(fmt.Sprintf("%s(%T)", c.what, c.goV), c.def, reflect.TypeOf(c.goV))
					}
				}
			}
		})
	}

	for _, f := range s.Facades() {
		for _, m := range reg.MethodNames(f.Name, f.Version) {
			name := fmt.Sprintf("%s/v%d/%s", f.Name, f.Version, m)
			_, pdef, _ := s.ParamsKeys(f.Name, f.Version, m)
			_, rdef, _ := s.ResultKeys(f.Name, f.Version, m)
			if (pdef != "" || rdef != "") && !listed[name] {
				t.Errorf("%s is registered with schema params %q / result %q but has no wireTypes entry", name, pdef, rdef)
			}
		}
	}
	for _, d := range nestedDefs {
		if !seen[d] {
			t.Errorf("nested definition %s was not reached by any wireTypes entry", d)
		}
	}
}

// minus returns the elements of a not in b.
func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// seedMethods is the method set of the 2015 seed (Provisioner v0 and v1):
// the facade's own methods and those of the common helpers it embeds.
var seedMethods = []string{
	"APIAddresses", "APIHostPorts", "CACert", "Constraints", "ContainerConfig", "ContainerManagerConfig",
	"DistributionGroup", "EnsureDead", "EnvironConfig", "EnvironUUID", "FindTools", "GetContainerInterfaceInfo",
	"InstanceId", "Life", "MachinesWithTransientErrors", "PrepareContainerInterfaceInfo", "ProvisioningInfo",
	"ReleaseContainerAddresses", "Remove", "RequestedNetworks", "Series", "SetInstanceInfo", "SetPasswords",
	"SetProvisioned", "SetStatus", "SetSupportedContainers", "StateAddresses", "Status", "Tools", "UpdateStatus",
	"WatchAPIHostPorts", "WatchAllContainers", "WatchContainers", "WatchEnvironMachines",
	"WatchForEnvironConfigChanges", "WatchMachineErrorRetry",
}

func TestProvisionerSeedMethodSet(t *testing.T) {
	reg := buildRegistry()
	want := slices.Sorted(slices.Values(seedMethods))
	for _, v := range []int{0, 1} {
		if got := reg.MethodNames("Provisioner", v); !slices.Equal(got, want) {
			t.Errorf("Provisioner v%d methods:\n got %v\nwant %v", v, got, want)
		}
	}
}
