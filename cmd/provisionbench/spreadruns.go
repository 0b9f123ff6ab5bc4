package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/state/store/etcdstore/rawetcd"
)

// The workloads with their agents in load generator processes
// (--loadgens, loadgen.go) and, on etcd, over several daemons: conns,
// watch, failover and storm (all together, or --rolling). Each figure is
// computed here from what the load generators report.

// readMemAll reads every daemon's memory after a collection.
func readMemAll(ts []*target) ([]memReading, error) {
	out := make([]memReading, len(ts))
	for i, t := range ts {
		m, err := readMemOf(t)
		if err != nil {
			return nil, fmt.Errorf("daemon %d: %w", i+1, err)
		}
		out[i] = m
	}
	return out, nil
}

func sumMem(ms []memReading) memReading {
	var s memReading
	for _, m := range ms {
		s = s.plus(m)
	}
	return s
}

// closeAgents closes every load generator's agents (at the end of a run).
func (l *loadgens) closeAgents() { _, _ = l.all(lgRequest{Op: "close"}) }

// setConnect sets what the agents met while connecting.
func setConnect(v *values, prefix string, s lgReply) {
	v.set(prefix+"try again", "", float64(s.TryAgain))
	v.set(prefix+"connection errors", "", float64(s.ConnErrors))
	v.set(prefix+"  of which refused (not listening)", "", float64(s.Refused))
	v.set(prefix+"  of which reset at accept (over a bound, or shed)", "", float64(s.ResetAtAccept))
	v.set(prefix+"  of which no free source port", "", float64(s.NoPort))
	v.set(prefix+"  of which HTTP 503 (a daemon draining, or over its share: rebalancing)", "", float64(s.Unavailable))
	v.set(prefix+"other errors", "", float64(s.Other))
	if len(s.Ends) > 0 {
		v.setCount(prefix+"agents' connections ended, as the agents saw it", s.Ends.total())
		for _, why := range s.Ends.reasons() {
			v.setCount(prefix+"  of which "+why, s.Ends[why])
		}
	}
	setSched(v, prefix+"load generators' goroutines' waits to run", s.Sched)
}

// spreadSetup makes sure n machines exist and the load generators run.
func (e *env) spreadSetup(ctx context.Context, n int) ([]machineCred, *loadgens, error) {
	ms, err := e.fix.ensureMachines(ctx, n)
	if err != nil {
		return nil, nil, err
	}
	lg, err := e.loadgenPool(ctx)
	return ms, lg, err
}

// connectWatching connects the agents of ms, each with k watchers of its
// own containers (lgWatch), resuming them after a reconnection with
// resume; the caller closes them (closeAgents).
func (l *loadgens) connectWatching(ms []machineCred, k int, resume bool) error {
	if _, err := l.connect(ms, lgWatch, k, resume); err != nil {
		l.closeAgents()
		return err
	}
	return nil
}

func runConnsSpread(ctx context.Context, e *env, n int) (*values, error) {
	k := e.o.connsWatchers()
	ms, lg, err := e.spreadSetup(ctx, n)
	if err != nil {
		return nil, err
	}
	e.o.progress.set("conns: reading the daemons' memory")
	before, err := readMemAll(e.targets)
	if err != nil {
		return nil, err
	}
	e.o.progress.set(fmt.Sprintf("conns: connecting %d agents from %d load generators", n, len(lg.procs)))
	start := time.Now()
	rs, err := lg.connect(ms, lgConns, 0, false)
	defer lg.closeAgents()
	if err != nil {
		return nil, err
	}
	took := time.Since(start)
	// An agent whose connection drops connects again, as one in the field
	// does, with its watchers: counted, and a run with any fails once its
	// figures are reported, instead of ending with none.
	if _, err := lg.all(lgRequest{Op: "arm"}); err != nil {
		return nil, err
	}
	e.o.progress.set(fmt.Sprintf("conns: %d agents logged in; settling", n))
	if err := sleepCtx(ctx, e.o.settle); err != nil {
		return nil, err
	}
	loggedIn, err := readMemAll(e.targets)
	if err != nil {
		return nil, err
	}
	e.o.progress.set(fmt.Sprintf("conns: opening %d watchers on each of %d agents", k, n))
	wstart := time.Now()
	if _, err := lg.all(lgRequest{Op: "watch", Watchers: k}); err != nil {
		return nil, err
	}
	wtook := time.Since(wstart)
	if err := sleepCtx(ctx, e.o.settle); err != nil {
		return nil, err
	}
	after, err := readMemAll(e.targets)
	if err != nil {
		return nil, err
	}
	sts, err := lg.all(lgRequest{Op: "status"})
	if err != nil {
		return nil, err
	}
	st := sumReplies(sts)
	v := newValues()
	v.set("connect time", "s", took.Seconds())
	v.set("agents connected/s", "", float64(n)/took.Seconds())
	v.set("watchers opened/s", "", float64(n*k)/wtook.Seconds())
	v.set("try again (logins, watch calls)", "", float64(sumReplies(rs).TryAgain))
	v.set("agents connected", "", float64(sumPerDaemon(st.PerDaemon)))
	dropped := st.Back + st.Down
	v.set("connections dropped", "", float64(dropped))
	v.set("  agents still without a daemon", "", float64(st.Down))
	v.set("watchers open", "", float64(st.Watching))
	if dropped > 0 || st.Watching != int64(n*k) {
		e.o.missed = append(e.o.missed, fmt.Sprintf("%d agents: %d connections dropped (target 0), %d agents without a daemon, %d of %d watchers open",
			n, dropped, st.Down, st.Watching, n*k))
	}
	connsFigures(v, sumMem(before), sumMem(loggedIn), sumMem(after), n, k)
	setPerDaemonMem(v, before, after, st.PerDaemon)
	e.setEtcdSize(ctx, v)
	e.setConnEnds(v)
	return v, nil
}

