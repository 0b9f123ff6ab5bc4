package daemon_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// exchange sends req (a request without its request-id, which it adds
// first, as Juju's client encodes its header) and returns the reply's
// bytes and the request-id.
func (a *rawAgent) exchange(req string) ([]byte, int) {
	a.t.Helper()
	a.id++
	msg := fmt.Sprintf(`{"request-id":%d,%s`, a.id, req[1:])
	if err := a.ws.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		a.t.Fatal(err)
	}
	_ = a.ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, data, err := a.ws.ReadMessage()
	if err != nil {
		a.t.Fatalf("read reply to %s: %v", msg, err)
	}
	return data, a.id
}

var watcherIDRE = regexp.MustCompile(`"(?:NotifyWatcherId|watcher-id)":"([^"]+)"`)

// TestWireJujuWatchBytesUnchanged: the watch calls Juju's agents make,
// which never carry provisiond's "from-revision" header key, get back the
// bytes they always did (a reply of exactly "request-id" and "response",
// the result's JSON as Juju's params have it, no "revision"), on the
// watchers that can now resume: the Watch calls (one watcher, and a bulk
// one of several) and the watchers' Next. The same calls with the key
// (provisiond's own clients) differ only by the reply's "revision".
// Written from Juju's rpc/jsoncodec (the outgoing header: request-id,
// type, version, id, request, params; the reply's: request-id, error,
// error-code, error-info, response, each empty one left out) and
// rpc/params (NotifyWatchResult's NotifyWatcherId; StringsWatchResult's
// watcher-id, changes omitted when empty); the bytes are those this
// test read before watchers could resume.
func TestWireJujuWatchBytesUnchanged(t *testing.T) {
	f := newProvFixture(t)
	ctrl := rawController(t, f.D, f.Model)

	watchID := func(t *testing.T, reply []byte) string {
		t.Helper()
		m := watcherIDRE.FindSubmatch(reply)
		if m == nil {
			t.Fatalf("no watcher id in %s", reply)
		}
		return string(m[1])
	}
	// exactly checks that reply is the response want and nothing else.
	exactly := func(t *testing.T, reply []byte, id int, want string) {
		t.Helper()
		if w := fmt.Sprintf("{\"request-id\":%d,\"response\":%s}\n", id, want); string(reply) != w {
			t.Errorf("reply\n%s\nwant\n%s", reply, w)
		}
	}

	// One notify watcher, then its Next after a change.
	reply, id := ctrl.exchange(`{"type":"Provisioner","version":11,"id":"","request":"WatchForModelConfigChanges","params":{}}`)
	nw := watchID(t, reply)
	exactly(t, reply, id, fmt.Sprintf(`{"NotifyWatcherId":%q}`, nw))
	if err := f.St.UpdateModelConfig(t.Context(), f.Model, map[string]any{"ftp-proxy": "http://proxy"}, nil); err != nil {
		t.Fatal(err)
	}
	reply, id = ctrl.exchange(fmt.Sprintf(`{"type":"NotifyWatcher","version":1,"id":%q,"request":"Next","params":{}}`, nw))
	exactly(t, reply, id, `{}`)

	// A bulk Watch (two container types of machine 0), then a Next.
	reply, id = ctrl.exchange(`{"type":"Provisioner","version":11,"id":"","request":"WatchContainers","params":` +
		`{"params":[{"machine-tag":"machine-0","container-type":"lxd"},{"machine-tag":"machine-0","container-type":"kvm"}]}}`)
	var bulk struct {
		Response struct {
			Results []struct {
				ID      string   `json:"watcher-id"`
				Changes []string `json:"changes"`
			} `json:"results"`
		} `json:"response"`
	}
	if err := json.Unmarshal(reply, &bulk); err != nil || len(bulk.Response.Results) != 2 {
		t.Fatalf("WatchContainers reply %s: %v", reply, err)
	}
	lxd, kvm := bulk.Response.Results[0], bulk.Response.Results[1]
	exactly(t, reply, id, fmt.Sprintf(`{"results":[{"watcher-id":%q,"changes":["0/lxd/0"]},{"watcher-id":%q}]}`, lxd.ID, kvm.ID))
	if err := f.St.SetMachineDying(t.Context(), f.Model, "0/lxd/0"); err != nil {
		t.Fatal(err)
	}
	reply, id = ctrl.exchange(fmt.Sprintf(`{"type":"StringsWatcher","version":1,"id":%q,"request":"Next","params":{}}`, lxd.ID))
	exactly(t, reply, id, `{"watcher-id":"","changes":["0/lxd/0"]}`)

	// The same with the key: the reply carries the revision, and that is
	// all that differs.
	reply, id = ctrl.exchange(`{"type":"Provisioner","version":11,"id":"","request":"WatchForModelConfigChanges","from-revision":0,"params":{}}`)
	reply = bytes.TrimSpace(reply)
	rev := regexp.MustCompile(`,"revision":(\d+)}$`).FindSubmatch(reply)
	if rev == nil {
		t.Fatalf("with from-revision: reply %s carries no revision", reply)
	}
	if w := fmt.Sprintf(`{"request-id":%d,"response":{"NotifyWatcherId":%q},"revision":%s}`, id, watchID(t, reply), rev[1]); string(reply) != w {
		t.Errorf("with from-revision: reply\n%s\nwant\n%s", reply, w)
	}
}
