package robustness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/provisiond/provisiond/internal/robustness/checker"
)

// Fault kinds.
const (
	FaultKillLeader    = "kill-leader"    // SIGKILL of the etcd leader, restarted on its data
	FaultKillFollower  = "kill-follower"  // the same of a follower
	FaultPauseLeader   = "pause-leader"   // SIGSTOP of the etcd leader, SIGCONT later
	FaultPauseFollower = "pause-follower" // the same of a follower
	FaultKillDaemon    = "kill-daemon"    // SIGKILL of a daemon, restarted on its data dir
	FaultPauseDaemon   = "pause-daemon"   // SIGSTOP of a daemon (at times past its lease), SIGCONT later
	FaultPartition     = "partition"      // a daemon cut off from every member (netns.go or etcdtest.Proxy), healed later
	FaultResetLinks    = "reset-links"    // a daemon's connections to every member closed at once (etcdtest.Proxy): its etcd watch starts again
	FaultCompact       = checker.FaultCompact
	// FaultCrashAt is the prefix of a crash at a failpoint: a daemon
	// restarted with PROVISIOND_FAILPOINTS=POINT=crash dies at the
	// point's next pass (or is killed after the hold), then starts again
	// without it. Only with Config.Failpoints.
	FaultCrashAt = "crash-at-"
)

// crashPoints are the failpoints a crash fault picks from: a write about
// to be sent, a write committed and not answered, a change set about to
// reach the watchers, the replica about to catch up after its watch broke
// (the harness then closes the daemon's connections to etcd, to break it).
var crashPoints = []string{"store/commit", "store/reply", "feed/apply", "replica/catch-up"}

// FaultKinds are drawn from uniformly (Config.FaultKinds narrows them).
var FaultKinds = []string{FaultKillLeader, FaultKillFollower, FaultPauseLeader, FaultPauseFollower,
	FaultKillDaemon, FaultPauseDaemon, FaultPartition, FaultResetLinks, FaultCompact}

// recoveryWait bounds how long the injector waits for the workload's
// first acknowledged write after a fault is healed.
const recoveryWait = 30 * time.Second