// setEtcdSize sets what the model costs etcd: the tool's member's RSS
// (when it is a child process) and the database's size and the part in
// use, also per machine of the model.
func (e *env) setEtcdSize(ctx context.Context, v *values) {
	if !e.etcdMode() {
		return
	}
	et := e.cl.etcd
	if et.pid != 0 {
		if rss, err := procRSS(et.pid); err == nil {
			v.set("etcd RSS", "MiB", float64(rss)/(1<<20))
		}
	}
	size, inUse, err := rawetcd.DBSize(ctx, et.conn())
	if err != nil {
		return
	}
	v.set("etcd database size", "MiB", float64(size)/(1<<20))
	v.set("etcd database in use", "MiB", float64(inUse)/(1<<20))
	if n := len(e.fix.machines); n > 0 {
		v.set("  in use KiB/machine of the model", "KiB", float64(inUse)/1024/float64(n))
	}
}

func sumPerDaemon(m map[int]int) int {
	s := 0
	for _, n := range m {
		s += n
	}
	return s
}

// setPerDaemonMem sets each daemon's figures (several daemons): its
// agents, its memory per agent, its live heap after a collection (before
// the agents: its replica of the model and the state), its goroutines.
func setPerDaemonMem(v *values, before, after []memReading, on map[int]int) {
	if len(before) < 2 {
		return
	}
	const mib = 1 << 20
	for i := range before {
		p := fmt.Sprintf("daemon %d ", i+1)
		a := float64(on[i])
		v.set(p+"agents", "", a)
		if a > 0 {
			v.set(p+"KiB/agent", "KiB", float64(after[i].rss-before[i].rss)/1024/a)
			if l0, ok := before[i].rt[heapLive]; ok {
				v.set(p+"live heap KiB/agent", "KiB", (after[i].rt[heapLive]-l0)/1024/a)
			}
			if g0, ok := before[i].rt["go_goroutines"]; ok {
				v.set(p+"goroutines/agent", "", (after[i].rt["go_goroutines"]-g0)/a)
			}
		}
		if l, ok := before[i].rt[heapLive]; ok {
			v.set(p+"live heap before the agents (replica, state)", "MiB", l/mib)
			v.set(p+"live heap", "MiB", after[i].rt[heapLive]/mib)
		}
		v.set(p+"RSS", "MiB", float64(after[i].rss)/mib)
	}
}

// watchSpread is what one watch-kind run over load generators measured.
type watchSpread struct {
	lat       latencies
	perDaemon map[int]*latencies
	lost      int
	unknown   int
	rewatched int
}

