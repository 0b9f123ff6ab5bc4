package provisioner_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of the 2015 Provisioner shapes")

// golden compares a 2015 request (method and params) and its response
// with testdata/provisioner_v1/<name>.json, after normalising the decoded
// fields that differ between runs (see normaliser). With -update it writes
// the file instead, unless the test has already failed.
func golden(t *testing.T, f *testkit.ProvFixture, name, method string, args any, raw json.RawMessage) {
	t.Helper()
	reqParams, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := decodeOrdered(raw)
	if err != nil {
		t.Fatalf("%s: response %s: %v", name, raw, err)
	}
	resp = newNormaliser(f, method).value(resp, "Response")
	exchange, err := json.Marshal(struct {
		Type     string
		Version  int
		Request  string
		Params   json.RawMessage
		Response any
	}{"Provisioner", 1, method, reqParams, resp})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, exchange, "", "  "); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	buf.WriteByte('\n')
	path := filepath.Join("testdata", "provisioner_v1", name+".json")
	if *updateGolden {
		if t.Failed() {
			t.Fatalf("not rewriting %s: the test failed above; fix that first", path)
		}
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
		t.Errorf("%s: response differs from %s (a deliberate change: rerun with -update, review the diff, say why in the commit):\n%s", name, path, buf.String())
	}
}

// normaliser replaces, field by field in a decoded response, what differs
// between runs: the daemon's own API address and port in the fields that
// hold them (APIAddresses' results, APIHostPorts' ports, the host of agent
// binary URLs), the fixture's UUIDs and CA certificate wherever a string
// is exactly one of them, and times. Values are compared whole, never
// searched in text: a state address that happens to use the same port as
// the daemon (StateAddresses' 127.0.0.1:37017 when the listener got port
// 37017) stays as it is.
type normaliser struct {
	method string
	addr   string // the daemon's host:port
	port   json.Number
	exact  map[string]string // whole strings and what replaces them
}

func newNormaliser(f *testkit.ProvFixture, method string) *normaliser {
	creds := f.D.Credentials()
	_, port, _ := strings.Cut(f.D.Addr(), ":")
	return &normaliser{method: method, addr: f.D.Addr(), port: json.Number(port), exact: map[string]string{
		creds.DefaultModelUUID: "MODEL-UUID",
		creds.ControllerUUID:   "CONTROLLER-UUID",
		base64.StdEncoding.EncodeToString([]byte(creds.CACert)): "CA-CERT-BASE64",
	}}
}

// value normalises v, found under key (the last object key on its path).
func (n *normaliser) value(v any, key string) any {
	switch v := v.(type) {
	case *orderedObject:
		for i, k := range v.keys {
			v.vals[i] = n.value(v.vals[i], k)
		}
		return v
	case []any:
		for i := range v {
			v[i] = n.value(v[i], key)
		}
		return v
	case json.Number:
		if key == "Port" && n.method == "APIHostPorts" && v == n.port {
			return "PORT"
		}
		return v
	case string:
		if r, ok := n.exact[v]; ok {
			return r
		}
		if _, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return "TIME"
		}
		if key == "Result" && n.method == "APIAddresses" && v == n.addr {
			return "127.0.0.1:PORT"
		}
		if key == "url" {
			return n.url(v)
		}
		return v
	}
	return v
}

// url normalises an agent binaries URL: the daemon's host and the model
// UUID among its path segments.
func (n *normaliser) url(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host != n.addr {
		return s
	}
	u.Host = "127.0.0.1:PORT"
	segs := strings.Split(u.Path, "/")
	for i, seg := range segs {
		if r, ok := n.exact[seg]; ok {
			segs[i] = r
		}
	}
	u.Path = strings.Join(segs, "/")
	return u.String()
}

// orderedObject is a decoded JSON object that keeps its keys in the order
// they came in, so a normalised response encodes as the server sent it.
type orderedObject struct {
	keys []string
	vals []any
}

