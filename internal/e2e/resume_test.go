package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/agent"
	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// watchLog is what the reference agent's watchers delivered, as its
// Observe reports them (agent.EventWatched).
type watchLog struct {
	mu     sync.Mutex
	events []agent.Event
	times  []time.Time
}

func (l *watchLog) observe(ev agent.Event) {
	if ev.Kind != agent.EventWatched {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
	l.times = append(l.times, time.Now())
}

// of returns the events of watch method (of model, when not "") since
// event i, with their times.
func (l *watchLog) of(method, model string, i int) ([]agent.Event, []time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var evs []agent.Event
	var ts []time.Time
	for k := i; k < len(l.events); k++ {
		if ev := l.events[k]; ev.Watch == method && (model == "" || ev.Model == model) {
			evs = append(evs, ev)
			ts = append(ts, l.times[k])
		}
	}
	return evs, ts
}

func (l *watchLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.events)
}

// startAgent runs the reference agent on addrs (tried in turn at each
// reconnection) until the test ends.
func startAgent(t *testing.T, creds *credentials.Credentials, addrs []string, log *watchLog) {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("agent", true)
	}
	stop, err := agent.Start(agent.Config{
		Credentials: creds, Addrs: addrs, Logger: logger, Observe: log.observe,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
}

// machineAdder adds one machine at a time to the default model until
// stopped, keeping the ids acknowledged, in order.
type machineAdder struct {
	mu    sync.Mutex
	added []string
	stop  chan struct{}
	done  chan error
}

func addMachinesUntilStopped(ctx context.Context, c *client.Conn) *machineAdder {
	a := &machineAdder{stop: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		for {
			select {
			case <-a.stop:
				a.done <- nil
				return
			default:
			}
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			res, err := client.NewModelAdmin(c).AddMachines(cctx, params.AddMachinesArgs{Count: 1})
			cancel()
			if err != nil {
				a.done <- err
				return
			}
			a.mu.Lock()
			a.added = append(a.added, res.Machines...)
			a.mu.Unlock()
		}
	}()
	return a
}

func (a *machineAdder) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.added)
}