// tally matches the load generators' deliveries against the changes run
// made: latency (from the add issued to the Next returning; not for a
// change found in a watcher opened again after a reconnection, which is
// counted in rewatched), and each watcher (agent j of ms, watcher w < k)
// that has not seen a change made to its machine is one lost.
func tally(run *watchRun, ms []machineCred, k int, ds []lgDelivery) *watchSpread {
	type key struct {
		a, w int
		id   string
	}
	seen := make(map[key]bool, len(ds))
	ws := &watchSpread{perDaemon: map[int]*latencies{}}
	run.mu.Lock()
	defer run.mu.Unlock()
	for _, d := range ds {
		seen[key{d.Agent, d.Watcher, d.ID}] = true
		if d.Rewatch {
			ws.rewatched++
			continue
		}
		t0, ok := run.issued[d.ID]
		if !ok {
			ws.unknown++
			continue
		}
		l := time.Duration(d.At - t0.UnixNano())
		ws.lat.add(l)
		if ws.perDaemon[d.Daemon] == nil {
			ws.perDaemon[d.Daemon] = &latencies{}
		}
		ws.perDaemon[d.Daemon].add(l)
	}
	for j, m := range ms {
		for _, id := range run.added[m.ID] {
			for w := range k {
				if !seen[key{j, w, id}] {
					ws.lost++
				}
			}
		}
	}
	return ws
}

// expectedDeliveries is every watcher's changes: k per change made.
func (run *watchRun) expectedDeliveries(k int) int64 {
	run.mu.Lock()
	defer run.mu.Unlock()
	n := int64(0)
	for _, ids := range run.added {
		n += int64(len(ids) * k)
	}
	return n
}