func (o *orderedObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		vb, err := json.Marshal(o.vals[i])
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// decodeOrdered decodes one JSON value: objects as *orderedObject,
// numbers as json.Number.
func decodeOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeOrderedValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the value")
	}
	return v, nil
}

func decodeOrderedValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := &orderedObject{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeOrderedValue(dec)
			if err != nil {
				return nil, err
			}
			o.keys = append(o.keys, k.(string))
			o.vals = append(o.vals, v)
		}
		_, err := dec.Token() // '}'
		return o, err
	case json.Delim('['):
		a := []any{}
		for dec.More() {
			v, err := decodeOrderedValue(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token() // ']'
		return a, err
	}
	return tok, nil
}

// The 2015 method set answers with the 2015 JSON shapes (Go field names as
// keys, "Error": null, the storage and network tags): golden files. Version
// 0 is the same method set with the same shapes: the same calls, in the
// same order, on a twin fixture at version 0 must answer what version 1
// answered (after the same normalisation), writes and watcher ids included.
func TestProvisionerV1Shapes(t *testing.T) {
	type twin struct {
		f    *testkit.ProvFixture
		mtag string
	}
	setUp := func() twin {
		f := testkit.NewProvFixture(t)
		if err := f.St.SetMachineStatus(t.Context(), f.Model, "0/lxd/0", state.AgentStatus, state.Status{Status: "error", Message: "boom",
			Data: map[string]any{"transient": true}}); err != nil {
			t.Fatal(err)
		}
		m, err := f.St.AddMachine(t.Context(), f.Model, state.MachineParams{Series: "trusty"})
		if err != nil {
			t.Fatal(err)
		}
		return twin{f, "machine-" + m.ID}
	}
	v1, v0 := setUp(), setUp()
	if v1.mtag != v0.mtag {
		t.Fatalf("the twin fixtures differ: %s, %s", v1.mtag, v0.mtag)
	}
	mtag := v1.mtag
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	const agent, ctrl = false, true
	tests := []struct {
		name   string
		asCtrl bool
		method string
		args   any
	}{
		{"Life", agent, "Life", testkit.V1Ents("machine-0", "machine-0-lxd-0", "machine-1", "bad")},
		{"Series", ctrl, "Series", testkit.V1Ents("machine-0", "machine-1", "machine-42")},
		{"RequestedNetworks", ctrl, "RequestedNetworks", testkit.V1Ents("machine-1", "machine-0")},
		{"InstanceId", ctrl, "InstanceId", testkit.V1Ents("machine-0", "machine-1")},
		{"Constraints", ctrl, "Constraints", testkit.V1Ents("machine-1")},
		{"ProvisioningInfo", ctrl, "ProvisioningInfo", testkit.V1Ents("machine-1", "machine-0-lxd-0")},
		{"DistributionGroup", ctrl, "DistributionGroup", testkit.V1Ents("machine-0", "machine-1")},
		{"Status", agent, "Status", testkit.V1Ents("machine-0-lxd-0", "not a tag")},
		{"MachinesWithTransientErrors", agent, "MachinesWithTransientErrors", nil},
		{"SetPasswords", ctrl, "SetPasswords", params.V1EntityPasswords{Changes: []params.V1EntityPassword{
			{Tag: mtag, Password: "xxxx"}, {Tag: mtag, Password: "a-long-enough-agent-password"}}}},
		{"SetProvisioned", ctrl, "SetProvisioned", params.V1SetProvisioned{Machines: []params.V1MachineSetProvisioned{
			{Tag: mtag, InstanceId: "i-p", Nonce: "n-p"}, {Tag: mtag, InstanceId: "i-q", Nonce: "n-q"}}}},
		{"SetInstanceInfo", ctrl, "SetInstanceInfo", params.V1InstancesInfo{Machines: []params.V1InstanceInfo{
			{Tag: mtag, InstanceId: "i-r", Nonce: "n-r"}, {Tag: "machine-1", InstanceId: "i-1", Nonce: "n-1",
				Networks: []params.V1Network{{Tag: "bogus"}}}}}},
		{"UpdateStatus", agent, "UpdateStatus", params.V1SetStatus{Entities: []params.V1EntityStatusArgs{
			{Tag: "machine-0-lxd-0", Data: map[string]any{"transient": false}}, {Tag: "machine-0", Data: map[string]any{"x": 1}}}}},
		{"SetSupportedContainers", agent, "SetSupportedContainers", params.V1MachineContainersParams{Params: []params.V1MachineContainers{
			{MachineTag: "machine-0", ContainerTypes: []string{"lxc", "kvm"}}, {MachineTag: "machine-0", ContainerTypes: []string{"docker"}}}}},
		{"WatchContainers", agent, "WatchContainers", params.V1WatchContainers{Params: []params.V1WatchContainer{
			{MachineTag: "machine-0", ContainerType: "lxd"}, {MachineTag: "machine-0", ContainerType: "kvm"}, {MachineTag: "machine-1"}}}},
		{"ContainerConfig", agent, "ContainerConfig", nil},
		{"ContainerManagerConfig", agent, "ContainerManagerConfig", params.V1ContainerManagerConfigParams{Type: "lxc"}},
		{"EnvironUUID", agent, "EnvironUUID", nil},
		{"APIHostPorts", agent, "APIHostPorts", nil},
		{"APIAddresses", agent, "APIAddresses", nil},
		{"StateAddresses", agent, "StateAddresses", nil},
		{"FindTools", agent, "FindTools", params.V1FindToolsParams{MajorVersion: 1, MinorVersion: -1, Series: "trusty"}},
		{"FindToolsNone", agent, "FindTools", params.V1FindToolsParams{Number: "2.0.0"}},
		{"WatchEnvironMachines", ctrl, "WatchEnvironMachines", nil},
		{"WatchForEnvironConfigChanges", agent, "WatchForEnvironConfigChanges", nil},
		{"WatchAPIHostPorts", agent, "WatchAPIHostPorts", nil},
		{"WatchMachineErrorRetry", ctrl, "WatchMachineErrorRetry", nil},
		{"CACert", agent, "CACert", nil},
		{"SetStatus", agent, "SetStatus", params.V1SetStatus{Entities: []params.V1EntityStatusArgs{
			{Tag: "machine-0", Status: "started", Info: "ok"}, {Tag: "machine-0", Status: "bogus"}, {Tag: "not a tag"}}}},
		{"Remove", ctrl, "Remove", testkit.V1Ents(mtag, "machine-0-lxd-0", "machine-42")},
		{"EnsureDead", ctrl, "EnsureDead", testkit.V1Ents("machine-1", "bad")},
		{"ReleaseContainerAddresses", agent, "ReleaseContainerAddresses", testkit.V1Ents("machine-0-lxd-0", "machine-0", "bad")},
		{"Status after SetStatus", agent, "Status", testkit.V1Ents("machine-0")},
	}
	caller := func(f *testkit.ProvFixture, asCtrl bool) *client.Conn {
		if asCtrl {
			return f.Ctrl
		}
		return f.Agent
	}
	both := func(t *testing.T, name string, asCtrl bool, method string, args any) {
		t.Helper()
		raw1 := testkit.RawCall(t, caller(v1.f, asCtrl), 1, method, args)
		golden(t, v1.f, name, method, args, raw1)
		raw0 := testkit.RawCall(t, caller(v0.f, asCtrl), 0, method, args)
		if got, want := normalised(t, v0.f, method, raw0), normalised(t, v1.f, method, raw1); !bytes.Equal(got, want) {
			t.Errorf("%s: version 0 answered\n%s\nversion 1 (on the twin fixture)\n%s", name, got, want)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { both(t, tt.name, tt.asCtrl, tt.method, tt.args) })
	}

	// Tools: agent-version 3.3.0 for machine 0 (base ubuntu@22.04, so
	// jammy): the catalog's 3.3.0-ubuntu-amd64 named by the series, first
	// match with hostname verification off.
	for _, tw := range []twin{v1, v0} {
		must(tw.f.St.UpdateModelConfig(t.Context(), tw.f.Model, map[string]any{"agent-version": "3.3.0"}, nil))
	}
	both(t, "Tools", agent, "Tools", testkit.V1Ents("machine-0", "machine-1"))
	for _, tw := range []twin{v1, v0} {
		must(tw.f.St.UpdateModelConfig(t.Context(), tw.f.Model, nil, []string{"agent-version"}))
	}
	for _, v := range []int{1, 0} {
		testkit.WantErr(t, v1.f.Agent.Call(testkit.Ctx(t), "Provisioner", v, "", "Tools", testkit.V1Ents("machine-0"), nil),
			"agent version not set in environment config", "")
	}
	both(t, "EnvironConfig", agent, "EnvironConfig", nil)
}

