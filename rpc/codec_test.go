package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/rpc/params"
)

func TestDecodeHeader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want header
		bad  bool
	}{
		{
			name: "v1",
			in:   `{"request-id":7,"type":"Provisioner","version":11,"id":"","request":"Life","params":{"entities":[]}}`,
			want: header{RequestID: 7, Type: "Provisioner", Version: 11, Request: "Life", Params: json.RawMessage(`{"entities":[]}`)},
		},
		{
			name: "v1 with capitalised Id as python-libjuju sends",
			in:   `{"request-id":5,"type":"StringsWatcher","version":1,"Id":"3","request":"Next","params":{}}`,
			want: header{RequestID: 5, Type: "StringsWatcher", Version: 1, ID: "3", Request: "Next", Params: json.RawMessage(`{}`)},
		},
		{
			name: "v1 pretty printed, missing params",
			in:   "{\n  \"request-id\": 1,\n  \"type\": \"Pinger\",\n  \"version\": 1,\n  \"request\": \"Ping\"\n}",
			want: header{RequestID: 1, Type: "Pinger", Version: 1, Request: "Ping"},
		},
		{
			name: "v0 capitalised",
			in:   `{"RequestId":3,"Type":"Provisioner","Version":1,"Id":"","Request":"Life","Params":null}`,
			want: header{RequestID: 3, Type: "Provisioner", Version: 1, Request: "Life", Params: json.RawMessage(`null`), v0: true},
		},
		{
			name: "explicit request-id 0 is v0",
			in:   `{"request-id":0,"type":"Pinger","version":1,"request":"Ping"}`,
			want: header{Type: "Pinger", Version: 1, Request: "Ping", v0: true},
		},
		{
			name: "trailing data after the first value is ignored",
			in:   `{"request-id":2,"type":"Pinger","version":1,"request":"Ping"} garbage`,
			want: header{RequestID: 2, Type: "Pinger", Version: 1, Request: "Ping"},
		},
		{name: "invalid json", in: `{"request-id":`, bad: true},
		{name: "not an object", in: `[1,2]`, bad: true},
		{name: "null", in: `null`, bad: true},
		{name: "empty", in: ``, bad: true},
		{name: "version as string", in: `{"request-id":1,"type":"Pinger","version":"3","request":"Ping"}`, bad: true},
		{name: "negative request id", in: `{"request-id":-1,"type":"Pinger","version":1,"request":"Ping"}`, bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeHeader([]byte(tt.in))
			if tt.bad {
				if !errors.Is(err, errBadMessage) {
					t.Fatalf("decodeHeader(%q) = %+v, %v; want errBadMessage", tt.in, got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("decodeHeader: %v", err)
			}
			if got.RequestID != tt.want.RequestID || got.Type != tt.want.Type || got.Version != tt.want.Version ||
				got.ID != tt.want.ID || got.Request != tt.want.Request || got.v0 != tt.want.v0 ||
				string(got.Params) != string(tt.want.Params) {
				t.Fatalf("decodeHeader(%q)\n got %+v\nwant %+v", tt.in, got, tt.want)
			}
		})
	}
}

