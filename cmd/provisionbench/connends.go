package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/provisiond/provisiond/rpc"
)

// Why the daemons ended connections during a run: each daemon's
// provisiond_connections_ended_total{reason} (rpc.EndReasons) read before
// the run's agents connect and again at its end, before they close. A
// daemon the run stops or kills (storm, failover) is read just before,
// and its new process counts from 0: the connections its own stop ends
// (shutdown) are not counted, the others are.

const connsEndedMetric = "provisiond_connections_ended_total"

// connEnds are connections ended by reason.
type connEnds map[string]float64

// plus adds b minus base (base nil: from 0) to a, by reason.
func (a connEnds) plus(b, base connEnds) connEnds {
	out := connEnds{}
	for r, n := range a {
		out[r] += n
	}
	for r, n := range b {
		out[r] += n - base[r]
	}
	return out
}

// total is every reason's count.
func (a connEnds) total() float64 {
	s := 0.0
	for _, n := range a {
		s += n
	}
	return s
}

// reasons are a's reasons with a count, in rpc.EndReasons' order, then
// any other (a newer daemon's) by name.
func (a connEnds) reasons() []string {
	var out, other []string
	for _, r := range rpc.EndReasons {
		if a[r] != 0 {
			out = append(out, r)
		}
	}
	for r, n := range a {
		if n != 0 && !slices.Contains(rpc.EndReasons, r) {
			other = append(other, r)
		}
	}
	slices.Sort(other)
	return append(out, other...)
}

// scrapeLabeled reads metric name's samples from Prometheus text by the
// value of label (samples without it are left out).
func scrapeLabeled(r io.Reader, name, label string) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	key := label + `="`
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		labels := line[len(name)+1 : end]
		i := strings.Index(labels, key)
		if i < 0 || (i > 0 && labels[i-1] != ',') {
			continue
		}
		value, _, ok := strings.Cut(labels[i+len(key):], `"`)
		f := strings.Fields(line[end+1:])
		if !ok || len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		out[value] += v
	}
	return out, sc.Err()
}

// scrapeEnds reads t's connections ended by reason, and its goroutines'
// waits to run (sched.go), from one GET (a busy daemon is asked up to
// three times).
func (t *target) scrapeEnds() (ends, sched connEnds, err error) {
	for range 3 {
		resp, gerr := t.httpc.Get("https://" + t.addr + "/metrics")
		if err = gerr; err != nil {
			continue
		}
		body, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err = rerr; err != nil {
			continue
		}
		ends, err = scrapeLabeled(bytes.NewReader(body), connsEndedMetric, "reason")
		if err == nil {
			sched, err = scrapeLabeled(bytes.NewReader(body), schedMetric+"_bucket", "le")
		}
		if err == nil {
			return ends, sched, nil
		}
	}
	return nil, nil, err
}

// up reports whether t's daemon runs (a killed or stopped one is read as
// having ended nothing since).
func (t *target) up() bool {
	return t.inproc != nil || t.cmd != nil || t.mode == modeExternal
}

// endsTrack is a daemon's count over a run: base is its process's
// counters when the run began (nil: a process started in the run, from
// 0), acc what the processes stopped in the run ended, bad says a
// reading failed (its figures are not reported).
type endsTrack struct {
	base, acc connEnds
	// schedBase and schedAcc are the same for the daemon's goroutines'
	// waits to run: cumulative bucket counts by bound (sched.go).
	schedBase, schedAcc connEnds
	bad                 bool
}

// openEnds reads every daemon's counters before a run's agents.
func (e *env) openEnds() {
	for _, t := range e.targets {
		t.ends = endsTrack{acc: connEnds{}, schedAcc: connEnds{}}
		if t.up() && t.httpc != nil {
			m, s, err := t.scrapeEnds()
			if err != nil {
				fmt.Fprintf(e.o.stderr, "provisionbench: %s: %v (its connections ended are not reported)\n", t.addr, err)
				t.ends.bad = true
			}
			t.ends.base, t.ends.schedBase = m, s
		}
	}
}

// foldEnds reads t just before the run stops or kills it: what its
// process ended so far is kept, and its next process counts from 0.
func (t *target) foldEnds() {
	m, s, err := t.scrapeEnds()
	if err != nil {
		t.ends.bad = true
	}
	t.ends.acc = t.ends.acc.plus(m, t.ends.base)
	t.ends.schedAcc = t.ends.schedAcc.plus(s, t.ends.schedBase)
	t.ends.base, t.ends.schedBase = nil, nil
}

// setConnEnds reads every daemon at the end of a run (before its agents
// close) and sets the rows (endsReading.set).
func (e *env) setConnEnds(v *values) { e.readConnEnds().set(v) }

// endsReading is what the daemons ended over a run: each one's, and
// their sum; ok false when one could not be read.
type endsReading struct {
	per []connEnds
	sum connEnds
	// sched is each daemon's goroutines' waits to run over the run
	// (cumulative by bound), nil for one not read.
	sched []connEnds
	ok    bool
}

// readConnEnds reads every daemon at the end of a run.
func (e *env) readConnEnds() endsReading {
	r := endsReading{per: make([]connEnds, len(e.targets)), sum: connEnds{}, sched: make([]connEnds, len(e.targets))}
	for i, t := range e.targets {
		if t.ends.acc == nil || t.httpc == nil { // not opened
			return r
		}
		cur, sched := connEnds{}, connEnds{}
		if t.up() {
			m, s, err := t.scrapeEnds()
			if err != nil {
				t.ends.bad = true
			}
			cur, sched = m, s
		}
		if t.ends.bad {
			return r
		}
		r.per[i] = t.ends.acc.plus(cur, t.ends.base)
		r.sched[i] = t.ends.schedAcc.plus(sched, t.ends.schedBase)
		r.sum = r.sum.plus(r.per[i], nil)
	}
	r.ok = true
	return r
}

// withDaemonEnds adds to err, a run's failure, what the daemons ended
// over the run and why, when they can be read: whether the agents were
// dropped by the daemons or gave up themselves (waitBack's error says
// what the agents saw).
func (e *env) withDaemonEnds(err error) error {
	r := e.readConnEnds()
	if !r.ok {
		return err
	}
	return fmt.Errorf("%w; the daemons ended %.0f connections: %s; the daemons' goroutines' waits to run: %s",
		err, r.sum.total(), r.sum.describe(), describeSched(r.sched))
}

// describe says how many ended for each reason, in reasons' order.
func (a connEnds) describe() string {
	parts := []string{}
	for _, reason := range a.reasons() {
		parts = append(parts, fmt.Sprintf("%.0f %s", a[reason], reason))
	}
	return strings.Join(parts, "; ")
}

// set sets the rows: connections ended by the daemons in all, then each
// reason with a count (summed over the daemons) and, with several
// daemons, on which.
func (r endsReading) set(v *values) {
	if !r.ok {
		return
	}
	setDaemonsSched(v, r.sched)
	v.setCount("connections ended by the daemons", r.sum.total())
	for _, reason := range r.sum.reasons() {
		v.setCount("  of which "+reason, r.sum[reason])
		if len(r.per) < 2 {
			continue
		}
		for i, p := range r.per {
			if p[reason] != 0 {
				v.setCount(fmt.Sprintf("    %s on daemon %d", reason, i+1), p[reason])
			}
		}
	}
}
