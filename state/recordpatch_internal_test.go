package state

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// patchedMachine applies a status write to the record raw the way
// setMachineStatus does, by patching, and the way setMachineStatusWhole
// does, by decoding and encoding; it returns both records decoded.
func patchedMachine(t *testing.T, raw []byte, kind StatusKind, s Status, agent *Status) (patched, whole machineDoc) {
	t.Helper()
	set, err := machineStatusMembers(kind, s, agent)
	if err != nil {
		t.Fatal(err)
	}
	out, ok := patchRecord(raw, set)
	if !ok {
		t.Fatalf("patchRecord refused the record %s", raw)
	}
	if err := json.Unmarshal(out, &patched); err != nil {
		t.Fatalf("patched record %s: %v", out, err)
	}
	var d machineDoc
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	d.setStatus(kind, s, agent)
	b, err := json.Marshal(&d)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &whole); err != nil {
		t.Fatal(err)
	}
	return patched, whole
}

// A patched machine record decodes to what decoding, setting the status
// and encoding gives, for records with and without each status, and for
// every kind of status write.
func TestPatchRecordMatchesRoundTrip(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 19, 30, 0, 123456789, time.UTC)
	arch, mem := "amd64", uint64(2048)
	docs := map[string]machineDoc{
		"new": {Machine: Machine{Model: "m", ID: "0", Life: Alive, Jobs: []string{JobHostUnits}}},
		"provisioned": {Machine: Machine{Model: "m", ID: "7", Life: Alive, Jobs: []string{JobHostUnits}, Nonce: "n", InstanceID: "i-7",
			Hardware: &HardwareCharacteristics{Arch: &arch, Mem: &mem},
			Status:   Status{Status: "started", Since: now, Data: map[string]any{}},
			InstanceStatus: Status{Status: "running", Message: `quotes " and \ and {braces} [x]`, Since: now,
				Data: map[string]any{"n": 1.5, "nested": map[string]any{"status": "x", "a": []any{"}", nil, true}}}},
			SupportedContainers: []string{"lxd"}, SupportedContainersKnown: true},
			PasswordHash: "$argon2id$v=19$x"},
		"container": {Machine: Machine{Model: "m", ID: "1/lxd/0", Life: Dying, Jobs: []string{}, ModificationStatus: Status{Status: "applied", Since: now, Data: map[string]any{}}}},
	}
	statuses := []struct {
		kind StatusKind
		s    Status
	}{
		{AgentStatus, Status{Status: "started", Since: now, Data: map[string]any{}}},
		{AgentStatus, Status{Status: "error", Message: "unicode ☃ \u2028", Since: now, Data: map[string]any{"k": "v"}}},
		{InstanceStatus, Status{Status: "running", Message: "bench 1", Since: now, Data: map[string]any{}}},
		{ModificationStatus, Status{Status: "idle", Since: now, Data: map[string]any{}}},
	}
	for name, d := range docs {
		raw, err := json.Marshal(&d)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range statuses {
			patched, whole := patchedMachine(t, raw, st.kind, st.s, nil)
			if !reflect.DeepEqual(patched, whole) {
				t.Errorf("%s, %s %q: patched\n%+v\nwhole\n%+v", name, st.kind, st.s.Status, patched, whole)
			}
		}
		// An instance error sets the agent status too.
		is := Status{Status: "provisioning error", Since: now, Data: map[string]any{}}
		as := is
		as.Status, as.Message = "error", "provisioning error"
		patched, whole := patchedMachine(t, raw, InstanceStatus, is, &as)
		if !reflect.DeepEqual(patched, whole) {
			t.Errorf("%s, instance error: patched\n%+v\nwhole\n%+v", name, patched, whole)
		}
	}
}