// injectFaults injects faults one after another until ctx ends: the
// kinds, targets (but for which member leads), the gaps and how long
// each lasts are drawn from the seed, so a seed replays its schedule.
// Each fault is healed before the next; then the injector waits until
// a write is acknowledged again, which is the fault's recovery time.
func (h *harness) injectFaults(ctx context.Context) error {
	rng := newRand(h.cfg.Seed, 1)
	for {
		gap := time.Duration(500+rng.IntN(1500)) * time.Millisecond
		kinds := FaultKinds
		if len(h.cfg.FaultKinds) > 0 {
			kinds = h.cfg.FaultKinds
		} else if h.cfg.Failpoints {
			kinds = append(slices.Clone(FaultKinds), FaultCrashAt)
		}
		kind := kinds[rng.IntN(len(kinds))]
		if kind == FaultCrashAt {
			kind += crashPoints[rng.IntN(len(crashPoints))]
		}
		hold := time.Duration(500+rng.IntN(3000)) * time.Millisecond
		pick := rng.IntN(1 << 20)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(gap):
		}
		f, err := h.inject(ctx, kind, hold, pick)
		if err != nil {
			if ctx.Err() != nil {
				return nil // the run ended under it: healAll undoes what is left
			}
			return fmt.Errorf("fault %s: %w", kind, err)
		}
		h.rec.fault(f)
		healed := max(f.Healed, f.At)
		h.logf("robustness: %s %s at %s, held %s", f.Kind, f.Target,
			time.Duration(f.At).Round(time.Millisecond), time.Duration(healed-f.At).Round(time.Millisecond))
		// The next fault comes once a write is acknowledged again (the
		// recovery time itself is taken from the history: recoveries).
		deadline := time.Now().Add(recoveryWait)
		for h.lastAck.Load() <= healed && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// inject applies one fault and heals it after hold (at once if ctx, the
// run, ends meanwhile; the healing itself is not cut short by it).
func (h *harness) inject(ctx context.Context, kind string, hold time.Duration, pick int) (checker.Fault, error) {
	f := checker.Fault{Kind: kind}
	heal := context.WithoutCancel(ctx) // bounded by each step's own timeout
	wait := func() {
		select {
		case <-ctx.Done():
		case <-time.After(hold):
		}
	}
	switch kind {
	case FaultKillLeader, FaultKillFollower, FaultPauseLeader, FaultPauseFollower:
		i, err := h.member(ctx, kind == FaultKillLeader || kind == FaultPauseLeader, pick)
		if err != nil {
			return f, err
		}
		f.Target = h.etcd.Members()[i].Name
		f.At = h.now()
		if kind == FaultKillLeader || kind == FaultKillFollower {
			h.etcd.Stop(i)
			wait()
			f.Healed = h.now()
			return f, h.etcd.Restart(i)
		}
		if err := h.etcd.Pause(i); err != nil {
			return f, err
		}
		wait()
		f.Healed = h.now()
		return f, h.etcd.Resume(i)
	case FaultKillDaemon, FaultPauseDaemon:
		d := h.daemons[pick%len(h.daemons)]
		f.Target, f.Daemon = d.name, d.name
		p := d.process()
		f.At = h.now()
		if kind == FaultKillDaemon {
			d.mu.Lock()
			d.proc = nil
			d.mu.Unlock()
			if err := p.Kill(); err != nil {
				return f, err
			}
			wait()
			f.Healed = h.now()
			return f, h.startDaemon(heal, d)
		}
		d.mu.Lock()
		d.paused = true
		d.mu.Unlock()
		if err := p.Signal(syscall.SIGSTOP); err != nil {
			return f, err
		}
		wait()
		f.Healed = h.now()
		d.mu.Lock()
		d.paused = false
		d.mu.Unlock()
		return f, p.Signal(syscall.SIGCONT)
	case FaultCrashAt + "store/commit", FaultCrashAt + "store/reply", FaultCrashAt + "feed/apply", FaultCrashAt + "replica/catch-up":
		d := h.daemons[pick%len(h.daemons)]
		f.Target, f.Daemon = d.name, d.name
		return f, h.crashAt(ctx, heal, d, strings.TrimPrefix(kind, FaultCrashAt), hold, &f)
	case FaultPartition:
		d := h.daemons[pick%len(h.daemons)]
		f.Target, f.Daemon = d.name, d.name
		f.At = h.now()
		if err := d.partition(true); err != nil {
			return f, err
		}
		wait()
		f.Healed = h.now()
		return f, d.partition(false)
	case FaultResetLinks:
		d := h.daemons[pick%len(h.daemons)]
		f.Target, f.Daemon = d.name, d.name
		f.At = h.now()
		d.resetLinks()
		return f, nil
	case FaultCompact:
		f.Target = "etcd"
		f.At = h.now()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := h.etcd.Compact(cctx); err != nil && ctx.Err() == nil {
			return f, err
		}
		return f, nil
	}
	return f, errors.New("unknown fault kind")
}

// member picks the leader, or a follower (pick chooses which).
func (h *harness) member(ctx context.Context, leader bool, pick int) (int, error) {
	lctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	l, err := h.etcd.Leader(lctx)
	if err != nil || leader {
		return l, err
	}
	n := len(h.etcd.Members())
	return (l + 1 + pick%(n-1)) % n, nil
}

// healAll undoes whatever a fault left (a run ending in the middle of
// one): every member and daemon running and none paused.
func (h *harness) healAll(ctx context.Context) error {
	var errs []error
	for i := range h.etcd.Members() {
		_ = h.etcd.Resume(i)
		if !h.etcd.Running(i) {
			errs = append(errs, h.etcd.Restart(i))
		}
	}
	for _, d := range h.daemons {
		errs = append(errs, d.partition(false))
		d.mu.Lock()
		p, paused := d.proc, d.paused
		d.paused = false
		d.mu.Unlock()
		switch {
		case p == nil:
			errs = append(errs, h.startDaemon(ctx, d))
		case paused:
			errs = append(errs, p.Signal(syscall.SIGCONT))
		}
	}
	return errors.Join(errs...)
}

// crashAt restarts d with a crash at failpoint point, waits (up to hold
// after it serves) for it to die there, kills it if it has not, and
// starts it again without the failpoint.
func (h *harness) crashAt(ctx, heal context.Context, d *daemon, point string, hold time.Duration, f *checker.Fault) error {
	d.mu.Lock()
	p := d.proc
	d.proc = nil
	d.mu.Unlock()
	if err := p.Kill(); err != nil {
		return err
	}
	f.At = h.now()
	fp, err := h.spawnDaemon(d, []string{"PROVISIOND_FAILPOINTS=" + point + "=crash"})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(startTimeout)
	served := false
	for !fp.Exited() && time.Now().Before(deadline) && ctx.Err() == nil {
		if !served {
			sctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			_, err := fp.WaitServing(sctx)
			cancel()
			if err == nil {
				served, deadline = true, time.Now().Add(hold)
				if point == "replica/catch-up" {
					d.resetLinks() // the watch breaks: the replica catches up
				}
			}
			continue
		}
		time.Sleep(20 * time.Millisecond)
	}
	crashed := fp.Exited()
	if err := fp.Kill(); err != nil {
		return err
	}
	f.Healed = h.now()
	if !crashed {
		f.Target += " (killed: the point was not reached)"
	}
	return h.startDaemon(heal, d)
}

// recoveries sets each fault's recovery time from the history: after a
// fault of a daemon, until it first answered after the fault was healed
// (an operation, or its watcher's Next or Watch: the watcher stays on
// that daemon, and delivers as soon as its feed moves, whoever writes);
// after any other, until the first write acknowledged after it was
// healed (or, for a compaction, made).
func recoveries(hist *checker.History) {
	var acks []int64
	byDaemon := map[string][]int64{}
	for _, op := range hist.Ops {
		if op.Outcome != checker.OK {
			continue
		}
		byDaemon[op.Daemon] = append(byDaemon[op.Daemon], op.Return)
		if op.Write {
			acks = append(acks, op.Return)
		}
	}
	for _, st := range hist.Streams {
		byDaemon[st.Daemon] = append(byDaemon[st.Daemon], st.Started)
		for _, d := range st.Deliveries {
			byDaemon[st.Daemon] = append(byDaemon[st.Daemon], d.Recv)
		}
	}
	slices.Sort(acks)
	for _, ts := range byDaemon {
		slices.Sort(ts)
	}
	for i := range hist.Faults {
		f := &hist.Faults[i]
		healed := max(f.Healed, f.At)
		ts := acks
		if f.Daemon != "" {
			ts = byDaemon[f.Daemon]
		}
		if j, _ := slices.BinarySearch(ts, healed+1); j < len(ts) {
			f.Recovery = ts[j] - healed
		}
	}
}