// The forms clients send take decodeHeaderFast; the rest fall back to
// encoding/json (FuzzDecodeHeader checks that both agree).
func TestDecodeHeaderFastTakesClientForms(t *testing.T) {
	for _, tt := range []struct {
		in   string
		fast bool
	}{
		{`{"request-id":7,"type":"Provisioner","version":11,"id":"","request":"Life","params":{"entities":[{"tag":"machine-0"}]}}`, true},
		{`{"type": "Pinger", "request": "Ping", "version": 1, "params": {}, "request-id": 2}`, true}, // python-libjuju
		{"{\n \"request-id\": 1,\n \"type\": \"Pinger\",\n \"version\": 1,\n \"request\": \"Ping\"\n}", true},
		{`{"request-id":1,"type":"X","version":0,"request":"Y","params":"a \"quoted}\" string"}`, true},
		{`{"request-id":1,"type":"X","version":1,"request":"Y","params":[1,{"a":["}"]},null]} trailing`, true},
		{`{"request-id":1,"type":"X","version":1,"request":"Y","params":null}`, true},
		{`{"request-id":5,"type":"StringsWatcher","version":1,"Id":"3","request":"Next"}`, false}, // "Id"
		{`{"RequestId":3,"Type":"Provisioner","Version":1,"Request":"Life"}`, false},              // V0
		{`{"request-id":0,"type":"Pinger","version":1,"request":"Ping"}`, false},
		{`{"request-id":1,"type":"Pinger","version":1,"request":"Ping","extra":1}`, false},
		{`{"request-id":1,"type":"Pinger","type":"Admin","version":1,"request":"Ping"}`, false},
		{`{"request-id":1,"type":"Ping\u0065r","version":1,"request":"Ping"}`, false},
		{`{"request-id":1.0,"type":"Pinger","version":1,"request":"Ping"}`, false},
		{`{"request-id":01,"type":"Pinger","version":1,"request":"Ping"}`, false},
		{`{"request-id":1,"type":"Pinger","version":-1,"request":"Ping"}`, false},
		{`{"request-id":1,"type":"Pinger","version":1,"request":"Ping","params":{"a":}}`, false},
		{`{"request-id":1,"type":"Pinger","version":1,"request":"Ping"`, false},
	} {
		h, ok := decodeHeaderFast([]byte(tt.in))
		if ok != tt.fast {
			t.Errorf("decodeHeaderFast(%s) ok = %v, want %v", tt.in, ok, tt.fast)
			continue
		}
		if ok {
			checkSameHeader(t, []byte(tt.in), h)
		}
	}
}

// TestDecodeHeaderFastAgreesWithJSON builds many messages near the form
// decodeHeaderFast takes (keys, spellings, values, whitespace, duplicates
// and truncation drawn at random) and checks that whatever it accepts,
// encoding/json decodes to the same header; the fuzz target does the same
// from arbitrary bytes.
func TestDecodeHeaderFastAgreesWithJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	// good picks from the first n entries (the forms the fast path takes)
	// most of the time, else from all.
	good := func(n int, xs ...string) string {
		if rng.IntN(10) < 8 {
			return xs[rng.IntN(n)]
		}
		return pick(xs...)
	}
	space := func() string { return pick("", "", "", " ", "\n  ", "\t", "\r\n", "\u00a0") }
	// Each list starts with the forms the fast path takes.
	keys := []string{"request-id", "type", "version", "id", "request", "params",
		"Request-Id", "Type", "ID", "Id", "RequestId", "requestid", "x", "typ\u0065", "ſype"}
	numbers := []string{"1", "7", "42", "0", "9999999999999999999", "2147483647",
		"01", "-1", "1.0", "1e3", "18446744073709551615", "18446744073709551616", "2147483648",
		"9223372036854775808", "1x", `"3"`, "null", "true"}
	strs := []string{`""`, `"Provisioner"`, `"a b"`, "\"\x7f\"",
		`"x\"y"`, `"\u0041"`, `"é"`, "\"\x01\"", `null`, `1`, `"unterminated`}
	values := []string{`{}`, `[]`, `null`, `true`, `1`, `-0.5e3`, `"s"`, `{"entities":[{"tag":"machine-0"}]}`,
		`{"a":"}"}`, `{"a":"\"}"}`, `[1,[2,{"b":[]}]]`, `{"a":"x\\"}`,
		`fals`, `{"a":}`, `{"a" 1}`, `[1,]`, `"\x"`, `]`, `}`}
	accepted := 0
	for range 200000 {
		var b strings.Builder
		b.WriteString(space() + "{" + space())
		for k, key := range rng.Perm(6)[:rng.IntN(7)] {
			if k > 0 {
				b.WriteString(space() + good(1, ",", ",,", ";") + space())
			}
			name := keys[key]
			if rng.IntN(10) == 0 {
				name = pick(keys...)
			}
			b.WriteString(`"` + name + `"` + space() + ":" + space())
			switch keys[key] {
			case "request-id", "version":
				b.WriteString(good(6, numbers...))
			case "params":
				b.WriteString(good(12, values...))
			default:
				b.WriteString(good(4, strs...))
			}
		}
		b.WriteString(space() + good(2, "}", "} junk", "", "]") + space())
		data := []byte(b.String())
		if rng.IntN(10) == 0 {
			data = data[:rng.IntN(len(data)+1)]
		}
		if h, ok := decodeHeaderFast(bytes.TrimSpace(data)); ok {
			accepted++
			checkSameHeader(t, data, h)
		}
	}
	t.Logf("%d of 200,000 took the fast path", accepted)
	if accepted < 1000 {
		t.Errorf("only %d messages took the fast path: the generator no longer exercises it", accepted)
	}
}

