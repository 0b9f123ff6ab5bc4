package provisioner_test

import (
	"fmt"
	"testing"

	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// The canAccess rules of specs/provisioner.md §1 as a matrix: callers
// against targets, for per-entity methods of both versions. Permission is
// checked before existence; bad and non-machine tags are permission
// denied.
func TestProvisionerAuthMatrix(t *testing.T) {
	f := testkit.NewProvFixture(t)
	targets := []string{
		"machine-0",             // the agent itself; top-level for the controller
		"machine-1",             // another top-level machine
		"machine-0-lxd-0",       // the agent's container
		"machine-0-lxd-0-lxd-0", // a grandchild
		"machine-1-lxd-0",       // another machine's container
		"machine-42",            // missing top-level machine
		"machine-0-lxd-9",       // missing container of the agent
		"unit-wordpress-0",      // not a machine
		"application-wordpress", // not a machine
		"user-admin",            // not a machine
		"bad",                   // not a tag
	}
	want := map[string][]itemErr{
		"controller": {noErr, noErr, permErr, permErr, permErr, notFound("42"), permErr, permErr, permErr, permErr, permErr},
		"agent":      {noErr, permErr, noErr, permErr, permErr, permErr, notFound("0/lxd/9"), permErr, permErr, permErr, permErr},
	}
	callers := map[string]*client.Conn{"controller": f.Ctrl, "agent": f.Agent}

	// Read-only per-entity methods that follow the machine accessor.
	methods11 := []string{"Life", "Constraints", "ProvisioningInfo", "DistributionGroup",
		"DistributionGroupByMachineId", "SupportedContainers", "KeepInstance", "InstanceStatus", "AvailabilityZone"}
	for who, c := range callers {
		for _, m := range methods11 {
			t.Run(fmt.Sprintf("v11/%s/%s", who, m), func(t *testing.T) {
				var res struct {
					Results []struct {
						Error *params.Error `json:"error"`
					} `json:"results"`
				}
				if err := c.Call(testkit.Ctx(t), "Provisioner", 11, "", m, testkit.Ents(targets...), &res); err != nil {
					t.Fatal(err)
				}
				if len(res.Results) != len(targets) {
					t.Fatalf("%d results for %d entities", len(res.Results), len(targets))
				}
				for i, tag := range targets {
					checkItem(t, tag, res.Results[i].Error, want[who][i])
				}
			})
		}
		for _, m := range []string{"Life", "Constraints", "ProvisioningInfo", "DistributionGroup", "Series", "RequestedNetworks", "Status"} {
			for _, v := range []int{0, 1} {
				t.Run(fmt.Sprintf("v%d/%s/%s", v, who, m), func(t *testing.T) {
					var res struct {
						Results []struct {
							Error *params.V1Error `json:"Error"`
						} `json:"Results"`
					}
					if err := c.Call(testkit.Ctx(t), "Provisioner", v, "", m, testkit.V1Ents(targets...), &res); err != nil {
						t.Fatal(err)
					}
					if len(res.Results) != len(targets) {
						t.Fatalf("%d results for %d entities", len(res.Results), len(targets))
					}
					for i, tag := range targets {
						w := want[who][i]
						if m == "Status" && tag == "bad" {
							w = itemErr{`"bad" is not a valid tag`, ""}
						}
						checkV1Item(t, tag, res.Results[i].Error, w)
					}
				})
			}
		}
	}

	// Instance id: the agent's machine is provisioned, its container not.
	res := testkit.MustCall[params.StringResults](t, f.Agent, 11, "InstanceId", testkit.Ents("machine-0", "machine-0-lxd-0", "machine-1"))
	if res.Results[0].Result != "i-0" {
		t.Errorf("InstanceId(machine-0) = %+v", res.Results[0])
	}
	checkItem(t, "container", res.Results[1].Error, itemErr{"machine 0/lxd/0 not provisioned", params.CodeNotProvisioned})
	checkItem(t, "other", res.Results[2].Error, permErr)
	v1res := testkit.MustCall[params.V1StringResults](t, f.Agent, 1, "InstanceId", testkit.V1Ents("machine-0-lxd-0"))
	checkV1Item(t, "v1 container", v1res.Results[0].Error, itemErr{"machine 0/lxd/0 not provisioned", params.CodeNotProvisioned})

	// The parse-error exceptions (spec §1.3).
	pres := testkit.MustCall[params.MachineNetworkConfigResults](t, f.Agent, 11, "GetContainerInterfaceInfo",
		testkit.Ents("unit-wordpress-0", "anything-invalid", "machine-1-lxd-0", "machine-0"))
	checkItem(t, "unit", pres.Results[0].Error, itemErr{`"unit-wordpress-0" is not a valid machine tag`, ""})
	checkItem(t, "invalid", pres.Results[1].Error, itemErr{`"anything-invalid" is not a valid tag`, ""})
	checkItem(t, "other container", pres.Results[2].Error, permErr)
	checkItem(t, "host", pres.Results[3].Error, itemErr{`cannot prepare network config for "machine-0": not a container`, ""})
	mres := testkit.MustCall[params.ErrorResults](t, f.Ctrl, 11, "MarkMachinesForRemoval", testkit.Ents("application-thing"))
	checkItem(t, "mark", mres.Results[0].Error, itemErr{`"application-thing" is not a valid machine tag`, ""})
	sres := testkit.MustCall[params.StatusResults](t, f.Agent, 11, "Status", testkit.Ents("not a tag", "application-wordpress"))
	checkItem(t, "status bad tag", sres.Results[0].Error, itemErr{`"not a tag" is not a valid tag`, ""})
	checkItem(t, "status application", sres.Results[1].Error, permErr)
	cres := testkit.MustCall[params.ControllerAPIInfoResults](t, f.Agent, 11, "ControllerAPIInfoForModels", testkit.Ents("machine-0", "model-"+f.Model))
	checkItem(t, "model tag", cres.Results[0].Error, itemErr{`"machine-0" is not a valid model tag`, ""})
	if cres.Results[1].Error != nil || len(cres.Results[1].Addresses) == 0 || cres.Results[1].CACert == "" {
		t.Errorf("ControllerAPIInfoForModels = %+v", cres.Results[1])
	}

	// Tools and SetObservedNetworkConfig: only the caller itself.
	tres := testkit.MustCall[params.ToolsResults](t, f.Ctrl, 11, "Tools", testkit.Ents("machine-0", "machine-1"))
	checkItem(t, "controller tools machine-0 (another model's machine 0)", tres.Results[0].Error, permErr)
	checkItem(t, "controller tools machine-1", tres.Results[1].Error, permErr)
	err := f.Agent.Call(testkit.Ctx(t), "Provisioner", 11, "", "SetObservedNetworkConfig",
		params.SetMachineNetworkConfig{Tag: "machine-1", Config: []params.NetworkConfig{{InterfaceName: "eth0"}}}, nil)
	testkit.WantErr(t, err, "permission denied", params.CodeUnauthorized)

	// Controller-only watchers refuse machine agents at call level.
	for _, m := range []string{"WatchModelMachines", "WatchModelMachineStartTimes", "WatchMachineErrorRetry"} {
		testkit.WantErr(t, f.Agent.Call(testkit.Ctx(t), "Provisioner", 11, "", m, nil, nil), "permission denied", params.CodeUnauthorized)
	}
	for _, m := range []string{"WatchEnvironMachines", "WatchMachineErrorRetry"} {
		testkit.WantErr(t, f.Agent.Call(testkit.Ctx(t), "Provisioner", 1, "", m, nil, nil), "permission denied", params.CodeUnauthorized)
	}

	// Users: every method of every version is refused at call level.
	for _, v := range []int{0, 1, 11} {
		for _, m := range []string{"Life", "ModelUUID", "WatchContainers", "SetPasswords"} {
			if v != 11 && m == "ModelUUID" {
				m = "EnvironUUID"
			}
			testkit.WantErr(t, f.Admin.Call(testkit.Ctx(t), "Provisioner", v, "", m, nil, nil), "permission denied", params.CodeUnauthorized)
		}
	}
}

// Machine ids are per model: the controller agent on a hosted model is not
// that model's machine 0, and a machine agent of the hosted model reaches
// its containers only there.
func TestProvisionerCAASAndControllerModel(t *testing.T) {
	d := testkit.Start(t, nil)
	st := d.State()
	caas, err := st.AddModel(t.Context(), "k8s", "caas", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := testkit.LoginController(t, d, caas.UUID)
	testkit.WantErr(t, c.Call(testkit.Ctx(t), "Provisioner", 11, "", "ModelUUID", nil, nil),
		`facade "Provisioner" not supported for a CAAS model API connection`, params.CodeNotSupported)

	// On the controller model, the controller agent is machine 0 itself.
	cm := testkit.LoginController(t, d, d.Credentials().ControllerModelUUID)
	res := testkit.MustCall[params.LifeResults](t, cm, 11, "Life", testkit.Ents("machine-0"))
	checkItem(t, "self", res.Results[0].Error, noErr)
	dg := testkit.MustCall[params.DistributionGroupResults](t, cm, 11, "DistributionGroup", testkit.Ents("machine-0"))
	if len(dg.Results[0].Result) != 1 || dg.Results[0].Result[0] != "controller-0" {
		t.Errorf("controller DistributionGroup = %+v", dg.Results[0])
	}
}

func TestProvisionerRefusesUsers(t *testing.T) {
	d := testkit.Start(t, nil)
	c := testkit.LoginAdmin(t, d, d.Credentials().DefaultModelUUID)
	testkit.WantErr(t, c.Call(testkit.Ctx(t), "Provisioner", 11, "", "ModelUUID", nil, nil), "permission denied", params.CodeUnauthorized)
	var res params.StringResult
	agent := testkit.LoginController(t, d, d.Credentials().DefaultModelUUID)
	if err := agent.Call(testkit.Ctx(t), "Provisioner", 11, "", "ModelUUID", nil, &res); err != nil || res.Result != d.Credentials().DefaultModelUUID {
		t.Fatalf("ModelUUID = %+v, %v", res, err)
	}
}
