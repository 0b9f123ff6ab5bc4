package state

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The heads decode a part of the stored records: their fields must be
// named as the records' are, or a head reads zeros (an alive host that
// looks dead, a model of no type) without an error.
func TestHeadsDecodeTheirRecords(t *testing.T) {
	md := modelDoc{UUID: "u", Name: "n", Type: ModelTypeCAAS, Life: Dying, Config: map[string]any{"k": "v"}}
	raw, err := json.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	var mh modelHead
	if err := json.Unmarshal(raw, &mh); err != nil {
		t.Fatal(err)
	}
	if want := (modelHead{UUID: "u", Name: "n", Type: ModelTypeCAAS, Life: Dying}); mh != want {
		t.Errorf("model head %+v, want %+v", mh, want)
	}
	// Through the model cache (decodeRecord): the same head, first read,
	// cached and from the cache; and the head of a record whose config is
	// not a map, which the whole record cannot hold.
	for i := range 3 {
		var ch modelHead
		if err := decodeRecord("model/head-test", raw, &ch); err != nil || ch != mh {
			t.Errorf("read %d: decodeRecord head %+v, %v; want %+v", i, ch, err, mh)
		}
	}
	bad := []byte(`{"uuid":"u","name":"n","type":"caas","life":"dying","config":5}`)
	var bh modelHead
	if err := decodeRecord("model/head-test-bad", bad, &bh); err != nil || bh != mh {
		t.Errorf("head of a record with a bad config: %+v, %v", bh, err)
	}
	var bd modelDoc
	if err := decodeRecord("model/head-test-bad", bad, &bd); err == nil {
		t.Errorf("whole record with a bad config decoded: %+v", bd)
	}

	d := machineDoc{Machine: Machine{ID: "3", Life: Dying, SupportedContainers: []string{"lxd"}, SupportedContainersKnown: true}}
	raw, err = json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var h MachineHost
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatal(err)
	}
	if h.ID != "3" || h.Life != Dying || !h.SupportedContainersKnown || len(h.SupportedContainers) != 1 || h.SupportedContainers[0] != "lxd" {
		t.Errorf("machine head %+v of %s", h, raw)
	}
}

// decodeMachineHost reads a machine head as encoding/json does, or
// reports false and leaves it to encoding/json (decodeRecord); the head of
// a stored record costs one object per string it holds.
func TestDecodeMachineHost(t *testing.T) {
	d := machineDoc{Machine: Machine{Model: "m", ID: "3/lxd/1", Life: Dying, Jobs: []string{JobHostUnits},
		SupportedContainers: []string{"lxd", "kvm"}, SupportedContainersKnown: true,
		Status: Status{Status: "pending", Message: "caf\u00e9 \"quoted\""}}, PasswordHash: "h"}
	stored, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := json.Marshal(machineDoc{Machine: Machine{ID: "10", Life: Alive}})
	if err != nil {
		t.Fatal(err)
	}
	checkHead(t, "decodeMachineHost", decodeMachineHost, "machine/m/3", []headCase{
		{string(stored), true},
		{string(plain), true},
		{`{}`, true},
		{` { "id" : "1" , "life":"alive", "supported-containers" : [ ] } `, true},
		{`{"id":"1","supported-containers":["lxd"],"supported-containers-known":false,"x":{"id":"2"}}`, true},
		{`{"id":"1","id":"2"}`, true},
		{`{"id":"1","supported-containers":["lxd"],"supported-containers":["kvm"]}`, true},
		{`{"ID":"1"}`, false},
		{`{"Life":"dead"}`, false},
		{`{"id":"caf\u00e9"}`, false},
		{`{"id":"a\"b"}`, false},
		{`{"id":null}`, false},
		{`{"supported-containers":null}`, false},
		{`{"supported-containers":["lxd",null]}`, false},
		{`{"supported-containers-known":null}`, false},
		{`{"id":1}`, false},
		{`{"id":"1"} x`, false},
		{`[]`, false},
	})
	if n := testing.AllocsPerRun(100, func() {
		var h MachineHost
		if !decodeMachineHost(plain, &h) {
			t.Fatal("not read")
		}
	}); n != 2 {
		t.Errorf("decoding a head of two strings allocates %v times, want 2", n)
	}
}