// checkSameHeader fails unless decodeHeaderJSON decodes data to h.
func checkSameHeader(t *testing.T, data []byte, h header) {
	t.Helper()
	want, err := decodeHeaderJSON(data)
	if err != nil {
		t.Fatalf("decodeHeaderFast accepted %q, which encoding/json refuses: %v", data, err)
	}
	if h.RequestID != want.RequestID || h.Type != want.Type || h.Version != want.Version ||
		h.ID != want.ID || h.Request != want.Request || h.v0 != want.v0 || !bytes.Equal(h.Params, want.Params) ||
		(h.Params == nil) != (want.Params == nil) {
		t.Fatalf("decodeHeaderFast(%q)\n got %+v\nwant %+v", data, h, want)
	}
}

func TestNonRequestIsDropped(t *testing.T) {
	h, err := decodeHeader([]byte(`{"request-id":9,"response":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	if h.isRequest() {
		t.Fatal("a message with neither type nor request must not be a request")
	}
}

func TestEncodeReply(t *testing.T) {
	v1 := &header{RequestID: 4}
	v0 := &header{RequestID: 4, v0: true}
	tests := []struct {
		name string
		h    *header
		body string
		err  error
		want string
	}{
		{"success", v1, `{"results":[]}`, nil, `{"request-id":4,"response":{"results":[]}}`},
		{"no result", v1, ``, nil, `{"request-id":4,"response":{}}`},
		{"error with code", v1, ``, &params.Error{Message: "permission denied", Code: "unauthorized access"},
			`{"request-id":4,"error":"permission denied","error-code":"unauthorized access","response":{}}`},
		{"error without code", v1, ``, errors.New("json: cannot unmarshal"),
			`{"request-id":4,"error":"json: cannot unmarshal","response":{}}`},
		{"error info", v1, ``, &params.Error{Message: "m", Code: "c", Info: map[string]any{"k": "v"}},
			`{"request-id":4,"error":"m","error-code":"c","error-info":{"k":"v"},"response":{}}`},
		{"v0 success", v0, `{"x":1}`, nil, `{"RequestId":4,"Response":{"x":1}}`},
		{"v0 error", v0, ``, &params.Error{Message: "m", Code: "c"}, `{"RequestId":4,"Error":"m","ErrorCode":"c","Response":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := encodeReply(tt.h, json.RawMessage(tt.body), tt.err)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(string(got), "\n") {
				t.Errorf("reply %q does not end in a newline", got)
			}
			if s := strings.TrimSuffix(string(got), "\n"); s != tt.want {
				t.Errorf("got  %s\nwant %s", s, tt.want)
			}
		})
	}
}

// A success reply is framed by hand; it must be byte for byte what
// json.Marshal frames, for any body json.Marshal makes.
func TestEncodeReplySuccessMatchesMarshal(t *testing.T) {
	for _, v := range []any{
		map[string]any{"results": []any{map[string]any{"life": "alive"}}},
		map[string]any{"s": "<tag> & \u2028 \u2029 é \x00 \"q\" \\"},
		[]int{1, 2}, "str", 3.5, nil, true, map[string]any{},
		struct {
			A json.RawMessage `json:"a"`
		}{json.RawMessage(` { "x" : [ 1 , "<" ] } `)},
	} {
		body, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []uint64{1, 42, 1<<64 - 1} {
			h := &header{RequestID: id}
			got, err := encodeReply(h, body, nil)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(replyV1{RequestID: id, Response: body})
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want)+"\n" {
				t.Errorf("encodeReply(%d, %s)\n got %q\nwant %q", id, body, got, string(want)+"\n")
			}
		}
	}
}

