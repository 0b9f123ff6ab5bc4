package daemon_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of the 2015 Provisioner shapes")

var timeRE = regexp.MustCompile(`"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)"`)

// golden compares a 2015 request (method and params) and its response
// with testdata/provisioner_v1/<name>.json, after replacing what differs
// between runs (UUIDs, the listen port, the CA certificate, times).
func golden(t *testing.T, f *provFixture, name, method string, args any, raw json.RawMessage) {
	t.Helper()
	creds := f.d.Credentials()
	reqParams, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	exchange, err := json.Marshal(struct {
		Type     string
		Version  int
		Request  string
		Params   json.RawMessage
		Response json.RawMessage
	}{"Provisioner", 1, method, reqParams, raw})
	if err != nil {
		t.Fatal(err)
	}
	s := string(exchange)
	s = strings.ReplaceAll(s, base64.StdEncoding.EncodeToString([]byte(creds.CACert)), "CA-CERT-BASE64")
	s = strings.ReplaceAll(s, creds.DefaultModelUUID, "MODEL-UUID")
	s = strings.ReplaceAll(s, creds.ControllerUUID, "CONTROLLER-UUID")
	s = strings.ReplaceAll(s, f.d.Addr(), "127.0.0.1:PORT")
	if _, port, ok := strings.Cut(f.d.Addr(), ":"); ok {
		s = strings.ReplaceAll(s, `"Port":`+port, `"Port":"PORT"`)
	}
	s = timeRE.ReplaceAllString(s, `"TIME"`)
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(s), "", "  "); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	buf.WriteByte('\n')
	path := filepath.Join("testdata", "provisioner_v1", name+".json")
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(want, buf.Bytes()) {
		t.Errorf("%s: response differs from %s:\n%s", name, path, buf.String())
	}
}

// The 2015 method set answers with the 2015 JSON shapes (Go field names as
// keys, "Error": null, the storage and network tags): golden files.
func TestProvisionerV1Shapes(t *testing.T) {
	f := newProvFixture(t)
	st, model := f.st, f.model
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.SetMachineStatus(model, "0/lxd/0", state.AgentStatus, state.Status{Status: "error", Message: "boom",
		Data: map[string]any{"transient": true}}))
	m, err := st.AddMachine(model, state.MachineParams{Series: "trusty"})
	must(err)
	mtag := "machine-" + m.ID

	tests := []struct {
		name   string
		caller *client.Conn
		method string
		args   any
	}{
		{"Life", f.agent, "Life", v1ents("machine-0", "machine-0-lxd-0", "machine-1", "bad")},
		{"Series", f.ctrl, "Series", v1ents("machine-0", "machine-1", "machine-42")},
		{"RequestedNetworks", f.ctrl, "RequestedNetworks", v1ents("machine-1", "machine-0")},
		{"InstanceId", f.ctrl, "InstanceId", v1ents("machine-0", "machine-1")},
		{"Constraints", f.ctrl, "Constraints", v1ents("machine-1")},
		{"ProvisioningInfo", f.ctrl, "ProvisioningInfo", v1ents("machine-1", "machine-0-lxd-0")},
		{"DistributionGroup", f.ctrl, "DistributionGroup", v1ents("machine-0", "machine-1")},
		{"Status", f.agent, "Status", v1ents("machine-0-lxd-0", "not a tag")},
		{"MachinesWithTransientErrors", f.agent, "MachinesWithTransientErrors", nil},
		{"SetPasswords", f.ctrl, "SetPasswords", params.V1EntityPasswords{Changes: []params.V1EntityPassword{
			{Tag: mtag, Password: "xxxx"}, {Tag: mtag, Password: "a-long-enough-agent-password"}}}},
		{"SetProvisioned", f.ctrl, "SetProvisioned", params.V1SetProvisioned{Machines: []params.V1MachineSetProvisioned{
			{Tag: mtag, InstanceId: "i-p", Nonce: "n-p"}, {Tag: mtag, InstanceId: "i-q", Nonce: "n-q"}}}},
		{"SetInstanceInfo", f.ctrl, "SetInstanceInfo", params.V1InstancesInfo{Machines: []params.V1InstanceInfo{
			{Tag: mtag, InstanceId: "i-r", Nonce: "n-r"}, {Tag: "machine-1", InstanceId: "i-1", Nonce: "n-1",
				Networks: []params.V1Network{{Tag: "bogus"}}}}}},
		{"UpdateStatus", f.agent, "UpdateStatus", params.V1SetStatus{Entities: []params.V1EntityStatusArgs{
			{Tag: "machine-0-lxd-0", Data: map[string]any{"transient": false}}, {Tag: "machine-0", Data: map[string]any{"x": 1}}}}},
		{"SetSupportedContainers", f.agent, "SetSupportedContainers", params.V1MachineContainersParams{Params: []params.V1MachineContainers{
			{MachineTag: "machine-0", ContainerTypes: []string{"lxc", "kvm"}}, {MachineTag: "machine-0", ContainerTypes: []string{"docker"}}}}},
		{"WatchContainers", f.agent, "WatchContainers", params.V1WatchContainers{Params: []params.V1WatchContainer{
			{MachineTag: "machine-0", ContainerType: "lxd"}, {MachineTag: "machine-0", ContainerType: "kvm"}, {MachineTag: "machine-1"}}}},
		{"ContainerConfig", f.agent, "ContainerConfig", nil},
		{"ContainerManagerConfig", f.agent, "ContainerManagerConfig", params.V1ContainerManagerConfigParams{Type: "lxc"}},
		{"EnvironUUID", f.agent, "EnvironUUID", nil},
		{"APIHostPorts", f.agent, "APIHostPorts", nil},
		{"APIAddresses", f.agent, "APIAddresses", nil},
		{"StateAddresses", f.agent, "StateAddresses", nil},
		{"FindTools", f.agent, "FindTools", params.V1FindToolsParams{MajorVersion: 1, MinorVersion: -1, Series: "trusty"}},
		{"FindToolsNone", f.agent, "FindTools", params.V1FindToolsParams{Number: "2.0.0"}},
		{"WatchEnvironMachines", f.ctrl, "WatchEnvironMachines", nil},
		{"WatchForEnvironConfigChanges", f.agent, "WatchForEnvironConfigChanges", nil},
		{"WatchAPIHostPorts", f.agent, "WatchAPIHostPorts", nil},
		{"WatchMachineErrorRetry", f.ctrl, "WatchMachineErrorRetry", nil},
		{"CACert", f.agent, "CACert", nil},
		{"SetStatus", f.agent, "SetStatus", params.V1SetStatus{Entities: []params.V1EntityStatusArgs{
			{Tag: "machine-0", Status: "started", Info: "ok"}, {Tag: "machine-0", Status: "bogus"}, {Tag: "not a tag"}}}},
		{"Remove", f.ctrl, "Remove", v1ents(mtag, "machine-0-lxd-0", "machine-42")},
		{"EnsureDead", f.ctrl, "EnsureDead", v1ents("machine-1", "bad")},
		{"ReleaseContainerAddresses", f.agent, "ReleaseContainerAddresses", v1ents("machine-0-lxd-0", "machine-0", "bad")},
		{"Status after SetStatus", f.agent, "Status", v1ents("machine-0")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, v := range []int{1, 0} {
				raw := rawCall(t, tt.caller, v, tt.method, tt.args)
				if v == 1 {
					golden(t, f, tt.name, tt.method, tt.args, raw)
				}
			}
		})
	}

	// Tools: agent-version 3.3.0 for machine 0 (base ubuntu@22.04, so
	// jammy): the catalog's 3.3.0-ubuntu-amd64 named by the series, first
	// match with hostname verification off.
	must(st.UpdateModelConfig(model, map[string]any{"agent-version": "3.3.0"}, nil))
	golden(t, f, "Tools", "Tools", v1ents("machine-0", "machine-1"), rawCall(t, f.agent, 1, "Tools", v1ents("machine-0", "machine-1")))
	must(st.UpdateModelConfig(model, nil, []string{"agent-version"}))
	wantErr(t, f.agent.Call(ctxT(t), "Provisioner", 1, "", "Tools", v1ents("machine-0"), nil),
		"agent version not set in environment config", "")
	golden(t, f, "EnvironConfig", "EnvironConfig", nil, rawCall(t, f.agent, 1, "EnvironConfig", nil))
}

