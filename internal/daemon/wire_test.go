package daemon_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc/client"
)

func rawDial(t *testing.T, d *daemon.Daemon, model string) *websocket.Conn {
	t.Helper()
	ws, err := client.DialRaw(ctxT(t), client.Config{Addr: d.Addr(), ModelUUID: model, CACert: []byte(d.Credentials().CACert)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

func wsCall(t *testing.T, ws *websocket.Conn, msg string) map[string]any {
	t.Helper()
	if err := ws.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, data, err := ws.ReadMessage()
	if err != nil {
		t.Fatalf("read reply to %s: %v", msg, err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("reply %q: %v", data, err)
	}
	return m
}

// What python-libjuju sends: pretty-printed JSON, params with every key
// (nulls included), and the watcher id under "Id".
func TestPythonStyleFraming(t *testing.T) {
	d := start(t, nil)
	creds := d.Credentials()
	ws := rawDial(t, d, creds.DefaultModelUUID)
	login := fmt.Sprintf(`{
  "type": "Admin",
  "request": "Login",
  "version": 3,
  "params": {
    "client-version": "3.5.2.0",
    "auth-tag": %q,
    "credentials": %q,
    "nonce": %q,
    "macaroons": null,
    "user-data": ""
  },
  "request-id": 1
}`, creds.ControllerAgent.Tag, creds.ControllerAgent.Password, creds.ControllerAgent.Nonce)
	res := wsCall(t, ws, login)
	if _, bad := res["error"]; bad {
		t.Fatalf("login: %v", res)
	}
	resp := res["response"].(map[string]any)
	for _, k := range []string{"facades", "server-version", "controller-tag", "model-tag", "servers"} {
		if _, ok := resp[k]; !ok {
			t.Errorf("LoginResult lacks %q", k)
		}
	}
	if _, ok := resp["user-info"]; ok {
		t.Error("agent LoginResult carries user-info")
	}

	res = wsCall(t, ws, `{"type":"Pinger","request":"Ping","version":1,"params":{},"request-id":2}`)
	if b, _ := json.Marshal(res); string(b) != `{"request-id":2,"response":{}}` {
		t.Errorf("ping reply = %s", b)
	}
	res = wsCall(t, ws, `{"type":"Provisioner","request":"WatchForModelConfigChanges","version":11,"params":null,"request-id":3}`)
	if b, _ := json.Marshal(res); string(b) != `{"request-id":3,"response":{"NotifyWatcherId":"1"}}` {
		t.Fatalf("watch reply = %s", b)
	}
	// The watcher id under "Id", in the legacy V0 framing: answered in kind.
	res = wsCall(t, ws, `{"RequestId":4,"Type":"NotifyWatcher","Version":1,"Id":"1","Request":"Stop"}`)
	if b, _ := json.Marshal(res); string(b) != `{"RequestId":4,"Response":{}}` {
		t.Errorf("v0 stop reply = %s", b)
	}
	res = wsCall(t, ws, `{"type":"NotifyWatcher","request":"Next","version":1,"Id":"1","params":{},"request-id":5}`)
	if b, _ := json.Marshal(res); string(b) != `{"error":"unknown watcher id","error-code":"not found","request-id":5,"response":{}}` {
		t.Errorf("next after stop = %s", b)
	}
	res = wsCall(t, ws, `{"type":"Provisioner","request":"Life","version":12,"params":{},"request-id":7}`)
	if b, _ := json.Marshal(res); string(b) != `{"error":"unknown version 12 for facade type \"Provisioner\"","error-code":"not implemented","request-id":7,"response":{}}` {
		t.Errorf("unknown version = %s", b)
	}
}