// FuzzDecodeHeader: no input makes the codec panic, every accepted header
// encodes a reply that is valid JSON with the same request id, and what
// decodeHeaderFast accepts encoding/json decodes to the same header.
func FuzzDecodeHeader(f *testing.F) {
	for _, s := range []string{
		`{"request-id":1,"type":"Admin","version":3,"request":"Login","params":{"auth-tag":"user-admin"}}`,
		`{"RequestId":2,"Type":"Pinger","Version":1,"Request":"Ping"}`,
		`{"request-id":3,"type":"StringsWatcher","version":1,"Id":"1","request":"Next"}`,
		`{"request-id":18446744073709551615}`,
		`[]`, `null`, `{`, `"x"`, `{"params":[1,{"a":null}]}`,
		`{"request-id":7,"type":"Provisioner","version":11,"id":"","request":"Life","params":{"entities":[{"tag":"machine-0"}]}}`,
		`{"type": "Pinger", "request": "Ping", "version": 1, "params": {}, "request-id": 2}`,
		`{"request-id":1,"type":"X","version":1,"request":"Y","params":[1,{"a":["}\"]"]},null,"\u00e9"]} x`,
		` {"request-id":9,"params":tru}`, `{"request-id":9,"params":"x}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if h, ok := decodeHeaderFast(bytes.TrimSpace(data)); ok {
			checkSameHeader(t, data, h)
		}
		h, err := decodeHeader(data)
		if err != nil {
			return
		}
		// The oracle: the request id as encoding/json reads the message,
		// V1's "request-id" first, then V0's RequestId when that is 0
		// (specs/rpc.md §1.2), keys matched without regard to case.
		var v1 struct {
			RequestID uint64 `json:"request-id"`
		}
		var v0 struct{ RequestId uint64 }
		_ = json.NewDecoder(bytes.NewReader(bytes.TrimSpace(data))).Decode(&v1)
		want, wantV0 := v1.RequestID, false
		if want == 0 {
			_ = json.NewDecoder(bytes.NewReader(bytes.TrimSpace(data))).Decode(&v0)
			want, wantV0 = v0.RequestId, true
		}
		if h.RequestID != want || h.v0 != wantV0 {
			t.Fatalf("decodeHeader(%q): request id %d (V0 %v); encoding/json reads %d (V0 %v)", data, h.RequestID, h.v0, want, wantV0)
		}
		// Both replies, error and success, carry the same request id back,
		// in the request's own framing.
		for _, tc := range []struct {
			body json.RawMessage
			err  error
		}{{nil, &params.Error{Message: "x", Code: "y"}}, {json.RawMessage(`{"a":[1,"b"]}`), nil}} {
			out, err := encodeReply(&h, tc.body, tc.err)
			if err != nil {
				t.Fatalf("encodeReply: %v", err)
			}
			var back struct {
				RequestID *uint64 `json:"request-id"`
				RequestId *uint64
				Response  json.RawMessage
			}
			if err := json.Unmarshal(out, &back); err != nil {
				t.Fatalf("reply is not JSON: %v: %q", err, out)
			}
			id := back.RequestID
			if h.v0 {
				id = back.RequestId
			}
			if id == nil || *id != h.RequestID {
				t.Fatalf("reply %q to request id %d (V0 %v) does not carry it back", out, h.RequestID, h.v0)
			}
			if len(back.Response) == 0 && !h.v0 {
				t.Fatalf("V1 reply %q has no response", out)
			}
		}
	})
}

// BenchmarkDecodeHeader decodes an agent's Provisioner.Life request: the
// fast path (what the daemon runs) and encoding/json (what it replaced),
// and the fast path once the facade and method are registered (their
// names interned: what the daemon runs for every known method).
func BenchmarkDecodeHeader(b *testing.B) {
	msg := []byte(`{"request-id":1234,"type":"Provisioner","version":11,"id":"","request":"Life","params":{"entities":[{"tag":"machine-42"}]}}`)
	for _, bc := range []struct {
		name   string
		decode func([]byte) (header, error)
	}{{"fast", decodeHeader}, {"json", decodeHeaderJSON}, {"fast-registered", decodeHeader}} {
		b.Run(bc.name, func(b *testing.B) {
			if bc.name == "fast-registered" {
				internNames([]string{"Provisioner", "Life"})
			}
			b.ReportAllocs()
			for b.Loop() {
				if h, err := bc.decode(msg); err != nil || h.RequestID != 1234 {
					b.Fatal(h, err)
				}
			}
		})
	}
}
