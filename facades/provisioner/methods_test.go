package provisioner_test

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	jujuerrors "github.com/juju/errors"

	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// Per-method behaviour of version 11 through the real RPC stack.
func TestProvisionerV11Methods(t *testing.T) {
	f := testkit.NewProvFixture(t)
	st, model := f.St, f.Model
	addMachine := func(t *testing.T, p state.MachineParams) state.Machine {
		t.Helper()
		m, err := st.AddMachine(t.Context(), model, p)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}

	t.Run("no-arg model methods", func(t *testing.T) {
		uuid := testkit.MustCall[params.StringResult](t, f.Agent, 11, "ModelUUID", nil)
		if uuid.Result != model {
			t.Errorf("ModelUUID = %q", uuid.Result)
		}
		cfg := testkit.MustCall[params.ModelConfigResult](t, f.Agent, 11, "ModelConfig", nil)
		if cfg.Config["name"] != "default" || cfg.Config["agent-version"] != "3.3.0" || cfg.Config["type"] != "builtin" {
			t.Errorf("ModelConfig = %v", cfg.Config)
		}
		cc := testkit.MustCall[params.ControllerConfigResult](t, f.Agent, 11, "ControllerConfig", nil)
		if cc.Config["controller-uuid"] != f.D.Credentials().ControllerUUID {
			t.Errorf("ControllerConfig = %v", cc.Config)
		}
		raw := testkit.RawCall(t, f.Agent, 11, "CACert", nil)
		var b struct{ Result string }
		if err := json.Unmarshal(raw, &b); err != nil {
			t.Fatal(err)
		}
		pem, err := base64.StdEncoding.DecodeString(b.Result)
		if err != nil || string(pem) != f.D.Credentials().CACert {
			t.Errorf("CACert is not the base64 CA certificate: %v", err)
		}
		addrs := testkit.MustCall[params.StringsResult](t, f.Agent, 11, "APIAddresses", nil)
		if !slices.Equal(addrs.Result, []string{f.D.Addr()}) {
			t.Errorf("APIAddresses = %v; want [%s]", addrs.Result, f.D.Addr())
		}
		hps := testkit.MustCall[params.APIHostPortsResult](t, f.Agent, 11, "APIHostPorts", nil)
		if len(hps.Servers) != 1 || hps.Servers[0][0].Value != "127.0.0.1" {
			t.Errorf("APIHostPorts = %+v", hps)
		}
		cc2 := testkit.MustCall[params.ContainerConfig](t, f.Agent, 11, "ContainerConfig", nil)
		if cc2.ProviderType != "builtin" || cc2.AuthorizedKeys != "ssh-rsa AAA" || !cc2.SSLHostnameVerification ||
			cc2.UpdateBehavior == nil || !cc2.UpdateBehavior.EnableOSRefreshUpdate {
			t.Errorf("ContainerConfig = %+v", cc2)
		}
		cmc := testkit.MustCall[params.ContainerManagerConfig](t, f.Agent, 11, "ContainerManagerConfig", params.ContainerManagerConfigParams{Type: "lxd"})
		if cmc.ManagerConfig["model-uuid"] != model || cmc.ManagerConfig["container-image-stream"] != "released" ||
			cmc.ManagerConfig["lxd-snap-channel"] == "" {
			t.Errorf("ContainerManagerConfig = %v", cmc.ManagerConfig)
		}
	})

	t.Run("FindTools and Tools", func(t *testing.T) {
		ft := testkit.MustCall[params.FindToolsResult](t, f.Agent, 11, "FindTools", params.FindToolsParams{Number: "3.3.0", OSType: "ubuntu", Arch: "amd64"})
		if ft.Error != nil || len(ft.List) != 1 || ft.List[0].Version != "3.3.0-ubuntu-amd64" ||
			ft.List[0].URL != "https://"+f.D.Addr()+"/model/"+model+"/tools/3.3.0-ubuntu-amd64" || ft.List[0].Size != 330 {
			t.Errorf("FindTools = %+v", ft)
		}
		all := testkit.MustCall[params.FindToolsResult](t, f.Agent, 11, "FindTools", params.FindToolsParams{})
		if len(all.List) != 2 || all.List[0].Version != "1.25.0-trusty-amd64" {
			t.Errorf("FindTools(all) = %+v", all)
		}
		none := testkit.MustCall[params.FindToolsResult](t, f.Agent, 11, "FindTools", params.FindToolsParams{Number: "9.9.9"})
		checkItem(t, "no match", none.Error, itemErr{"no matching agent binaries available", params.CodeNotFound})
		bad := testkit.MustCall[params.FindToolsResult](t, f.Agent, 11, "FindTools", params.FindToolsParams{Number: "x"})
		checkItem(t, "bad number", bad.Error, itemErr{`invalid version "x"`, params.CodeNotValid})
		tr := testkit.MustCall[params.ToolsResults](t, f.Agent, 11, "Tools", testkit.Ents("machine-0", "machine-0-lxd-0", "bad"))
		if tr.Results[0].Error != nil || len(tr.Results[0].Tools) != 1 || tr.Results[0].Tools[0].Version != "3.3.0-ubuntu-amd64" {
			t.Errorf("Tools(machine-0) = %+v", tr.Results[0])
		}
		checkItem(t, "container", tr.Results[1].Error, permErr)
		checkItem(t, "bad", tr.Results[2].Error, permErr)
	})

	t.Run("Life, Remove, EnsureDead", func(t *testing.T) {
		m := addMachine(t, state.MachineParams{})
		c := addMachine(t, state.MachineParams{ParentID: m.ID, ContainerType: "lxd"})
		tag, ctag := "machine-"+m.ID, state.Machine{ID: c.ID}.Tag().String()
		// Alive: Remove refuses.
		rm := testkit.MustCall[params.ErrorResults](t, f.Ctrl, 11, "Remove", testkit.Ents(tag))
		checkItem(t, "remove alive", rm.Results[0].Error, itemErr{`cannot remove entity "` + tag + `": still alive`, ""})
		// A machine hosting a container cannot die.
		ed := testkit.MustCall[params.ErrorResults](t, f.Ctrl, 11, "EnsureDead", testkit.Ents(tag))
		checkItem(t, "hosting", ed.Results[0].Error, itemErr{`machine ` + m.ID + ` is hosting containers "` + c.ID + `"`, params.CodeHasContainers})
		// Dying (operator) then Remove: not dead.
		if err := st.SetMachineDying(t.Context(), model, c.ID); err != nil {
			t.Fatal(err)
		}
		if err := st.SetMachineDying(t.Context(), model, m.ID); err != nil {
			t.Fatal(err)
		}
		rm = testkit.MustCall[params.ErrorResults](t, f.Ctrl, 11, "Remove", testkit.Ents(tag))
		checkItem(t, "remove dying", rm.Results[0].Error, itemErr{"cannot remove machine " + m.ID + ": machine is not dead", ""})
		// The container goes first (its host's agent would do this).
		if err := st.EnsureMachineDead(t.Context(), model, c.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RemoveMachine(t.Context(), model, c.ID); err != nil {
			t.Fatal(err)
		}
		_ = ctag
		ed = testkit.MustCall[params.ErrorResults](t, f.Ctrl, 11, "EnsureDead", testkit.Ents(tag, tag))
		checkItem(t, "dead", ed.Results[0].Error, noErr)
		checkItem(t, "dead again", ed.Results[1].Error, noErr)
		life := testkit.MustCall[params.LifeResults](t, f.Ctrl, 11, "Life", testkit.Ents(tag))
		if life.Results[0].Life != "dead" {
			t.Errorf("Life = %+v", life.Results[0])
		}
		rm = testkit.MustCall[params.ErrorResults](t, f.Ctrl, 11, "Remove", testkit.Ents(tag, tag))
		checkItem(t, "removed", rm.Results[0].Error, noErr)
		checkItem(t, "removed twice", rm.Results[1].Error, notFound(m.ID))
		life = testkit.MustCall[params.LifeResults](t, f.Ctrl, 11, "Life", testkit.Ents(tag))
		checkItem(t, "life after removal", life.Results[0].Error, notFound(m.ID))
		// Units keep a machine alive.
		ed = testkit.MustCall[params.ErrorResults](t, f.Ctrl, 11, "EnsureDead", testkit.Ents("machine-1"))
		checkItem(t, "units", ed.Results[0].Error, itemErr{`machine 1 has unit "mysql/0" assigned`, params.CodeHasAssignedUnits})
	})

	t.Run("SetPasswords", func(t *testing.T) {
		m := addMachine(t, state.MachineParams{})
		tag := "machine-" + m.ID
		res := testkit.MustCall[params.ErrorResults](t, f.Ctrl, 11, "SetPasswords", params.EntityPasswords{Changes: []params.EntityPassword{
			{Tag: tag, Password: "short"}, {Tag: tag, Password: "a-long-enough-agent-password"}, {Tag: "machine-0-lxd-0", Password: "a-long-enough-agent-password"},
		}})
		checkItem(t, "short", res.Results[0].Error, itemErr{"password is only 5 bytes long, and is not a valid Agent password", params.CodeNotValid})
		checkItem(t, "ok", res.Results[1].Error, noErr)
		checkItem(t, "container", res.Results[2].Error, permErr)
		if ok, err := st.MachinePasswordValid(t.Context(), model, m.ID, "a-long-enough-agent-password"); !ok || err != nil {
			t.Errorf("password not set: %v %v", ok, err)
		}
	})

	t.Run("SetInstanceInfo and InstanceId", func(t *testing.T) {
		m := addMachine(t, state.MachineParams{Volumes: []state.VolumeParams{{Pool: "builtin", Size: 10}}})
		tag := "machine-" + m.ID
		arch, zone := "arm64", "zone-b"
		info := params.InstanceInfo{Tag: tag, InstanceId: "i-x", Nonce: "n-x", DisplayName: "vm-x",
			Characteristics:   &params.HardwareCharacteristics{Arch: &arch, AvailabilityZone: &zone},
			Volumes:           []params.Volume{{VolumeTag: "volume-1", Info: params.VolumeInfo{VolumeId: "vol-1", Size: 10}}},
			VolumeAttachments: map[string]params.VolumeAttachmentInfo{"volume-1": {DeviceName: "sdb"}},
			NetworkConfig:     []params.NetworkConfig{{InterfaceName: "eth0", MACAddress: "00:16:3e:00:00:01", Address: "10.0.0.5"}},
		}
		res := testkit.MustCall[params.ErrorResults](t, f.Ctrl, 11, "SetInstanceInfo", params.InstancesInfo{Machines: []params.InstanceInfo{
			info, info, {Tag: tag, InstanceId: "", Nonce: ""}, {Tag: "machine-0-lxd-0", InstanceId: "i", Nonce: "n"}, {Tag: "machine-77", InstanceId: "i", Nonce: "n"},
		}})
		checkItem(t, "first", res.Results[0].Error, noErr)
		checkItem(t, "twice", res.Results[1].Error, itemErr{`cannot record provisioning info for "i-x": cannot set instance data for machine "` + m.ID + `": already set`, params.CodeAlreadyExists})
		checkItem(t, "empty", res.Results[2].Error, itemErr{`cannot record provisioning info for "": cannot set instance data for machine "` + m.ID + `": instance id and nonce cannot be empty`, params.CodeNotValid})
		checkItem(t, "container", res.Results[3].Error, permErr)
		checkItem(t, "missing", res.Results[4].Error, notFound("77"))
		ids := testkit.MustCall[params.StringResults](t, f.Ctrl, 11, "InstanceId", testkit.Ents(tag))
		if ids.Results[0].Result != "i-x" {
			t.Errorf("InstanceId = %+v", ids.Results[0])
		}
		az := testkit.MustCall[params.StringResults](t, f.Ctrl, 11, "AvailabilityZone", testkit.Ents(tag, "machine-1"))
		if az.Results[0].Result != "zone-b" || az.Results[1].Result != "" || az.Results[1].Error != nil {
			t.Errorf("AvailabilityZone = %+v", az.Results)
		}
		got, _ := st.Machine(t.Context(), model, m.ID)
		if got.Nonce != "n-x" || got.DisplayName != "vm-x" || len(got.LinkLayerDevices) != 1 {
			t.Errorf("machine after SetInstanceInfo = %+v", got)
		}
		vols, _ := st.MachineVolumes(t.Context(), model, m.ID)
		if len(vols) != 1 || vols[0].Info == nil || vols[0].Info.VolumeID != "vol-1" || vols[0].Info.Pool != "builtin" ||
			vols[0].Attachments[0].Info == nil || vols[0].Attachments[0].Info.DeviceName != "sdb" {
			t.Errorf("volumes = %+v", vols)
		}
	})

	t.Run("statuses", func(t *testing.T) {
		m := addMachine(t, state.MachineParams{})
		tag := "machine-" + m.ID
		res := testkit.MustCall[params.ErrorResults](t, f.Ctrl, 11, "SetStatus", params.SetStatus{Entities: []params.EntityStatusArgs{
			{Tag: tag, Status: "started"}, {Tag: tag, Status: "bogus"}, {Tag: tag, Status: "error"},
		}})
		checkItem(t, "started", res.Results[0].Error, noErr)
		checkItem(t, "bogus", res.Results[1].Error, itemErr{`cannot set invalid status "bogus"`, params.CodeNotValid})
		checkItem(t, "error without info", res.Results[2].Error, itemErr{`cannot set status "error" without info`, params.CodeNotValid})
		sr := testkit.MustCall[params.StatusResults](t, f.Ctrl, 11, "Status", testkit.Ents(tag))
		if sr.Results[0].Status != "started" || sr.Results[0].Since == nil || sr.Results[0].Data == nil {
			t.Errorf("Status = %+v", sr.Results[0])
		}
		res = testkit.MustCall[params.ErrorResults](t, f.Ctrl, 11, "SetInstanceStatus", params.SetStatus{Entities: []params.EntityStatusArgs{
			{Tag: tag, Status: "provisioning error", Info: "no capacity", Data: map[string]any{"transient": true}},
			{Tag: tag, Status: "exploded"},
		}})
		checkItem(t, "instance", res.Results[0].Error, noErr)
		checkItem(t, "instance bogus", res.Results[1].Error, itemErr{`cannot set invalid status "exploded"`, params.CodeNotValid})
		is := testkit.MustCall[params.StatusResults](t, f.Ctrl, 11, "InstanceStatus", testkit.Ents(tag))
		if is.Results[0].Status != "provisioning error" || is.Results[0].Info != "no capacity" {
			t.Errorf("InstanceStatus = %+v", is.Results[0])
		}
		sr = testkit.MustCall[params.StatusResults](t, f.Ctrl, 11, "Status", testkit.Ents(tag))
		if sr.Results[0].Status != "error" || sr.Results[0].Info != "no capacity" {
			t.Errorf("agent status after provisioning error = %+v", sr.Results[0])
		}
		te := testkit.MustCall[params.StatusResults](t, f.Ctrl, 11, "MachinesWithTransientErrors", nil)
		found := false
		for _, r := range te.Results {
			if r.Id == m.ID {
				found = r.Life == "alive" && r.Status == "provisioning error" && r.Data["transient"] == true
			}
		}
		if !found {
			t.Errorf("MachinesWithTransientErrors = %+v; want machine %s", te.Results, m.ID)
		}
		mod := testkit.MustCall[params.ErrorResults](t, f.Ctrl, 11, "SetModificationStatus", params.SetStatus{Entities: []params.EntityStatusArgs{
			{Tag: tag, Status: "applied"}, {Tag: tag, Status: "running"},
		}})
		checkItem(t, "modification", mod.Results[0].Error, noErr)
		checkItem(t, "modification bogus", mod.Results[1].Error, itemErr{`cannot set invalid status "running"`, params.CodeNotValid})
		// The status setters check the tag and access, then leave the
		// existence check to the write: same errors as a read first.
		for _, method := range []string{"SetInstanceStatus", "SetModificationStatus"} {
			res := testkit.MustCall[params.ErrorResults](t, f.Ctrl, 11, method, params.SetStatus{Entities: []params.EntityStatusArgs{
				{Tag: "machine-42", Status: "bogus"}, {Tag: "bad", Status: "running"}, {Tag: "machine-0-lxd-0", Status: "running"},
			}})
			checkItem(t, method+" missing", res.Results[0].Error, itemErr{"machine 42 not found", params.CodeNotFound})
			checkItem(t, method+" bad tag", res.Results[1].Error, permErr)
			checkItem(t, method+" container", res.Results[2].Error, permErr)
		}
	})

	t.Run("supported containers", func(t *testing.T) {
		m := addMachine(t, state.MachineParams{})
		c := addMachine(t, state.MachineParams{ParentID: m.ID, ContainerType: "kvm"})
		tag := "machine-" + m.ID
		sc := testkit.MustCall[params.MachineContainerResults](t, f.Ctrl, 11, "SupportedContainers", testkit.Ents(tag))
		if len(sc.Results[0].ContainerTypes) != 0 || sc.Results[0].Determined {
			t.Errorf("before: %+v", sc.Results[0])
		}
		res := testkit.MustCall[params.ErrorResults](t, f.Ctrl, 11, "SetSupportedContainers", params.MachineContainersParams{Params: []params.MachineContainers{
			{MachineTag: tag, ContainerTypes: []string{"docker"}}, {MachineTag: tag, ContainerTypes: []string{"lxd"}},
		}})
		checkItem(t, "unknown type", res.Results[0].Error, itemErr{`container type "docker" not valid`, params.CodeNotValid})
		checkItem(t, "lxd", res.Results[1].Error, noErr)
		sc = testkit.MustCall[params.MachineContainerResults](t, f.Ctrl, 11, "SupportedContainers", testkit.Ents(tag))
		if !slices.Equal(sc.Results[0].ContainerTypes, []string{"lxd"}) || !sc.Results[0].Determined {
			t.Errorf("after: %+v", sc.Results[0])
		}
		got, _ := st.Machine(t.Context(), model, c.ID)
		if got.Status.Status != "error" || got.Status.Message != "unsupported container" || got.Status.Data["type"] != "kvm" {
			t.Errorf("pending kvm container status = %+v", got.Status)
		}
		res = testkit.MustCall[params.ErrorResults](t, f.Ctrl, 11, "SetSupportedContainers", params.MachineContainersParams{Params: []params.MachineContainers{
			{MachineTag: tag}}})
		checkItem(t, "none", res.Results[0].Error, noErr)
		sc = testkit.MustCall[params.MachineContainerResults](t, f.Ctrl, 11, "SupportedContainers", testkit.Ents(tag))
		if len(sc.Results[0].ContainerTypes) != 0 || !sc.Results[0].Determined {
			t.Errorf("none: %+v", sc.Results[0])
		}
	})

	t.Run("Constraints", func(t *testing.T) {
		res := testkit.MustCall[params.ConstraintsResults](t, f.Ctrl, 11, "Constraints", testkit.Ents("machine-1", "machine-0"))
		c := res.Results[0].Constraints
		if c.Mem == nil || *c.Mem != 2048 || c.Spaces == nil || !slices.Equal(*c.Spaces, []string{"db"}) || c.Arch != nil {
			t.Errorf("Constraints(1) = %+v", c)
		}
		if res.Results[1].Error != nil || res.Results[1].Constraints != (params.Value{}) {
			t.Errorf("Constraints(0) = %+v", res.Results[1])
		}
		raw := testkit.RawCall(t, f.Ctrl, 11, "Constraints", testkit.Ents("machine-1"))
		if string(raw) != `{"results":[{"constraints":{"mem":2048,"spaces":["db"]}}]}` {
			t.Errorf("wire = %s", raw)
		}
	})

	t.Run("ProvisioningInfo", func(t *testing.T) {
		res := testkit.MustCall[params.ProvisioningInfoResults](t, f.Ctrl, 11, "ProvisioningInfo", testkit.Ents("machine-1"))
		info := res.Results[0].Result
		if res.Results[0].Error != nil || info == nil {
			t.Fatalf("ProvisioningInfo = %+v", res.Results[0])
		}
		if info.Base != (params.Base{Name: "ubuntu", Channel: "22.04"}) || *info.Constraints.Mem != 2048 ||
			!slices.Equal(info.Jobs, []string{"JobHostUnits"}) {
			t.Errorf("info = %+v", info)
		}
		if info.Tags["juju-model-uuid"] != model || info.Tags["juju-units-deployed"] != "mysql/0" ||
			info.Tags["juju-machine-id"] != "default-machine-1" || info.Tags["juju-controller-uuid"] == "" {
			t.Errorf("tags = %v", info.Tags)
		}
		if len(info.Volumes) != 1 || info.Volumes[0].VolumeTag != "volume-0" || info.Volumes[0].Provider != "builtin" ||
			info.Volumes[0].Size != 1024 || info.Volumes[0].Attachment == nil || info.Volumes[0].Attachment.MachineTag != "machine-1" {
			t.Errorf("volumes = %+v", info.Volumes)
		}
		if !slices.Equal(info.SpaceSubnets["db"], []string{"subnet-0"}) || !slices.Equal(info.SubnetAZs["subnet-0"], []string{"zone-a"}) {
			t.Errorf("topology = %v %v", info.SpaceSubnets, info.SubnetAZs)
		}
		if info.EndpointBindings["db"] != "space-db" {
			t.Errorf("bindings = %v", info.EndpointBindings)
		}
		// A space without subnets.
		empty := []string{"empty"}
		if _, err := st.AddSpace(t.Context(), model, "empty", ""); err != nil {
			t.Fatal(err)
		}
		m := addMachine(t, state.MachineParams{Constraints: state.Constraints{Spaces: &empty}})
		res = testkit.MustCall[params.ProvisioningInfoResults](t, f.Ctrl, 11, "ProvisioningInfo", testkit.Ents("machine-"+m.ID))
		checkItem(t, "empty space", res.Results[0].Error, itemErr{`matching subnets to zones: cannot use space "empty" as deployment target: no subnets`, ""})
	})

	t.Run("DistributionGroup", func(t *testing.T) {
		// A second wordpress unit on a new, provisioned machine.
		m := addMachine(t, state.MachineParams{Nonce: "n", InstanceID: "i-dg"})
		if _, err := st.AddUnit(t.Context(), model, "wordpress", m.ID, ""); err != nil {
			t.Fatal(err)
		}
		dg := testkit.MustCall[params.DistributionGroupResults](t, f.Ctrl, 11, "DistributionGroup", testkit.Ents("machine-0", "machine-1"))
		if !slices.Equal(dg.Results[0].Result, []string{"i-0", "i-dg"}) {
			t.Errorf("DistributionGroup(0) = %+v", dg.Results[0])
		}
		if dg.Results[1].Result == nil || len(dg.Results[1].Result) != 0 {
			t.Errorf("DistributionGroup(1) = %#v; want [] (machine 1 is unprovisioned)", dg.Results[1].Result)
		}
		by := testkit.MustCall[params.StringsResults](t, f.Ctrl, 11, "DistributionGroupByMachineId", testkit.Ents("machine-0", "machine-1"))
		if !slices.Equal(by.Results[0].Result, []string{m.ID}) || len(by.Results[1].Result) != 0 {
			t.Errorf("DistributionGroupByMachineId = %+v", by.Results)
		}
	})

	t.Run("charm profiles, keep-instance, removal marks", func(t *testing.T) {
		m := addMachine(t, state.MachineParams{})
		tag := "machine-" + m.ID
		res := testkit.MustCall[params.ErrorResults](t, f.Ctrl, 11, "SetCharmProfiles", params.SetProfileArgs{Args: []params.SetProfileArg{
			{Entity: params.Entity{Tag: tag}, Profiles: []string{"juju-default-wordpress-3"}}}})
		checkItem(t, "profiles", res.Results[0].Error, noErr)
		got, _ := st.Machine(t.Context(), model, m.ID)
		if !slices.Equal(got.CharmProfiles, []string{"juju-default-wordpress-3"}) {
			t.Errorf("profiles = %v", got.CharmProfiles)
		}
		if err := st.SetKeepInstance(t.Context(), model, m.ID, true); err != nil {
			t.Fatal(err)
		}
		ki := testkit.MustCall[params.BoolResults](t, f.Ctrl, 11, "KeepInstance", testkit.Ents(tag))
		if !ki.Results[0].Result {
			t.Errorf("KeepInstance = %+v", ki.Results[0])
		}
		mk := testkit.MustCall[params.ErrorResults](t, f.Ctrl, 11, "MarkMachinesForRemoval", testkit.Ents(tag))
		checkItem(t, "alive", mk.Results[0].Error, itemErr{"cannot remove machine " + m.ID + ": machine is not dead", ""})
		if err := st.EnsureMachineDead(t.Context(), model, m.ID); err != nil {
			t.Fatal(err)
		}
		mk = testkit.MustCall[params.ErrorResults](t, f.Ctrl, 11, "MarkMachinesForRemoval", testkit.Ents(tag))
		checkItem(t, "dead", mk.Results[0].Error, noErr)
		// The controller's machine undertaker removes it
		// (machineundertaker_test.go).
		testkit.WaitFor(t, "the marked machine removed", func() bool {
			_, err := st.Machine(t.Context(), model, m.ID)
			return jujuerrors.Is(err, jujuerrors.NotFound)
		})
	})

	t.Run("observed network config", func(t *testing.T) {
		cfg := []params.NetworkConfig{{InterfaceName: "br-eth0", InterfaceType: "bridge", MACAddress: "aa"},
			{InterfaceName: "eth0", ParentInterfaceName: "br-eth0", Address: "10.0.0.1"}}
		if err := f.Agent.Call(testkit.Ctx(t), "Provisioner", 11, "", "SetObservedNetworkConfig",
			params.SetMachineNetworkConfig{Tag: "machine-0", Config: cfg}, nil); err != nil {
			t.Fatal(err)
		}
		if err := f.Agent.Call(testkit.Ctx(t), "Provisioner", 11, "", "SetHostMachineNetworkConfig",
			params.SetMachineNetworkConfig{Tag: "machine-0"}, nil); err != nil {
			t.Fatal(err)
		}
		testkit.WantErr(t, f.Agent.Call(testkit.Ctx(t), "Provisioner", 11, "", "SetObservedNetworkConfig",
			params.SetMachineNetworkConfig{Tag: "unit-x-0"}, nil), `"unit-x-0" is not a valid machine tag`, "")
		got, _ := st.Machine(t.Context(), model, "0")
		if len(got.LinkLayerDevices) != 2 || got.LinkLayerDevices[0].Name != "br-eth0" {
			t.Errorf("devices = %+v", got.LinkLayerDevices)
		}
		hc := testkit.MustCall[params.HostNetworkChangeResults](t, f.Agent, 11, "HostChangesForContainers", testkit.Ents("machine-0-lxd-0", "machine-0"))
		if hc.Results[0].Error != nil || len(hc.Results[0].NewBridges) != 0 || hc.Results[0].ReconfigureDelay != 17 {
			t.Errorf("HostChangesForContainers with br-eth0 present = %+v", hc.Results[0])
		}
		checkItem(t, "host", hc.Results[1].Error, itemErr{`cannot prepare network config for "machine-0": not a container`, ""})
	})

	t.Run("container profiles", func(t *testing.T) {
		if _, err := st.AddUnit(t.Context(), model, "wordpress", "0/lxd/0", ""); err != nil {
			t.Fatal(err)
		}
		res := testkit.MustCall[params.ContainerProfileResults](t, f.Agent, 11, "GetContainerProfileInfo", testkit.Ents("machine-0-lxd-0"))
		r := res.Results[0]
		if r.Error != nil || len(r.LXDProfiles) != 1 || r.LXDProfiles[0].Name != "juju-default-wordpress-3" ||
			r.LXDProfiles[0].Profile.Config["security.nesting"] != "true" {
			t.Errorf("GetContainerProfileInfo = %+v", r)
		}
		// The controller agent has no host machine in this model.
		err := f.Ctrl.Call(testkit.Ctx(t), "Provisioner", 11, "", "GetContainerProfileInfo", testkit.Ents("machine-0-lxd-0"), nil)
		testkit.WantErr(t, err, "permission denied", params.CodeUnauthorized)
	})

	t.Run("empty and null params", func(t *testing.T) {
		for _, m := range []string{"Life", "Remove", "EnsureDead", "InstanceId", "Status", "ProvisioningInfo", "Constraints",
			"DistributionGroup", "AvailabilityZone", "KeepInstance", "InstanceStatus", "SupportedContainers", "Tools",
			"MarkMachinesForRemoval", "ReleaseContainerAddresses"} {
			for _, args := range []any{nil, testkit.Ents(), json.RawMessage(`{"entities":null}`)} {
				raw := testkit.RawCall(t, f.Agent, 11, m, args)
				if !strings.Contains(string(raw), `"results":[]`) {
					t.Errorf("%s(%v) = %s; want empty results", m, args, raw)
				}
			}
		}
	})
}