// finish stops the adder and returns the ids added; connLost says its
// daemon was killed under it (the connection's end is its end).
func (a *machineAdder) finish(t *testing.T, connLost bool) []string {
	t.Helper()
	close(a.stop)
	if err := <-a.done; err != nil && !(connLost && errors.Is(err, client.ErrConnClosed)) {
		t.Fatalf("adding machines: %v", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.added)
}

// allMachines lists the default model's machines through addr: the
// initial event of a fresh watch of them (a machine whose AddMachines a
// kill left unanswered may be there too).
func allMachines(t *testing.T, creds *credentials.Credentials, addr string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	c, err := dial(ctx, creds, addr, true, creds.DefaultModelUUID)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var res params.StringsWatchResult
	if err := c.Call(ctx, "Provisioner", 11, "", "WatchModelMachines", nil, &res); err != nil {
		t.Fatal(err)
	}
	return res.Changes
}

// waitDelivered waits until the agent's machines' watch has delivered as
// many ids as there are machines.
func waitDelivered(t *testing.T, log *watchLog, model string, machines []string) {
	t.Helper()
	waitFor(t, "the agent to deliver every machine", func() bool {
		evs, _ := log.of("WatchModelMachines", model, 0)
		got := 0
		for _, ev := range evs {
			got += len(ev.IDs)
		}
		return got >= len(machines)
	})
}

// resumeFigures are what a resume after a daemon's end measures.
type resumeFigures struct {
	firstEvent   time.Duration // from the kill to the first resumed event
	from, to     uint64        // the revisions the resume replayed: (from, to]
	records      int           // history records in (from, to] (commits with changes)
	changed      int           // ids the resumed initial event listed
	resumedKinds []string      // watch methods whose Watch call resumed after the kill
}

// checkDeliveredOnce checks the events of the agent's WatchModelMachines
// since the first: each machine added is delivered exactly once, none
// else, in the order of the revisions that added them (one event's ids
// all before the next's); after the kill no Watch call opened afresh and
// one resumed.
func checkDeliveredOnce(t *testing.T, log *watchLog, model string, added []string, killedAt int) {
	t.Helper()
	evs, _ := log.of("WatchModelMachines", model, 0)
	count := map[string]int{}
	last := -1
	for k, ev := range evs {
		lo, hi := -1, -1
		for _, id := range ev.IDs {
			count[id]++
			n, err := strconv.Atoi(id)
			if err != nil {
				t.Fatalf("event %d: id %q is no top-level machine", k, id)
			}
			if lo < 0 || n < lo {
				lo = n
			}
			hi = max(hi, n)
		}
		if len(ev.IDs) > 0 {
			if lo <= last {
				t.Errorf("event %d (%v, revision %d) delivers machine %d after machine %d was delivered", k, ev.IDs, ev.Revision, lo, last)
			}
			last = hi
		}
	}
	for _, id := range added {
		if count[id] != 1 {
			t.Errorf("machine %s delivered %d times; want exactly once", id, count[id])
		}
		delete(count, id)
	}
	if len(count) > 0 {
		t.Errorf("delivered machines never added: %v", count)
	}
	after, _ := log.of("WatchModelMachines", model, killedAt)
	var resumed int
	for _, ev := range after {
		if ev.Initial && ev.From == 0 {
			t.Errorf("after the kill the machines' watch was opened afresh (initial event %v)", ev.IDs)
		}
		if ev.Initial && ev.From > 0 {
			resumed++
		}
	}
	if resumed != 1 {
		t.Errorf("the machines' watch resumed %d times after the kill; want once", resumed)
	}
}

// waitContainersResumed waits until the agent of each machine whose
// containers' watch was open before event killedAt has opened it again,
// and checks that it resumed (a machine agent started later watches
// afresh).
func waitContainersResumed(t *testing.T, log *watchLog, killedAt int) {
	t.Helper()
	before, _ := log.of("WatchContainers", "", 0)
	had := map[string]bool{}
	for _, ev := range before {
		had[ev.ID] = true
	}
	log.mu.Lock()
	for _, ev := range log.events[killedAt:] {
		if ev.Watch == "WatchContainers" && ev.Initial && ev.From == 0 {
			delete(had, ev.ID) // started after the kill
		}
	}
	log.mu.Unlock()
	if len(had) == 0 {
		t.Fatal("no machine agent watched its containers before the kill")
	}
	waitFor(t, "every machine agent to watch its containers again", func() bool {
		after, _ := log.of("WatchContainers", "", killedAt)
		again := map[string]bool{}
		for _, ev := range after {
			if ev.Initial && had[ev.ID] {
				if ev.From == 0 {
					t.Fatalf("machine %s's agent watched its containers afresh after the kill", ev.ID)
				}
				again[ev.ID] = true
			}
		}
		return len(again) == len(had)
	})
}

// measureResume reads the figures of the first resumed WatchModelMachines
// after event killedAt, and counts the history records the resume replayed
// through admin (ModelAdmin.History over its span).
func measureResume(t *testing.T, log *watchLog, admin *client.Conn, model string, killedAt int, killed time.Time) resumeFigures {
	t.Helper()
	var f resumeFigures
	evs, ts := log.of("WatchModelMachines", model, killedAt)
	for i, ev := range evs {
		if ev.Initial && ev.From > 0 {
			f.firstEvent, f.from, f.to, f.changed = ts[i].Sub(killed), ev.From, ev.Revision, len(ev.IDs)
			break
		}
	}
	seen := map[string]bool{}
	log.mu.Lock()
	for _, ev := range log.events[killedAt:] {
		if ev.Initial && ev.From > 0 && !seen[ev.Watch] {
			seen[ev.Watch] = true
			f.resumedKinds = append(f.resumedKinds, ev.Watch)
		}
	}
	log.mu.Unlock()
	slices.Sort(f.resumedKinds)
	revs := map[uint64]bool{}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	args := params.HistoryArgs{Since: strconv.FormatUint(f.from+1, 10), Until: strconv.FormatUint(f.to, 10)}
	for {
		res, err := client.NewModelAdmin(admin).History(ctx, args)
		if err != nil {
			t.Fatalf("history of (%d, %d]: %v", f.from, f.to, err)
		}
		for _, c := range res.Changes {
			revs[c.Revision] = true
		}
		if !res.More {
			break
		}
		args.After = res.Next
	}
	f.records = len(revs)
	return f
}

// TestAgentResumesAfterDaemonKill: two daemons on one etcd; the reference
// agent's watchers are on a (its addresses: a, then b); machines are
// added one at a time through b without a pause; a is killed with
// SIGKILL. The agent logs in at b and resumes each of its watchers from
// the revision its events had covered: every machine added is delivered
// by its machines' watch exactly once, in the order they were added, none
// lost and none repeated, and no watch is opened afresh. Measured
// (logged): kill to the first resumed event, the revisions and history
// records the resume replayed, the ids it listed.
func TestAgentResumesAfterDaemonKill(t *testing.T) {
	t.Parallel()
	cluster := etcdtest.New(t)
	eps := cluster.Endpoints()
	a := startDaemon(t, "a", eps, "/resume/")
	b := startDaemon(t, "b", eps, "/resume/")
	creds := a.credentials(t)
	ctx := ctxT(t)

	log, adder := agentUnderWrites(t, ctx, creds, []string{a.addr, b.addr}, b.addr)
	killedAt := log.len()
	a.kill(t)
	killed := time.Now()
	n := adder.count()
	waitFor(t, "10 more machines added after the kill", func() bool { return adder.count() >= n+10 })
	adder.finish(t, false)
	added, f := checkResumed(t, log, creds, b.addr, killedAt, killed)
	if !slices.Contains(f.resumedKinds, "WatchModels") {
		t.Errorf("watches resumed after the kill: %v; want WatchModels among them", f.resumedKinds)
	}
	t.Logf("etcd: %d machines added (%d before the kill); kill to the first resumed event %s; resumed after revision %d up to %d "+
		"(%d revisions, %d history records with changes), listing %d machines; watches resumed: %v",
		len(added), n, f.firstEvent.Round(time.Millisecond), f.from, f.to, f.to-f.from, f.records, f.changed, f.resumedKinds)
}

// agentUnderWrites starts the reference agent on addrs, then adds
// machines one at a time through writeAddr, and returns once 10 are
// added, the agent's machines' watch has delivered some and a machine
// agent watches its containers.
func agentUnderWrites(t *testing.T, ctx context.Context, creds *credentials.Credentials, addrs []string, writeAddr string) (*watchLog, *machineAdder) {
	t.Helper()
	model := creds.DefaultModelUUID
	log := &watchLog{}
	startAgent(t, creds, addrs, log)
	waitFor(t, "the agent's machines' watch", func() bool { evs, _ := log.of("WatchModelMachines", model, 0); return len(evs) > 0 })
	adder := addMachinesUntilStopped(ctx, mustDial(t, creds, writeAddr, false, ""))
	waitFor(t, "10 machines added, the agent's machines' watch to deliver some and a machine agent to watch its containers", func() bool {
		evs, _ := log.of("WatchModelMachines", model, 0)
		cs, _ := log.of("WatchContainers", "", 0)
		return adder.count() >= 10 && len(evs) >= 3 && len(cs) > 0
	})
	return log, adder
}

// checkResumed, once the writes are done, waits until the agent has
// delivered every machine there is (read through addr), checks that each
// was delivered once, in order, and that its watches resumed after event
// killedAt (checkDeliveredOnce, waitContainersResumed), and measures the
// resume. It returns the machines.
func checkResumed(t *testing.T, log *watchLog, creds *credentials.Credentials, addr string, killedAt int, killed time.Time) ([]string, resumeFigures) {
	t.Helper()
	model := creds.DefaultModelUUID
	added := allMachines(t, creds, addr)
	waitDelivered(t, log, model, added)
	checkDeliveredOnce(t, log, model, added, killedAt)
	waitContainersResumed(t, log, killedAt)
	return added, measureResume(t, log, mustDial(t, creds, addr, false, ""), model, killedAt, killed)
}

// restartServe starts the bbolt daemon p was on its data dir and address
// again, and waits for it to serve.
func restartServe(t *testing.T, p *daemonProc) *daemonProc {
	t.Helper()
	q := spawnServe(t, p.name+"-again", "--addr", p.addr, "--data-dir", p.dataDir)
	if err := q.waitServing(); err != nil {
		t.Fatal(err)
	}
	return q
}

// TestAgentResumesAfterBoltDaemonRestart: one daemon on bbolt; the
// reference agent's watchers are on it; machines are added; the daemon
// is killed with SIGKILL and started again on its file and address, and
// machines are added while the agent reconnects. The agent resumes each
// of its watchers: every machine is delivered by its machines' watch
// exactly once, in the order added, and no watch is opened afresh.
func TestAgentResumesAfterBoltDaemonRestart(t *testing.T) {
	t.Parallel()
	d := startBoltDaemon(t, "bolt")
	creds := d.credentials(t)
	ctx := ctxT(t)

	log, before := agentUnderWrites(t, ctx, creds, []string{d.addr}, d.addr)
	killedAt := log.len()
	d.kill(t)
	killed := time.Now()
	first := before.finish(t, true)
	d2 := restartServe(t, d)
	later := addMachinesUntilStopped(ctx, mustDial(t, creds, d2.addr, false, ""))
	waitFor(t, "10 machines added after the restart", func() bool { return later.count() >= 10 })
	later.finish(t, false)
	added, f := checkResumed(t, log, creds, d2.addr, killedAt, killed)
	t.Logf("bbolt: %d machines added (%d before the kill); kill to the first resumed event %s (the restart included); "+
		"resumed after revision %d up to %d (%d history records with changes), listing %d machines; watches resumed: %v",
		len(added), len(first), f.firstEvent.Round(time.Millisecond), f.from, f.to, f.records, f.changed, f.resumedKinds)
}

// TestResumeCost: what one watch's resume costs against the full re-read
// it replaces, on a model of 1000 machines with 10 changed since the
// revision resumed from: the reply to the Watch call, and the reads the
// agent makes of the ids it lists (Life and InstanceId of each, as the
// reference agent's provisioner does), in calls and response bytes (the
// JSON of the results). Logged, not asserted.
func TestResumeCost(t *testing.T) {
	t.Parallel()
	d := startBoltDaemon(t, "cost")
	creds := d.credentials(t)
	model := creds.DefaultModelUUID
	ctx := ctxT(t)
	admin := mustDial(t, creds, d.addr, false, "")
	ctrl := mustDial(t, creds, d.addr, true, model)
	for range 10 {
		addMachines(t, admin, 100)
	}
	var res params.StringsWatchResult
	from, err := ctrl.CallFrom(ctx, "Provisioner", 11, "", "WatchModelMachines", 0, nil, &res)
	if err != nil || from == 0 {
		t.Fatalf("watch: revision %d, %v", from, err)
	}
	addMachines(t, admin, 10)
	cost := func(from uint64) (calls, bytes int, ids int) {
		var res params.StringsWatchResult
		if _, err := ctrl.CallFrom(ctx, "Provisioner", 11, "", "WatchModelMachines", from, nil, &res); err != nil {
			t.Fatal(err)
		}
		size := func(v any) int {
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			return len(b)
		}
		bytes, calls = size(res), 1
		tags := make([]params.Entity, len(res.Changes))
		for i, id := range res.Changes {
			tags[i] = params.Entity{Tag: "machine-" + id}
		}
		for _, method := range []string{"Life", "InstanceId"} {
			var out json.RawMessage
			if err := ctrl.Call(ctx, "Provisioner", 11, "", method, params.Entities{Entities: tags}, &out); err != nil {
				t.Fatal(err)
			}
			calls++
			bytes += len(out)
		}
		return calls, bytes, len(res.Changes)
	}
	fullCalls, fullBytes, fullIDs := cost(0)
	resCalls, resBytes, resIDs := cost(from)
	if resIDs != 10 || fullIDs != 1010 {
		t.Fatalf("full re-read listed %d machines, resume %d; want 1010 and 10", fullIDs, resIDs)
	}
	t.Logf("one watch of 1010 machines, 10 changed: full re-read %d calls, %d response bytes (%d ids); resumed %d calls, %d bytes (%d ids)",
		fullCalls, fullBytes, fullIDs, resCalls, resBytes, resIDs)
}
