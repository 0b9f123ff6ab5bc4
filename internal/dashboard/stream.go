package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// A stream is a text/event-stream of these events, each data line one
// JSON document:
//
//	hello     {"user", "superuser", "controller", "model", "now"}: first
//	models    [modelInfo...]: at the start and when the model list changes
//	status    snapshot: at the start and after the model's changes
//	activity  {"changes": [change...], "lost": bool}: the model's changes
//	          (at the start, the last ones the feed holds)
//	history   {"changes": [historyEntry...], "reset": bool, "error"}: the
//	          model's changes from the history, newest first, with who made
//	          them: at the start (reset) the last ones, then with each
//	          status the new ones (reset: more than the panel shows came,
//	          these are the last ones)
//	metrics   [sample...]: at the start the last two minutes, then each second
//	cluster   clusterView: at the start and when it changes (superusers only)
//	bye       {"reason"}: the stream ends (logout, expired, credentials
//	          changed, replaced by a newer session or stream, shutdown)
//
// There is no reconnection state: a page that reconnects gets everything
// again.

// streamTick is how often a stream sends a metrics sample and checks its
// session; it doubles as the stream's keep-alive.
const streamTick = time.Second

type streamWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	d   *Dashboard
	buf bytes.Buffer
	err error
}

// send writes one event and flushes it, within the write timeout.
func (s *streamWriter) send(event string, v any) {
	if s.err != nil {
		return
	}
	s.buf.Reset()
	fmt.Fprintf(&s.buf, "event: %s\ndata: ", event)
	if err := json.NewEncoder(&s.buf).Encode(v); err != nil { // Encode ends the line
		s.err = err
		return
	}
	s.buf.WriteByte('\n')
	s.write(s.buf.Bytes())
}

// keepAlive writes a comment, which the browser ignores: a connection that
// has gone is found out, and proxies see traffic.
func (s *streamWriter) keepAlive() { s.write([]byte(": keep-alive\n\n")) }

func (s *streamWriter) write(p []byte) {
	if s.err != nil {
		return
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.d.cfg.WriteTimeout))
	if _, err := s.w.Write(p); err != nil {
		s.err = err
		return
	}
	s.err = s.rc.Flush()
}