// waitDeliveries waits until the load generators have seen want
// deliveries, or settle passes.
func (l *loadgens) waitDeliveries(ctx context.Context, want int64, settle time.Duration) error {
	deadline := time.Now().Add(settle)
	for {
		rs, err := l.all(lgRequest{Op: "status"})
		if err != nil {
			return err
		}
		if sumReplies(rs).Deliveries >= want || time.Now().After(deadline) {
			return nil
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

func newWatchRun() *watchRun {
	return &watchRun{issued: map[string]time.Time{}, inflight: map[string]time.Time{}, added: map[string][]string{},
		failures: map[string]int{}}
}

func (run *watchRun) reportFailures(e *env, n int) {
	run.mu.Lock()
	defer run.mu.Unlock()
	for msg, count := range run.failures {
		fmt.Fprintf(e.o.stderr, "%s: %d agents: %d writes failed: %s\n", e.o.workload, n, count, msg)
	}
}

// adminConns are an admin connection to each daemon (the first is the
// fixture's); close closes the others.
func (e *env) adminConns(ctx context.Context) ([]*client.Conn, func(), error) {
	if err := e.fix.conns(ctx); err != nil {
		return nil, nil, err
	}
	cs := []*client.Conn{e.fix.admin}
	closeAll := func() {
		for _, c := range cs[1:] {
			c.Close()
		}
	}
	for _, t := range e.targets[1:] {
		c, err := t.dialAdmin(ctx, e.fix.model)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		cs = append(cs, c)
	}
	return cs, closeAll, nil
}

func runWatchSpread(ctx context.Context, e *env, n int) (*values, error) {
	k, d := e.o.watchers, len(e.targets)
	mcs, lg, err := e.spreadSetup(ctx, n)
	if err != nil {
		return nil, err
	}
	drivers, closeDrivers, err := e.adminConns(ctx)
	if err != nil {
		return nil, err
	}
	defer closeDrivers()
	heap0 := liveHeaps(e.targets)
	e.o.progress.set(fmt.Sprintf("watch: connecting %d agents x %d watchers from %d load generators", n, k, len(lg.procs)))
	if err := lg.connectWatching(mcs, k, false); err != nil {
		return nil, err
	}
	defer lg.closeAgents()

	// Agent j is on daemon j mod d; its changes are written through the
	// next daemon, so with several every change crosses daemons through
	// etcd, and every daemon writes.
	through := func(j int) *client.Conn { return drivers[(j+1)%d] }
	run := newWatchRun()
	var issuedN, failed atomic.Int64
	e.o.progress.setWith(fmt.Sprintf("watch: %d agents x %d watchers, %.0f changes/s", n, k, e.o.rate), func() string {
		return fmt.Sprintf("issued %d", issuedN.Load())
	})
	var et *etcdTarget
	if e.etcdMode() {
		et = e.cl.etcd
	}
	newCPU := func() *cpuWindow {
		c := newCPUWindow(e.daemonPIDs(), et, e.o.newToolWindow())
		c.pids[2] = append(c.pids[2], lg.pids()...)
		return c
	}
	var idle *idleWindow
	if e.o.idleWindow {
		if idle, err = measureIdle(ctx, e, lg, e.o.duration, newCPU); err != nil {
			return nil, err
		}
	}
	cpu := newCPU()
	cpu.profile = e.o.windowProf != ""
	dw := newDaemonsWindow(e.targets)
	if _, err := lg.all(lgRequest{Op: "window-open"}); err != nil {
		return nil, err
	}
	dw.open()
	cpu.mark(true)
	opened := time.Now()
	elapsed := run.drive(ctx, nil, e.o.rate, e.o.duration, mcs, through, &issuedN, &failed)
	if err := lg.waitDeliveries(ctx, run.expectedDeliveries(k), e.o.settle); err != nil {
		return nil, err
	}
	cpu.mark(false)
	window := time.Since(opened)
	dw.close()
	gcs, err := lg.all(lgRequest{Op: "window-close"})
	if err != nil {
		return nil, err
	}
	dels, err := lg.all(lgRequest{Op: "results"})
	if err != nil {
		return nil, err
	}
	heap1 := liveHeaps(e.targets)
	got := sumReplies(dels)
	ws := tally(run, mcs, k, got.Delivered)
	run.reportFailures(e, n)

	ds, wl := ws.lat.snapshot(), run.writeLat.snapshot()
	changes := float64(issuedN.Load() - failed.Load())
	v := newValues()
	v.set("watchers", "", float64(n*k))
	v.set("changes/s", "", changes/elapsed.Seconds())
	v.set("deliveries", "", float64(len(ds)))
	v.set("p50 latency", "ms", ms(percentile(ds, 50)))
	v.set("p99 latency", "ms", ms(percentile(ds, 99)))
	v.set("max latency", "ms", ms(percentile(ds, 100)))
	v.set("write p50 latency", "ms", ms(percentile(wl, 50)))
	v.set("write p99 latency", "ms", ms(percentile(wl, 99)))
	if d > 1 {
		for i := range d {
			if l := ws.perDaemon[i]; l != nil {
				s := l.snapshot()
				v.set(fmt.Sprintf("daemon %d p50 latency", i+1), "ms", ms(percentile(s, 50)))
				v.set(fmt.Sprintf("daemon %d p99 latency", i+1), "ms", ms(percentile(s, 99)))
			}
		}
	}
	cpu.set(v, "", "change", changes, "ms")
	v.set("load generators' GC cycles", "", float64(sumReplies(gcs).GCCycles))
	dw.set(v, map[string]float64{"change": changes, "delivery": float64(len(ds))}, []string{"change", "delivery"})
	idle.set(v, cpu, dw, window, changes)
	setLiveHeaps(v, heap0, heap1, n, k)
	e.setEtcdSize(ctx, v)
	v.set("lost", "", float64(ws.lost))
	v.set("spurious wake-ups", "", float64(got.Spurious))
	v.set("duplicates", "", float64(got.Duplicates))
	v.set("unknown changes", "", float64(ws.unknown))
	v.set("failed writes", "", float64(failed.Load()))
	e.setConnEnds(v)
	return v, nil
}

// setLiveHeaps sets the daemons' live heap after a collection, with the
// agents' watchers open (after) against before them: in all, per agent,
// per watcher, and each daemon's.
func setLiveHeaps(v *values, before, after []float64, n, k int) {
	var b, a float64
	for i := range before {
		b += before[i]
		a += after[i]
	}
	if math.IsNaN(a) || math.IsNaN(b) {
		return
	}
	v.set("daemons' live heap after a collection", "MiB", a/(1<<20))
	v.set("  of which before the agents (replica, state)", "MiB", b/(1<<20))
	v.set("  live heap KiB/agent", "KiB", (a-b)/1024/float64(n))
	v.set("  live heap KiB/watcher", "KiB", (a-b)/1024/float64(n*k))
	if len(after) > 1 {
		for i := range after {
			v.set(fmt.Sprintf("daemon %d live heap after a collection", i+1), "MiB", after[i]/(1<<20))
		}
	}
}

// setAgentsOn sets where the agents are once all are back: the fewest
// and the most on one daemon of those serving (live), how many of them
// hold none, and each one's count. The agents stay where they went: no
// daemon sends them back.
func (l *loadgens) setAgentsOn(v *values, live []int) error {
	sts, err := l.all(lgRequest{Op: "status"})
	if err != nil {
		return err
	}
	on := sumReplies(sts).PerDaemon
	least, most, none := math.MaxInt, 0, 0
	for _, i := range live {
		least, most = min(least, on[i]), max(most, on[i])
		if on[i] == 0 {
			none++
		}
	}
	v.set("agents per daemon after, fewest", "", float64(least))
	v.set("agents per daemon after, most", "", float64(most))
	v.set("daemons holding no agent after", "", float64(none))
	for _, i := range live {
		v.set(fmt.Sprintf("daemon %d: agents after", i+1), "", float64(on[i]))
	}
	return nil
}

// waitBalanced waits, at most balanceWait, for every one of n agents to
// be connected and no daemon of d to hold more than its share by more
// than the daemons' balancer allows (its margin, and a few for this
// tool's own connections, which the daemons count and the load
// generators do not). It returns how long that took.
func (l *loadgens) waitBalanced(ctx context.Context, n, d int) (time.Duration, error) {
	share := (n + d - 1) / d
	limit := share + daemon.BalanceMargin(share) + 8
	t0 := time.Now()
	timeout := time.After(balanceWait)
	for {
		rs, err := l.all(lgRequest{Op: "status"})
		if err != nil {
			return 0, err
		}
		s := sumReplies(rs)
		most := 0
		for i := range d {
			most = max(most, s.PerDaemon[i])
		}
		if s.Down == 0 && most <= limit {
			return time.Since(t0), nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-timeout:
			return 0, fmt.Errorf("after %s the daemons have not rebalanced: %d agents on the busiest (want at most %d), %d without a daemon", balanceWait, most, limit, s.Down)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// balanceWait bounds waitBalanced.
const balanceWait = 10 * time.Minute

// reconnects are the load generators' reconnections, as durations from t0
// (back) and without a daemon (gap).
type reconnects struct {
	back, gap []time.Duration
	last      time.Time // the latest back
}

func collectReconnects(evs []lgReconnect, t0 time.Time, keep func(lgReconnect) bool) reconnects {
	var r reconnects
	for _, ev := range evs {
		if !keep(ev) {
			continue
		}
		b := time.Unix(0, ev.Back)
		r.back = append(r.back, b.Sub(t0))
		r.gap = append(r.gap, time.Duration(ev.Back-ev.Drop))
		if b.After(r.last) {
			r.last = b
		}
	}
	return r
}

// waitBack waits until the load generators report back reconnections
// made and no agent without a daemon, or ctx or 10 minutes end.
func (l *loadgens) waitBack(ctx context.Context, back int64, exited ...chan struct{}) (lgReply, error) {
	return l.waitBackWhen(ctx, back, nil, exited...)
}

// waitBackWhen is waitBack that also waits for done (nil: nothing more)
// to hold of the load generators' status.
func (l *loadgens) waitBackWhen(ctx context.Context, back int64, done func(lgReply) bool, exited ...chan struct{}) (lgReply, error) {
	timeout := time.After(10 * time.Minute)
	for {
		rs, err := l.all(lgRequest{Op: "status"})
		if err != nil {
			return lgReply{}, err
		}
		s := sumReplies(rs)
		if s.Back >= back && s.Down == 0 && (done == nil || done(s)) {
			return s, nil
		}
		for _, ch := range exited {
			select {
			case <-ch:
				return s, errors.New("a restarted daemon exited")
			default:
			}
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-timeout:
			if rs, err := l.all(lgRequest{Op: "status", Sched: true}); err == nil {
				s = sumReplies(rs)
			}
			return s, fmt.Errorf("after 10 minutes %d agents are without a daemon (%d reconnections made, at least %d wanted; the agents' connections ended: %s; "+
				"the load generators' goroutines' waits to run: %s)", s.Down, s.Back, back, s.Ends.describe(), figuresOf(s.Sched))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func runFailoverSpread(ctx context.Context, e *env, n int) (*values, error) {
	d := len(e.targets)
	k := e.o.connsWatchers()
	ms, lg, err := e.spreadSetup(ctx, n*d)
	if err != nil {
		return nil, err
	}
	if err := e.fix.conns(ctx); err != nil {
		return nil, err
	}
	last := d - 1 // the first holds the fixture's connections
	victim := e.targets[last]
	if victim.cmd == nil {
		e.o.progress.set("failover: starting the killed daemon again")
		if err := victim.start(ctx); err != nil {
			return nil, fmt.Errorf("restart the killed daemon: %w", err)
		}
	}
	e.o.progress.set(fmt.Sprintf("failover: connecting %d agents x %d watchers from %d load generators", n*d, k, len(lg.procs)))
	if err := lg.connectWatching(ms, k, e.o.resume); err != nil {
		return nil, err
	}
	defer lg.closeAgents()
	if _, err := lg.all(lgRequest{Op: "arm"}); err != nil {
		return nil, err
	}
	victims := 0
	for i := range ms {
		if i%d == last {
			victims++
		}
	}
	// Changes go on through the first daemon while the victim's agents
	// move: each of its watchers must see every one of them, in a Next or
	// in the first event of its watcher opened again.
	run := newWatchRun()
	var issuedN, failed atomic.Int64
	stop := make(chan struct{})
	var dwg sync.WaitGroup
	dwg.Add(1)
	go func() {
		defer dwg.Done()
		run.drive(ctx, stop, e.o.rate, 10*time.Minute, ms, func(int) *client.Conn { return e.fix.admin }, &issuedN, &failed)
	}()
	stopDriver := func() {
		if stop != nil {
			close(stop)
			stop = nil
			dwg.Wait()
		}
	}
	defer stopDriver()
	survivors := e.targets[:last]
	hist0, err := scrapeResumes(survivors)
	if err != nil {
		return nil, err
	}
	e.o.progress.set(fmt.Sprintf("failover: killing daemon %d of %d under %d agents each", d, d, n))
	victim.foldEnds()
	ticks0 := readCPUTicks()
	t0 := time.Now()
	if err := victim.kill(); err != nil {
		return nil, err
	}
	if _, err := lg.waitBack(ctx, int64(victims)); err != nil {
		return nil, e.withDaemonEnds(err)
	}
	stolen := readCPUTicks().stolenSince(ticks0)
	hist1, err := scrapeResumes(survivors)
	if err != nil {
		return nil, err
	}
	after := newValues() // the survivors: the killed daemon stays down
	if err := lg.setAgentsOn(after, seq(last)); err != nil {
		return nil, err
	}
	stopDriver()
	if err := lg.waitDeliveries(ctx, run.expectedDeliveries(k), e.o.settle); err != nil {
		return nil, err
	}
	evr, err := lg.all(lgRequest{Op: "results"})
	if err != nil {
		return nil, err
	}
	dels, err := lg.all(lgRequest{Op: "results"})
	if err != nil {
		return nil, err
	}
	evs, got := sumReplies(evr), sumReplies(dels)
	moved := collectReconnects(evs.Events, t0, func(ev lgReconnect) bool { return ev.From == last })
	dropped := len(evs.Events) - len(moved.back)
	ws := tally(run, ms, k, got.Delivered)
	run.reportFailures(e, n)
	v := newValues()
	v.set("agents moved", "", float64(len(moved.back)))
	v.set("all back", "s", moved.last.Sub(t0).Seconds())
	v.set("agent back p50", "s", percentile(moved.back, 50).Seconds())
	v.set("agent back p99", "s", percentile(moved.back, 99).Seconds())
	v.set("longest without a daemon", "s", percentile(moved.gap, 100).Seconds())
	v.set("logins/s", "", float64(len(moved.back))/max(moved.last.Sub(t0), time.Millisecond).Seconds())
	setConnect(v, "", evs)
	v.set("survivors dropped", "", float64(dropped))
	v.set("changes during the failover", "", float64(issuedN.Load()-failed.Load()))
	v.set("events caught up by a watcher opened again", "", float64(ws.rewatched))
	v.set("lost", "", float64(ws.lost))
	v.set("duplicates", "", float64(got.Duplicates))
	v.set("failed writes", "", float64(failed.Load()))
	moves := float64(max(1, len(moved.back)))
	v.set("watch calls resumed", "", float64(got.Resumed))
	v.set("watch calls reset (then afresh)", "", float64(got.Reset))
	v.set("watch call response bytes/agent, first", "B", float64(got.FirstBytes)/float64(len(ms)))
	v.set("watch call response bytes/agent, after the failover", "B", float64(got.RewatchBytes)/moves)
	replays := hist1[histResumes] - hist0[histResumes]
	v.set("resumed watchers that replayed the history", "", replays)
	v.set("  of which from the daemon's recent history (no store read)", "", hist1[histShared]-hist0[histShared])
	for _, f := range []struct{ name, metric string }{
		{"history reads of the store", histReads}, {"history records read", histRecords}, {"history bytes read", histBytes},
	} {
		dv := hist1[f.metric] - hist0[f.metric]
		v.set(f.name, "", dv)
		v.set(f.name+" per resumed watcher", "", dv/max(1, replays))
	}
	if !math.IsNaN(stolen) {
		v.set("CPU stolen by the host", "%", stolen)
	}
	v.merge(after)
	e.setConnEnds(v)
	return v, nil
}

// seq is 0..n-1.
func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// The daemons' counters of what resumed watchers read of the history
// (state.ResumeStats).
const (
	histResumes = "provisiond_history_resumes_total"
	histReads   = "provisiond_history_reads_total"
	histRecords = "provisiond_history_read_records_total"
	histBytes   = "provisiond_history_read_bytes_total"
	histShared  = "provisiond_history_resumes_shared_total"
)

// scrapeResumes sums the history counters of resumed watchers over ts.
func scrapeResumes(ts []*target) (map[string]float64, error) {
	sum := map[string]float64{}
	for _, t := range ts {
		// A daemon busy with a failover may take a while to answer.
		var m map[string]float64
		var err error
		for range 5 {
			if m, err = t.scrapeSeries([]string{histResumes, histShared, histReads, histRecords, histBytes}); err == nil {
				break
			}
		}
		if err != nil {
			return nil, err
		}
		for k, v := range m {
			sum[k] += v
		}
	}
	return sum, nil
}

func runStormSpread(ctx context.Context, e *env, n int) (*values, error) {
	if e.t.mode == modeExternal {
		return nil, fmt.Errorf("storm restarts the daemons: let the tool start them (no --credentials)")
	}
	k := e.o.connsWatchers()
	ms, lg, err := e.spreadSetup(ctx, n)
	if err != nil {
		return nil, err
	}
	e.o.progress.set(fmt.Sprintf("storm: connecting %d agents x %d watchers from %d load generators", n, k, len(lg.procs)))
	if err := lg.connectWatching(ms, k, false); err != nil {
		return nil, err
	}
	defer lg.closeAgents()
	if _, err := lg.all(lgRequest{Op: "arm"}); err != nil {
		return nil, err
	}
	if e.o.rolling {
		return rollingStorm(ctx, e, lg, n)
	}
	// Every daemon stops (SIGTERM) and starts again at once.
	e.o.progress.set(fmt.Sprintf("storm: restarting %d daemons under %d agents", len(e.targets), n))
	for _, t := range e.targets {
		t.foldEnds()
	}
	scpu := startStormCPU(lg.pids(), e.etcdPID())
	ticks0 := readCPUTicks()
	t0 := time.Now()
	var wg sync.WaitGroup
	for _, t := range e.targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := time.Now()
			if err := t.stop(); err != nil {
				fmt.Fprintf(e.o.stderr, "provisionbench: daemon stop: %v\n", err)
			}
			t.lastStop = time.Since(s)
		}()
	}
	wg.Wait()
	stopping := time.Since(t0)
	hws := make([]*healthProc, len(e.targets))
	defer func() {
		for _, hw := range hws {
			if hw != nil {
				_, _ = hw.finish()
			}
		}
	}()
	var exited []chan struct{}
	for i, t := range e.targets {
		hw, err := t.watchHealth(ctx)
		if err != nil {
			return nil, err
		}
		hws[i] = hw
		if err := t.startWaiting(ctx, false); err != nil {
			return nil, err
		}
		exited = append(exited, t.exited)
	}
	if _, err := lg.waitBack(ctx, int64(n), exited...); err != nil {
		return nil, e.withDaemonEnds(err)
	}
	stolen := readCPUTicks().stolenSince(ticks0)
	cpu := newValues()
	scpu.set(cpu, e.daemonPIDs(), n)
	v := newValues()
	after := newValues()
	if err := lg.setAgentsOn(after, seq(len(e.targets))); err != nil {
		return nil, err
	}
	var ready, afterListening, slowest time.Duration
	failed := 0
	for i, hw := range hws {
		hws[i] = nil
		hf, err := hw.finish()
		if err != nil {
			return nil, err
		}
		if hf.firstOK.IsZero() || hf.listening.IsZero() {
			return nil, fmt.Errorf("daemon %d: its /health never answered 200 after the restart", i+1)
		}
		ready = max(ready, hf.firstOK.Sub(t0))
		afterListening = max(afterListening, hf.firstOK.Sub(hf.listening))
		slowest = max(slowest, hf.maxProbe)
		failed += hf.failed
	}
	evr, err := lg.all(lgRequest{Op: "results"})
	if err != nil {
		return nil, err
	}
	evs := sumReplies(evr)
	r := collectReconnects(evs.Events, t0, func(lgReconnect) bool { return true })
	v.set("daemons restarted", "", float64(len(e.targets)))
	v.set("all daemons ready", "s", ready.Seconds())
	v.set("  of which stopping", "s", stopping.Seconds())
	v.set("/health after listening, slowest daemon", "s", afterListening.Seconds())
	v.set("/health slowest during the storm", "s", slowest.Seconds())
	v.set("/health probes failed", "", float64(failed))
	v.set("all back", "s", r.last.Sub(t0).Seconds())
	v.set("all back after ready", "s", (r.last.Sub(t0) - ready).Seconds())
	v.set("agent back p50", "s", percentile(r.back, 50).Seconds())
	v.set("agent back p99", "s", percentile(r.back, 99).Seconds())
	v.set("longest without a daemon", "s", percentile(r.gap, 100).Seconds())
	v.set("reconnections", "", float64(len(r.back)))
	v.set("logins/s after ready", "", float64(n)/max(r.last.Sub(t0)-ready, time.Millisecond).Seconds())
	setConnect(v, "", evs)
	if !math.IsNaN(stolen) {
		v.set("CPU stolen by the host", "%", stolen)
	}
	v.merge(cpu)
	v.merge(after)
	if evs.LastOther != "" {
		fmt.Fprintf(e.o.stderr, "provisionbench: storm: last other error: %s\n", evs.LastOther)
	}
	e.setConnEnds(v)
	return v, nil
}

// rollingStorm restarts the daemons one at a time: each stops (SIGTERM),
// its agents move to the others, it starts again and serves, then the
// next. The figure is the longest any agent was without a daemon.
func rollingStorm(ctx context.Context, e *env, lg *loadgens, n int) (*values, error) {
	ticks0 := readCPUTicks()
	t0 := time.Now()
	v := newValues()
	var afterListening time.Duration
	moved := int64(0)
	for i, t := range e.targets {
		sts, err := lg.all(lgRequest{Op: "status"})
		if err != nil {
			return nil, err
		}
		on := sumReplies(sts).PerDaemon[i]
		e.o.progress.set(fmt.Sprintf("storm --rolling: restarting daemon %d of %d (%d agents on it)", i+1, len(e.targets), on))
		t.foldEnds()
		ti := time.Now()
		if err := t.stop(); err != nil {
			fmt.Fprintf(e.o.stderr, "provisionbench: daemon stop: %v\n", err)
		}
		moved += int64(on)
		// Every agent connected, none on the stopped daemon: with the
		// daemons rebalancing, the reconnections counted (back) include
		// agents handed from one live daemon to another.
		if _, err := lg.waitBackWhen(ctx, moved, func(s lgReply) bool { return s.PerDaemon[i] == 0 }); err != nil {
			return nil, e.withDaemonEnds(fmt.Errorf("daemon %d's agents: %w", i+1, err))
		}
		hw, err := t.watchHealth(ctx)
		if err != nil {
			return nil, err
		}
		if err := t.startWaiting(ctx, false); err != nil {
			_, _ = hw.finish()
			return nil, err
		}
		hf, err := hw.finish()
		if err != nil {
			return nil, err
		}
		if hf.firstOK.IsZero() || hf.listening.IsZero() {
			return nil, fmt.Errorf("daemon %d: its /health never answered 200 after the restart", i+1)
		}
		afterListening = max(afterListening, hf.firstOK.Sub(hf.listening))
		v.set(fmt.Sprintf("daemon %d: agents moved", i+1), "", float64(on))
		v.set(fmt.Sprintf("daemon %d: stopped, agents moved and restarted", i+1), "s", hf.firstOK.Sub(ti).Seconds())
	}
	total := time.Since(t0)
	if e.o.rebalance && len(e.targets) > 1 {
		// The daemons hand agents to the one restarted last, which
		// starts with none, until each holds its share within the
		// balancer's margin (internal/daemon's balance.go).
		e.o.progress.set("storm --rolling: waiting for the daemons to rebalance")
		took, err := lg.waitBalanced(ctx, n, len(e.targets))
		if err != nil {
			return nil, err
		}
		v.set("rebalanced, from the last restart", "s", took.Seconds())
	}
	stolen := readCPUTicks().stolenSince(ticks0)
	after := newValues()
	if err := lg.setAgentsOn(after, seq(len(e.targets))); err != nil {
		return nil, err
	}
	evr, err := lg.all(lgRequest{Op: "results"})
	if err != nil {
		return nil, err
	}
	evs := sumReplies(evr)
	r := collectReconnects(evs.Events, t0, func(lgReconnect) bool { return true })
	gaps := slices.Clone(r.gap)
	v.set("rolling restart", "s", total.Seconds())
	v.set("reconnections", "", float64(len(gaps)))
	v.set("longest without a daemon", "s", percentile(gaps, 100).Seconds())
	v.set("without a daemon p99", "s", percentile(gaps, 99).Seconds())
	v.set("without a daemon p50", "s", percentile(gaps, 50).Seconds())
	v.set("/health after listening, slowest daemon", "s", afterListening.Seconds())
	setConnect(v, "", evs)
	if !math.IsNaN(stolen) {
		v.set("CPU stolen by the host", "%", stolen)
	}
	v.merge(after)
	e.setConnEnds(v)
	return v, nil
}
