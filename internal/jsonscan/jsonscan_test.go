package jsonscan

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// membersOf reads data with Members, stopping at nothing.
func membersOf(data []byte) (names []string, values [][]byte, ok bool) {
	ok = Members(data, func(name []byte, v0, v1 int) bool {
		names = append(names, string(name))
		values = append(values, data[v0:v1])
		return true
	})
	return names, values, ok
}

func TestMembers(t *testing.T) {
	for _, tc := range []struct {
		in    string
		names []string
		ok    bool
	}{
		{`{}`, nil, true},
		{` { } `, nil, true},
		{`{"a":1,"b":"x}","c":{"d":[1,"]"]},"e":null}`, []string{"a", "b", "c", "e"}, true},
		{`{"a" : true , "b":[ ]}`, []string{"a", "b"}, true},
		{`{"a":1,"a":2}`, []string{"a", "a"}, true}, // a name twice is read twice
		{`{"a\"b":1}`, nil, false},                  // an escaped name is not plain
		{`[1]`, nil, false},
		{`{"a":1`, []string{"a"}, false},
		{`{"a":1}x`, []string{"a"}, false},
		{`{"a":}`, nil, false},
		{`{"a":"unterminated}`, nil, false},
		{``, nil, false},
	} {
		names, _, ok := membersOf([]byte(tc.in))
		if ok != tc.ok || (tc.ok && !equal(names, tc.names)) {
			t.Errorf("Members(%s) = %q, %v; want %q, %v", tc.in, names, ok, tc.names, tc.ok)
		}
	}
}

func TestValueEnd(t *testing.T) {
	for _, tc := range []struct {
		in  string
		end int
		ok  bool
	}{
		{`"a\"b" ,`, 6, true},
		{`{"x":"}"}]`, 9, true},
		{`[[],{}] `, 7, true},
		{`123,`, 3, true},
		{`123`, 3, true}, // a scalar may end the data
		{`true}`, 4, true},
		{`{"x":1`, 0, false},
		{`"abc`, 0, false},
		{``, 0, false},
		{`,`, 0, false},
	} {
		end, ok := ValueEnd([]byte(tc.in), 0)
		if end != tc.end || ok != tc.ok {
			t.Errorf("ValueEnd(%s) = %d, %v; want %d, %v", tc.in, end, ok, tc.end, tc.ok)
		}
	}
}

// FuzzMembers: Members never reads outside its input, and on a valid JSON
// object whose names are plain it reads exactly the members
// encoding/json does (in valid UTF-8), each value's bytes being that
// member's value.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":{"c":"}"}}`, `{"a":[1,2,{"x":null}],"b":"\"q\""}`, `{"a":1,"a":2}`, `{"a`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		names, values, ok := membersOf(data)
		if !ok || !json.Valid(data) || !utf8.Valid(data) { // encoding/json replaces bad UTF-8
			return
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			t.Fatalf("Members read %q as an object; encoding/json: %v %v", data, tok, err)
		}
		for i := 0; dec.More(); i++ {
			tok, err := dec.Token()
			if err != nil || i >= len(names) || tok != names[i] {
				t.Fatalf("member %d of %q: encoding/json %q (%v), Members %q", i, data, tok, err, names)
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil || !bytes.Equal(raw, values[i]) {
				t.Fatalf("value %d of %q: encoding/json %q (%v), Members %q", i, data, raw, err, values[i])
			}
		}
	})
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