// FuzzDecodeMachineHost: whatever valid JSON decodeMachineHost reads, it
// reads as encoding/json does.
func FuzzDecodeMachineHost(f *testing.F) {
	f.Add([]byte(`{"id":"1","life":"alive","supported-containers":["lxd"],"supported-containers-known":true}`))
	f.Add([]byte(`{"ID":"1","id":"2"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		var got, want MachineHost
		if !decodeMachineHost(raw, &got) {
			return
		}
		if err := json.Unmarshal(raw, &want); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decodeMachineHost %#v, encoding/json %#v, %v", raw, got, want, err)
		}
	})
}

// decodeMachineLogin reads what a login needs of a machine record as
// encoding/json does, or reports false and leaves it to encoding/json.
func TestDecodeMachineLogin(t *testing.T) {
	d := machineDoc{Machine: Machine{Model: "6f3c9b2e", ID: "3/lxd/1", Life: Dying, Jobs: []string{JobHostUnits, JobManageModel},
		Nonce: "machine-0:4f5e", InstanceID: "i-1", Hardware: &HardwareCharacteristics{},
		Status: Status{Status: "pending", Message: "caf\u00e9 \"quoted\""}}, PasswordHash: "kR8m+/Zq3xH1"}
	stored, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	unprovisioned, err := json.Marshal(machineDoc{Machine: Machine{Model: "m", ID: "10", Life: Alive, Jobs: []string{JobHostUnits}}})
	if err != nil {
		t.Fatal(err)
	}
	checkHead(t, "decodeMachineLogin", decodeMachineLogin, "machine/m/3", []headCase{
		{string(stored), true},
		{string(unprovisioned), true},
		{`{}`, true},
		{`{"jobs":[],"nonce":"n","x":{"nonce":"other"}}`, true},
		{`{"Nonce":"n"}`, false},
		{`{"PASSWORD-HASH":"h"}`, false},
		{`{"jobs":null}`, false},
		{`{"nonce":"a\u0041"}`, false},
		{`{"password-hash":1}`, false},
	})
	if n := testing.AllocsPerRun(100, func() {
		var l machineLogin
		if !decodeMachineLogin(stored, &l) {
			t.Fatal("not read")
		}
	}); n != 8 {
		t.Errorf("decoding a login allocates %v times, want 8 (four strings, two jobs, their list grown twice)", n)
	}
}

// FuzzDecodeMachineLogin: whatever valid JSON decodeMachineLogin reads, it
// reads as encoding/json does.
func FuzzDecodeMachineLogin(f *testing.F) {
	f.Add([]byte(`{"model":"m","id":"1","jobs":["JobHostUnits"],"nonce":"n","password-hash":"h","life":"alive"}`))
	f.Add([]byte(`{"Nonce":"1","nonce":"2"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		var got, want machineLogin
		if !decodeMachineLogin(raw, &got) {
			return
		}
		if err := json.Unmarshal(raw, &want); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decodeMachineLogin %#v, encoding/json %#v, %v", raw, got, want, err)
		}
	})
}

// decodeControllerIdentity reads the controller record's two ids as
// encoding/json does, skipping its config, or leaves the record to
// encoding/json.
func TestDecodeControllerIdentity(t *testing.T) {
	stored, err := json.Marshal(controllerDoc{UUID: "deadbeef-1d4a-4c8e-9f00-123456789abc", ModelUUID: "6f3c9b2e-1d4a-4c8e-9f00-123456789abc",
		Config: map[string]any{"api-port": 17070, "uuid": "not this one", "ca-cert": "-----BEGIN\n\"x\""}})
	if err != nil {
		t.Fatal(err)
	}
	checkHead(t, "decodeControllerIdentity", decodeControllerIdentity, "controller/controller", []headCase{
		{string(stored), true},
		{`{"config":{},"model-uuid":"m","uuid":"c"}`, true},
		{`{"UUID":"c"}`, false},
		{`{"model-uuid":null}`, false},
		{`{"uuid":"\u0063"}`, false},
	})
	if n := testing.AllocsPerRun(100, func() {
		var id ControllerIdentity
		if !decodeControllerIdentity(stored, &id) {
			t.Fatal("not read")
		}
	}); n != 2 {
		t.Errorf("decoding the controller's identity allocates %v times, want 2", n)
	}
}

// headCase is one record a head decoder is given, and whether it reads
// it itself (fast) or leaves it to encoding/json.
type headCase struct {
	raw  string
	fast bool
}

// checkHead checks decode against encoding/json on each case: it reads a
// record itself only when it says so, then as encoding/json does, and
// decodeRecord (key names the record) gives encoding/json's value either
// way.
func checkHead[T any](t *testing.T, name string, decode func([]byte, *T) bool, key string, cases []headCase) {
	t.Helper()
	for _, c := range cases {
		var want T
		wantErr := json.Unmarshal([]byte(c.raw), &want)
		var got T
		fast := decode([]byte(c.raw), &got)
		if fast != c.fast {
			t.Errorf("%s: read by %s %v, want %v", c.raw, name, fast, c.fast)
		}
		if fast && (wantErr != nil || !reflect.DeepEqual(got, want)) {
			t.Errorf("%s: %s %#v, encoding/json %#v, %v", c.raw, name, got, want, wantErr)
		}
		var rec T
		recErr := decodeRecord(key, []byte(c.raw), &rec)
		if (recErr != nil) != (wantErr != nil) || wantErr == nil && !reflect.DeepEqual(rec, want) {
			t.Errorf("%s: decodeRecord %#v, %v; encoding/json %#v, %v", c.raw, rec, recErr, want, wantErr)
		}
	}
}