// Version 1 is reachable with the legacy capitalised (V0) framing.
func TestProvisionerV0Framing(t *testing.T) {
	f := newProvFixture(t)
	creds := f.d.Credentials()
	ws, err := client.DialRaw(ctxT(t), client.Config{Addr: f.d.Addr(), ModelUUID: f.model, CACert: []byte(creds.CACert)})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	roundTrip := func(msg string) map[string]json.RawMessage {
		t.Helper()
		if err := ws.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, b, err := ws.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]json.RawMessage
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	login := roundTrip(`{"RequestId":1,"Type":"Admin","Version":3,"Request":"Login","Params":{"auth-tag":"machine-0","credentials":"` +
		m0Password + `","nonce":"` + m0Nonce + `"}}`)
	if _, ok := login["Response"]; !ok || login["Error"] != nil {
		t.Fatalf("V0 login = %v", login)
	}
	life := roundTrip(`{"RequestId":2,"Type":"Provisioner","Version":1,"Request":"Life","Params":{"Entities":[{"Tag":"machine-0-lxd-0"},{"Tag":"machine-1"}]}}`)
	want := `{"Results":[{"Life":"alive","Error":null},{"Life":"","Error":{"Message":"permission denied","Code":"unauthorized access"}}]}`
	if string(life["Response"]) != want || string(life["RequestId"]) != "2" {
		t.Errorf("V0 Life = %s %s; want %s", life["RequestId"], life["Response"], want)
	}
	v0 := roundTrip(`{"RequestId":3,"Type":"Provisioner","Version":0,"Request":"Series","Params":{"Entities":[{"Tag":"machine-0"}]}}`)
	if string(v0["Response"]) != `{"Results":[{"Error":null,"Result":"jammy"}]}` {
		t.Errorf("V0 Series = %s", v0["Response"])
	}
}
