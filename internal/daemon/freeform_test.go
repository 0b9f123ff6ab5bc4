package daemon_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// jsonDepth is how deeply the JSON text b nests objects and arrays.
func jsonDepth(b []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// A machine agent cannot make its model's status unreadable. The attack:
// SetStatus on itself with data nested 9,995 deep (a 60 KB message, under
// encoding/json's decoding limit of 10,000), after which every status
// reply failed in clients (encoding/json when the reply wraps it deeper;
// Python's decoder from about 1,000 levels). Now such data is refused
// when it arrives (code not valid) and nothing is written; data at the
// bound is stored; data too large in all is refused per item; and every
// status reply stays decodable and far from Python's limit, even for data
// a build without the bounds stored (which replies replace by a note).
func TestStatusStaysReadable(t *testing.T) {
	f := newProvFixture(t)
	ctx := ctxT(t)
	deep := func(n int) string { return strings.Repeat(`{"a":`, n) + `"x"` + strings.Repeat("}", n) }
	setStatus := func(data string) (json.RawMessage, error) {
		var raw json.RawMessage
		err := f.Agent.Call(ctx, "Provisioner", 11, "", "SetStatus",
			json.RawMessage(`{"entities":[{"tag":"machine-0","status":"started","info":"i","data":{"k":`+data+`}}]}`), &raw)
		return raw, err
	}

	rev := f.St.Revision()
	msg := deep(9995)
	if n := len(msg); n < 50_000 {
		t.Fatalf("the attack's data is %d bytes", n)
	}
	_, err := setStatus(msg)
	if !isCode(err, params.CodeNotValid) || !strings.Contains(err.Error(), `entities[0].data["k"]: nested deeper than 64`) {
		t.Fatalf("SetStatus with data nested 9,995 deep: %v; want refused, not valid", err)
	}
	if got := f.St.Revision(); got != rev {
		t.Fatalf("refused status moved the revision %d -> %d", rev, got)
	}
	// At the bound: stored as sent.
	if raw, err := setStatus(deep(rpc.MaxValueDepth)); err != nil || strings.Contains(string(raw), "error") {
		t.Fatalf("SetStatus at the bound: %s, %v", raw, err)
	}
	// Small values that add up to too much: that item is refused.
	big := map[string]any{}
	for i := range 40 {
		big[strings.Repeat("k", i+1)] = strings.Repeat("v", 500)
	}
	res, err := client.NewProvisioner(f.Agent).SetStatus(ctx, params.SetStatus{Entities: []params.EntityStatusArgs{
		{Tag: "machine-0", Status: "started", Data: big}}})
	if err != nil || len(res.Results) != 1 || res.Results[0].Error == nil || res.Results[0].Error.Code != params.CodeNotValid ||
		!strings.Contains(res.Results[0].Error.Message, "(limit 16384)") {
		t.Fatalf("SetStatus of %d bytes of data: %+v, %v; want the item refused, not valid", len(mustJSON(big)), res, err)
	}

	// A status stored by a build without the bounds (written past the
	// wire here, as such a build did): replies show a note instead.
	var old any = "x"
	for range 2000 {
		old = map[string]any{"a": old}
	}
	if err := f.St.SetMachineStatus(t.Context(), f.Model, "1", state.AgentStatus, state.Status{Status: "error", Message: "old", Data: map[string]any{"k": old}}); err != nil {
		t.Fatal(err)
	}

	// Every reply that carries status data decodes, and nests far less
	// than Python's json decoder allows (about 1,000).
	var status json.RawMessage
	if err := f.Admin.Call(ctx, "ModelAdmin", 1, "", "Status", params.ModelArgs{}, &status); err != nil {
		t.Fatalf("ModelAdmin.Status: %v", err)
	}
	provStatus := rawCall(t, f.Ctrl, 11, "Status", ents("machine-0", "machine-1"))
	for name, raw := range map[string]json.RawMessage{"ModelAdmin.Status": status, "Provisioner.Status": provStatus} {
		if d := jsonDepth(raw); d > rpc.MaxValueDepth+20 {
			t.Errorf("%s nests %d deep", name, d)
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Errorf("%s does not decode: %v", name, err)
		}
	}
	var ms params.ModelStatus
	if err := json.Unmarshal(status, &ms); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms.Machines {
		switch m.ID {
		case "0":
			if jsonDepth(mustJSON(m.AgentStatus.Data)) != rpc.MaxValueDepth+1 {
				t.Errorf("machine 0's data at the bound: %.200s", mustJSON(m.AgentStatus.Data))
			}
		case "1":
			// Machine 1's agent is not connected, so its status reads
			// down (Juju's rule) with its recorded data kept.
			if e, _ := m.AgentStatus.Data["error"].(string); !strings.Contains(e, "not shown") {
				t.Errorf("machine 1's old deep data: %+v", m.AgentStatus)
			}
		}
	}
	if !strings.Contains(string(provStatus), "not shown") {
		t.Errorf("Provisioner.Status of the old deep data: %.300s", provStatus)
	}
}