// normalised is a response after the golden files' normalisation, as
// indented JSON.
func normalised(t *testing.T, f *testkit.ProvFixture, method string, raw json.RawMessage) []byte {
	t.Helper()
	v, err := decodeOrdered(raw)
	if err != nil {
		t.Fatalf("%s: response %s: %v", method, raw, err)
	}
	b, err := json.MarshalIndent(newNormaliser(f, method).value(v, "Response"), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The normaliser compares fields whole: the daemon's own address is
// replaced where a field holds it, never where a state address merely
// shares its port (the golden files once broke when the listener's
// ephemeral port was 37017, the state port).
func TestV1NormaliserComparesFieldsWhole(t *testing.T) {
	n := &normaliser{addr: "127.0.0.1:37017", port: "37017", exact: map[string]string{"u-u-i-d": "MODEL-UUID"}}
	for _, tt := range []struct {
		method, in, want string
	}{
		{"APIAddresses", `{"Error":null,"Result":["127.0.0.1:37017"]}`, `{"Error":null,"Result":["127.0.0.1:PORT"]}`},
		{"StateAddresses", `{"Error":null,"Result":["127.0.0.1:37017"]}`, `{"Error":null,"Result":["127.0.0.1:37017"]}`},
		{"APIHostPorts", `{"Servers":[[{"Value":"127.0.0.1","Port":37017}]]}`, `{"Servers":[[{"Value":"127.0.0.1","Port":"PORT"}]]}`},
		{"EnvironConfig", `{"Config":{"state-port":37017,"api-port":37017,"uuid":"u-u-i-d"}}`, `{"Config":{"state-port":37017,"api-port":37017,"uuid":"MODEL-UUID"}}`},
		{"Tools", `{"url":"https://127.0.0.1:37017/environment/u-u-i-d/tools/x"}`, `{"url":"https://127.0.0.1:PORT/environment/MODEL-UUID/tools/x"}`},
		{"Status", `{"Since":"2026-01-02T03:04:05Z","Info":"u-u-i-d is here"}`, `{"Since":"TIME","Info":"u-u-i-d is here"}`},
	} {
		n.method = tt.method
		v, err := decodeOrdered([]byte(tt.in))
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(n.value(v, "Response"))
		if err != nil || string(got) != tt.want {
			t.Errorf("%s %s: got %s, %v; want %s", tt.method, tt.in, got, err, tt.want)
		}
	}
}

// Version 1 is reachable with the legacy capitalised (V0) framing.
func TestProvisionerV0Framing(t *testing.T) {
	f := testkit.NewProvFixture(t)
	creds := f.D.Credentials()
	ws, err := client.DialRaw(testkit.Ctx(t), client.Config{Addr: f.D.Addr(), ModelUUID: f.Model, CACert: []byte(creds.CACert)})
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
		testkit.M0Password + `","nonce":"` + testkit.M0Nonce + `"}}`)
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