// events serves GET /dashboard/events?model=UUID-or-name.
func (d *Dashboard) events(w http.ResponseWriter, r *http.Request) {
	sess, ok := d.sessions.fromRequest(r)
	if !ok {
		http.Error(w, "no session: log in at "+Prefix+"login", http.StatusUnauthorized)
		return
	}
	superuser := sess.user.Access == state.AccessSuperuser
	var model state.Model
	if superuser {
		var err error
		if model, err = d.resolveModel(r.Context(), r.URL.Query().Get("model")); err != nil {
			http.Error(w, "no such model", http.StatusNotFound)
			return
		}
	}
	slot, release, ok := d.sessions.openStream(sess)
	if !ok {
		http.Error(w, "no session: log in at "+Prefix+"login", http.StatusUnauthorized)
		return
	}
	defer release()
	l, cancel := d.feed.listen(model.UUID)
	defer cancel()

	ctrl, _ := d.cfg.State.Controller(r.Context())
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	sw := &streamWriter{w: w, rc: http.NewResponseController(w), d: d}
	// The client sends nothing more: the server's whole-request read
	// deadline must not end the stream (a closed connection still does).
	_ = sw.rc.SetReadDeadline(time.Time{})
	sw.write([]byte("retry: 2000\n\n"))

	sw.send("hello", map[string]any{"user": sess.user.Name, "superuser": superuser, "controller": ctrl.UUID,
		"model": model.UUID, "now": d.cfg.Now().UTC()})
	sendModels := func() {
		ms, err := d.models(r.Context(), sess.user)
		if err != nil {
			d.log.Error("dashboard: listing models failed", "err", err)
			return
		}
		sw.send("models", ms)
	}
	sendModels()

	var seq uint64
	var lastSample int64
	sendActivity := func() (modelsChanged, changed bool) {
		changes, next, lost, models := d.feed.since(l, seq)
		seq = next
		d.nameModels(r.Context(), changes)
		if len(changes) > 0 || lost {
			sw.send("activity", map[string]any{"changes": changes, "lost": lost})
		}
		return models, len(changes) > 0
	}
	sendMetrics := func() bool {
		ss := d.sampler.latest(lastSample)
		if len(ss) == 0 {
			return false
		}
		lastSample = ss[len(ss)-1].T
		sw.send("metrics", ss)
		return true
	}
	var lastCluster []byte
	sendCluster := func() {
		if !superuser {
			return
		}
		b, err := json.Marshal(d.cluster(r.Context()))
		if err != nil || bytes.Equal(b, lastCluster) {
			return
		}
		lastCluster = b
		sw.send("cluster", json.RawMessage(b))
	}
	var histNext uint64
	histStarted := false
	sendHistory := func() {
		if d.cfg.History == nil {
			return
		}
		var changes []historyEntry
		var oldest *historyOldest
		var err error
		reset := !histStarted
		if reset {
			changes, histNext, oldest, err = d.recentHistory(r.Context(), params.HistoryArgs{Model: model.UUID}, historyShown)
		} else {
			changes, histNext, reset, err = d.newHistory(r.Context(), model.UUID, histNext)
		}
		if err != nil {
			if !histStarted {
				sw.send("history", map[string]any{"changes": []historyEntry{}, "reset": true, "error": d.historyError(err, model.UUID)})
			}
			histStarted = true
			return
		}
		histStarted = true
		if len(changes) > 0 || reset {
			h := map[string]any{"changes": changes, "reset": reset}
			if oldest != nil {
				h["oldest"] = oldest // the first panel reaches the oldest kept
			}
			sw.send("history", h)
		}
	}
	sendStatus := func() {
		sw.send("status", d.snapshot(r.Context(), model.UUID))
		sendHistory()
	}
	if superuser {
		// The feed's changes so far are taken before the status is read:
		// a change after them wakes the loop below, which sends it and a
		// status read after it. Taken after the status (and its history
		// read, which can take a while), a change made in between would
		// be in this activity and in no status until the next change.
		sendActivity()
		sendStatus()
	}
	sendMetrics()
	sendCluster()

	tick := time.NewTicker(streamTick)
	defer tick.Stop()
	// Snapshots are sent at most once per SnapshotInterval: a change in
	// the interval arms the timer, and one snapshot follows it.
	var lastSnap time.Time
	delay := time.NewTimer(0)
	if !delay.Stop() {
		<-delay.C
	}
	pending := false
	bye := func(reason string) { sw.send("bye", map[string]string{"reason": reason}) }
	for sw.err == nil {
		select {
		case <-r.Context().Done():
			return
		case <-d.closing.Done():
			bye(reasonShutdown)
			return
		case <-sess.done:
			bye(sess.reason)
			return
		case <-slot.done:
			bye(slot.reason)
			return
		case <-l.wake:
			modelsChanged, changed := sendActivity()
			changed = d.feed.takePresence(l) || changed
			if modelsChanged {
				sendModels()
			}
			if changed && superuser && !pending {
				if wait := d.cfg.SnapshotInterval - time.Since(lastSnap); wait > 0 {
					pending = true
					delay.Reset(wait)
					continue
				}
				lastSnap = time.Now()
				sendStatus()
			}
		case <-delay.C:
			pending = false
			lastSnap = time.Now()
			sendStatus()
		case <-tick.C:
			if !d.sessions.check(sess) {
				continue // sess.done is closed: the next round says bye
			}
			if !sendMetrics() {
				sw.keepAlive()
			}
			sendCluster()
		}
	}
	if sw.err != nil {
		d.log.Debug("dashboard: stream ended", "user", sess.user.Name, "err", sw.err)
	}
}

// nameModels sets the Name of the changes whose ID is a model's UUID.
func (d *Dashboard) nameModels(ctx context.Context, changes []change) {
	var names map[string]string
	for i, c := range changes {
		if !state.IsValidUUID(c.ID) {
			continue
		}
		if names == nil {
			names = map[string]string{}
			ms, err := d.cfg.State.Models(ctx)
			if err != nil {
				d.log.Warn("dashboard: listing models failed", "err", err)
				return
			}
			for _, m := range ms {
				names[m.UUID] = m.Name
			}
		}
		changes[i].Name = names[c.ID]
	}
}
