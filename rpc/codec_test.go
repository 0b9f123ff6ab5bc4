package rpc

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"provisiond/rpc/params"
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

// FuzzDecodeHeader: no input makes the codec panic, and every accepted
// header encodes a reply that is valid JSON with the same request id.
func FuzzDecodeHeader(f *testing.F) {
	for _, s := range []string{
		`{"request-id":1,"type":"Admin","version":3,"request":"Login","params":{"auth-tag":"user-admin"}}`,
		`{"RequestId":2,"Type":"Pinger","Version":1,"Request":"Ping"}`,
		`{"request-id":3,"type":"StringsWatcher","version":1,"Id":"1","request":"Next"}`,
		`{"request-id":18446744073709551615}`,
		`[]`, `null`, `{`, `"x"`, `{"params":[1,{"a":null}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := decodeHeader(data)
		if err != nil {
			return
		}
		out, err := encodeReply(&h, nil, &params.Error{Message: "x", Code: "y"})
		if err != nil {
			t.Fatalf("encodeReply: %v", err)
		}
		var back map[string]any
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("reply is not JSON: %v: %q", err, out)
		}
	})
}
