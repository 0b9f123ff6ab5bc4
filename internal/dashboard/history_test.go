package dashboard

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/provisiond/provisiond/state"
)

// TestStreamSendsTheHistory: the stream starts with the model's last
// changes from the history, newest first, and sends each new one with
// the status that follows it, in provisionctl history's words.
func TestStreamSendsTheHistory(t *testing.T) {
	w := newWorld(t, nil)
	model := w.init.DefaultModelUUID
	if _, err := w.st.AddMachine(t.Context(), model, state.MachineParams{}); err != nil {
		t.Fatal(err)
	}
	c := w.client()
	c.mustLogin()
	s := c.stream("")
	var h struct {
		Changes []historyEntry
		Reset   bool
		Error   string
		Oldest  *historyOldest
	}
	if err := json.Unmarshal(s.next("history"), &h); err != nil || !h.Reset || h.Error != "" || len(h.Changes) == 0 {
		t.Fatalf("first history %+v %v", h, err)
	}
	// Fewer than a panel shows: it reaches the oldest kept, and says so.
	kept, err := w.st.OldestHistory(t.Context())
	if err != nil || h.Oldest == nil || h.Oldest.Rev != kept.Oldest || h.Oldest.Time != kept.OldestTime.UTC().Format(time.RFC3339Nano) {
		t.Fatalf("first history's oldest %+v, want revision %d (%v)", h.Oldest, kept.Oldest, err)
	}
	first := h.Changes[0]
	if first.Kind != "machine" || first.ID != "0" || first.Entity != "machine/0" || !strings.HasPrefix(first.What, "created {") || first.Who != "-" || first.Call != "-" {
		t.Errorf("newest change %+v: want machine 0 created by the daemon's own work", first)
	}
	for i := 1; i < len(h.Changes); i++ {
		if h.Changes[i].Rev > h.Changes[i-1].Rev {
			t.Errorf("history not newest first: %+v", h.Changes)
		}
	}
	// A status change comes alone, not the whole list again.
	if err := w.st.SetMachineStatus(t.Context(), model, "0", state.InstanceStatus, state.Status{Status: "running", Message: "<b>up</b>"}); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(s.next("history"), &h); err != nil || h.Reset || len(h.Changes) != 1 ||
		!strings.HasPrefix(h.Changes[0].What, `instance-status: {"status":"pending"`) || !strings.Contains(h.Changes[0].What, `\u003cb\u003eup\u003c/b\u003e`) {
		t.Fatalf("next history %+v %v", h, err)
	}
}

// TestEntityHistory: GET /dashboard/history is one entity's changes, for
// superusers, of a model that exists.
func TestEntityHistory(t *testing.T) {
	w := newWorld(t, nil)
	model := w.init.DefaultModelUUID
	for range 2 {
		if _, err := w.st.AddMachine(t.Context(), model, state.MachineParams{}); err != nil {
			t.Fatal(err)
		}
	}
	c := w.client()
	c.mustLogin()
	resp, body := c.get("/dashboard/history?model=default&kind=machine&id=1")
	var h struct {
		Kind, ID string
		Changes  []historyEntry
		Oldest   *historyOldest
	}
	if err := json.Unmarshal([]byte(body), &h); resp.StatusCode != http.StatusOK || err != nil ||
		resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("GET history: %s %v %s", resp.Status, err, body)
	}
	if h.Kind != "machine" || h.ID != "1" || len(h.Changes) == 0 || h.Oldest == nil || h.Oldest.Rev == 0 || h.Oldest.Time == "" {
		t.Fatalf("history %+v (oldest %+v)", h, h.Oldest)
	}
	for _, ch := range h.Changes {
		if ch.Entity != "machine/1" {
			t.Errorf("machine 1's history holds %+v", ch)
		}
	}
	for path, want := range map[string]int{
		"/dashboard/history?model=nosuch&kind=machine&id=1":                         http.StatusNotFound,
		"/dashboard/history?model=default&kind=machine":                             http.StatusBadRequest,
		"/dashboard/history?model=default&id=1":                                     http.StatusBadRequest,
		"/dashboard/history?model=default&kind=unit&id=" + strings.Repeat("x", 300): http.StatusBadRequest,
	} {
		if resp, body := c.get(path); resp.StatusCode != want {
			t.Errorf("GET %s = %s %q, want %d", path, resp.Status, body, want)
		}
	}
	// A user who is no superuser sees no model's history.
	if _, err := w.st.AddUser(t.Context(), "bob", "", "bob-password-long-enough", state.AccessLogin); err != nil {
		t.Fatal(err)
	}
	bob := w.client()
	if resp, _ := bob.login("bob", "bob-password-long-enough"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("bob's login: %s", resp.Status)
	}
	if resp, _ := bob.get("/dashboard/history?model=default&kind=machine&id=1"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("bob's GET history = %s, want 403", resp.Status)
	}
}