// patchRecord leaves to the whole round trip what it cannot patch as
// encoding/json would read it.
func TestPatchRecordRefuses(t *testing.T) {
	t.Parallel()
	set := []patchMember{{key: "status", val: []byte(`{"status":"x"}`)}}
	for _, raw := range []string{
		``, `null`, `[]`, `"status"`, `{`, `{"status":1,}`, `{"status":1} x`,
		`{"Status":{}}`,             // encoding/json would decode it into Status
		`{"sta\u0074us":{}}`,        // an escaped key
		`{"status":{},"status":{}}`, // twice: encoding/json keeps the last
	} {
		if out, ok := patchRecord([]byte(raw), set); ok {
			t.Errorf("patchRecord(%s) = %s, want refused", raw, out)
		}
	}
	for raw, want := range map[string]string{
		`{}`:                      `{"status":{"status":"x"}}`,
		` { } `:                   ` { "status":{"status":"x"}} `,
		`{"a":1}`:                 `{"a":1,"status":{"status":"x"}}`,
		`{"status":null,"b":"}"}`: `{"status":{"status":"x"},"b":"}"}`,
		`{"a":[1,{"status":2}],"status" : {"q":"\""} }`: `{"a":[1,{"status":2}],"status" : {"status":"x"} }`,
	} {
		out, ok := patchRecord([]byte(raw), set)
		if !ok || string(out) != want {
			t.Errorf("patchRecord(%s) = %s, %v; want %s", raw, out, ok, want)
		}
	}
}

// Whatever the record, a patch that is made decodes to the record decoded
// with the members set.
func FuzzPatchRecord(f *testing.F) {
	for _, s := range []string{`{}`, `{"status":{"a":[1,2,"]"]},"id":"0"}`, `{"x":{"status":1},"status":"s"}`, `{"a":"\\\"","b":-1.5e3}`} {
		f.Add([]byte(s), "status", "new")
	}
	f.Fuzz(func(t *testing.T, raw []byte, key, val string) {
		if strings.ContainsAny(key, `"\`) || !utf8.ValidString(key) || !json.Valid([]byte(`"`+key+`"`)) {
			t.Skip()
		}
		v, _ := json.Marshal(val)
		out, ok := patchRecord(raw, []patchMember{{key: key, val: v}})
		if !ok {
			return
		}
		var before, after map[string]any
		if err := json.Unmarshal(raw, &before); err != nil {
			t.Fatalf("patched a record encoding/json refuses: %s: %v", raw, err)
		}
		if before == nil {
			t.Fatalf("patched %s, not an object", raw)
		}
		var want any
		if err := json.Unmarshal(v, &want); err != nil {
			t.Fatal(err)
		}
		before[key] = want
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("patch of %s gave %s: %v", raw, out, err)
		}
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("patch of %s with %s=%s gave %s", raw, key, v, out)
		}
	})
}

// appendStatusJSON writes what json.Marshal writes.
func TestAppendStatusJSON(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 19, 30, 0, 123456789, time.UTC)
	for _, s := range []Status{
		{},
		{Status: "running"},
		{Status: "error", Message: "<b>&\"\\\n\t\r\x00\x1f\x7f ☃ \u2028\u2029 \xff\xfe end", Data: map[string]any{}, Since: now},
		{Message: "m", Data: map[string]any{"a": 1.0, "b": []any{"x", nil}, "<": "&"}, Since: now.In(time.FixedZone("x", 3600))},
	} {
		want, err := json.Marshal(&s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendStatusJSON(nil, &s)
		if err != nil || string(got) != string(want) {
			t.Errorf("appendStatusJSON(%+v) = %s, %v; json.Marshal %s", s, got, err, want)
		}
	}
}

func FuzzAppendStatusJSON(f *testing.F) {
	f.Add("running", "bench 1", int64(1796150000), "k", "v")
	f.Add("", "\xff<\u2028", int64(0), "", "")
	f.Fuzz(func(t *testing.T, status, message string, unix int64, k, v string) {
		s := Status{Status: status, Message: message}
		if unix != 0 {
			s.Since = time.Unix(unix%(1<<34), unix%1e9).UTC()
		}
		if k != "" {
			s.Data = map[string]any{k: v}
		}
		want, werr := json.Marshal(&s)
		got, gerr := appendStatusJSON(nil, &s)
		if (werr == nil) != (gerr == nil) || string(got) != string(want) {
			t.Fatalf("appendStatusJSON(%+v) = %s, %v; json.Marshal %s, %v", s, got, gerr, want, werr)
		}
	})
}
