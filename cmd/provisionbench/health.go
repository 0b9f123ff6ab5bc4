package main

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// healthWatch measures, during a storm, when the restarted daemon starts
// listening and how long its /health takes to answer from then on,
// however many agents are queueing at the same address.
//
// Listening is the first TCP connect that succeeds (the kernel completes
// it once the daemon's socket listens, before the daemon accepts it): a
// probe every 2 ms, each given 100 ms (a SYN dropped by a full accept
// queue is tried again). From then on /health is asked in a loop, one
// request at a time on a new connection from 127.0.0.1 (the agents come
// from 127.0.0.2 and up), each given healthProbeTimeout; its own
// goroutine runs until stop.
type healthWatch struct {
	addr  string
	httpc *http.Client

	mu        sync.Mutex
	listening time.Time     // zero: not seen yet
	firstOK   time.Time     // the end of the first 200 after listening
	probes    []healthProbe // after firstOK
	failed    int           // probes after firstOK that failed or were not 200
	done      chan struct{}
}

type healthProbe struct {
	took time.Duration
	ok   bool
}

const (
	listenProbeEvery   = 2 * time.Millisecond
	listenProbeTimeout = 100 * time.Millisecond
	healthProbeTimeout = 30 * time.Second
	healthProbeEvery   = 50 * time.Millisecond
)

// watchHealth starts a healthWatch of t's address; call it once the old
// daemon has stopped listening. It ends when ctx does.
func (t *target) watchHealth(ctx context.Context) *healthWatch {
	hc := *t.httpc
	hc.Timeout = healthProbeTimeout
	h := &healthWatch{addr: t.addr, httpc: &hc, done: make(chan struct{})}
	go h.run(ctx)
	return h
}

func (h *healthWatch) run(ctx context.Context) {
	defer close(h.done)
	d := net.Dialer{Timeout: listenProbeTimeout}
	for {
		c, err := d.DialContext(ctx, "tcp", h.addr)
		if err == nil {
			c.Close()
			break
		}
		if sleepCtx(ctx, listenProbeEvery) != nil {
			return
		}
	}
	h.mu.Lock()
	h.listening = time.Now()
	h.mu.Unlock()
	for ctx.Err() == nil {
		t0 := time.Now()
		ok := h.probe(ctx)
		now := time.Now()
		h.mu.Lock()
		switch {
		case !h.firstOK.IsZero():
			h.probes = append(h.probes, healthProbe{took: now.Sub(t0), ok: ok})
			if !ok && ctx.Err() == nil {
				h.failed++
			}
		case ok:
			h.firstOK = now
		}
		h.mu.Unlock()
		if sleepCtx(ctx, healthProbeEvery) != nil {
			return
		}
	}
}

// probe asks /health once and reports whether it said 200.
func (h *healthWatch) probe(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+h.addr+"/health", nil)
	if err != nil {
		return false
	}
	resp, err := h.httpc.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// healthFigures is what a healthWatch saw.
type healthFigures struct {
	listening, firstOK time.Time // zero: not seen
	maxProbe           time.Duration
	probes, failed     int
}

// figures returns what was seen so far (the watch goes on).
func (h *healthWatch) figures() healthFigures {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := healthFigures{listening: h.listening, firstOK: h.firstOK, probes: len(h.probes), failed: h.failed}
	for _, p := range h.probes {
		f.maxProbe = max(f.maxProbe, p.took)
	}
	return f
}

// waitFirstOK returns the figures once /health has answered 200 (a small
// storm can be all back before), or after wait.
func (h *healthWatch) waitFirstOK(ctx context.Context, wait time.Duration) healthFigures {
	deadline := time.Now().Add(wait)
	for {
		f := h.figures()
		if !f.firstOK.IsZero() || time.Now().After(deadline) || sleepCtx(ctx, 10*time.Millisecond) != nil {
			return f
		}
	}
}
