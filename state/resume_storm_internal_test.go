package state

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/etcdstore"
	"github.com/provisiond/provisiond/watcher"
)

// TestResumeStormTiming is a diagnostic, run only with
// PROVISIOND_RESUME_STORM=agents,watchers,writers (e.g. 300,10,1): on a
// real etcd, that many agents each resume that many WatchModelMachines
// one after another, all at once, while writers add machines without a
// pause; it logs where the resumed Watch calls spent their time.
func TestResumeStormTiming(t *testing.T) {
	spec := os.Getenv("PROVISIOND_RESUME_STORM")
	if spec == "" {
		t.Skip("PROVISIOND_RESUME_STORM not set")
	}
	var agents, per, writers int
	if _, err := fmt.Sscanf(spec, "%d,%d,%d", &agents, &per, &writers); err != nil {
		t.Fatal(err)
	}
	c, err := etcdtest.Start(etcdtest.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hub := watcher.NewHub()
	ctx0, cancel0 := context.WithTimeout(context.Background(), 30*time.Second)
	s, err := etcdstore.Open(ctx0, etcdstore.Config{Endpoints: c.Endpoints(), Prefix: "/storm/", Feed: Feed(hub, nil),
		MaxTxnOps: c.MaxTxnOps(), MaxRequestBytes: c.MaxRequestBytes(), RequestTimeout: 10 * time.Second, LeaseTTL: 2 * time.Second})
	cancel0()
	if err != nil {
		t.Fatal(err)
	}
	var ss store.Store = s
	if os.Getenv("PROVISIOND_RESUME_STORM_NORECENT") != "" {
		ss = struct {
			store.Store
			store.Historian
		}{s, s} // no RecentHistorian: the window reads the store only
	}
	st, err := Open(ss, Options{Hub: hub})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	res, err := st.Initialize(t.Context(), InitArgs{AdminPassword: "pw", AgentPassword: "agent-password-long-enough", AgentNonce: "n"})
	if err != nil {
		t.Fatal(err)
	}
	model := res.DefaultModelUUID
	for range 20 {
		must[Machine](t)(st.AddMachine(t.Context(), model, MachineParams{}))
	}
	from := st.store.Revision()

	type agg struct {
		n   int
		sum time.Duration
		max time.Duration
	}
	var mu sync.Mutex
	phases := map[string]*agg{}
	resumeTraceFn = func(p string, d time.Duration) {
		mu.Lock()
		a := phases[p]
		if a == nil {
			a = &agg{}
			phases[p] = a
		}
		a.n++
		a.sum += d
		a.max = max(a.max, d)
		mu.Unlock()
	}
	defer func() { resumeTraceFn = nil }()

	stop := make(chan struct{})
	var wrote atomic.Int64
	var wwg sync.WaitGroup
	for range writers {
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := st.AddMachine(context.Background(), model, MachineParams{}); err != nil {
					t.Error(err)
					return
				}
				wrote.Add(1)
			}
		}()
	}
	time.Sleep(200 * time.Millisecond) // writes under way before the storm (diagnostic only)

	before := st.ResumeStats()
	start := time.Now()
	var done atomic.Int64
	progress := time.NewTicker(5 * time.Second)
	quit := make(chan struct{})
	defer func() { progress.Stop(); close(quit) }()
	go func() {
		for {
			select {
			case <-quit:
				return
			case <-progress.C:
			}
			rs := st.ResumeStats()
			mu.Lock()
			fills := 0
			if f := phases["fill"]; f != nil {
				fills = f.n
			}
			mu.Unlock()
			t.Logf("%v: %d resumes done, %d machines written, fills %d, reads %d, recent %d", time.Since(start).Round(time.Second), done.Load(), wrote.Load(), fills, rs.Reads-before.Reads, rs.Recent-before.Recent)
		}
	}()
	lat := make([]time.Duration, agents*per)
	agentDone := make([]time.Duration, agents)
	var wg sync.WaitGroup
	for a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				t0 := time.Now()
				ctx, _ := resumeCtx(t, from)
				w, _, err := st.WatchModelMachines(ctx, model)
				lat[a*per+i] = time.Since(t0)
				if err != nil {
					t.Error(err)
					return
				}
				w.Stop()
				done.Add(1)
			}
			agentDone[a] = time.Since(start)
		}()
	}
	wg.Wait()
	total := time.Since(start)
	close(stop)
	wwg.Wait()
	after := st.ResumeStats()
	slices.Sort(lat)
	slices.Sort(agentDone)
	q := func(ds []time.Duration, p float64) time.Duration { return ds[int(float64(len(ds)-1)*p)] }
	t.Logf("%d agents x %d resumes, %d writers: all done in %v; %d machines written meanwhile (%.0f/s)", agents, per, writers, total, wrote.Load(), float64(wrote.Load())/total.Seconds())
	t.Logf("Watch call latency p50 %v p90 %v p99 %v max %v; agent done p50 %v p90 %v max %v",
		q(lat, .5), q(lat, .9), q(lat, .99), lat[len(lat)-1], q(agentDone, .5), q(agentDone, .9), agentDone[len(agentDone)-1])
	t.Logf("replays %d, shared %d, store reads %d, records %d, window extended from the feed's recent history %d", after.Replays-before.Replays, after.Shared-before.Shared, after.Reads-before.Reads, after.Records-before.Records, after.Recent-before.Recent)
	mu.Lock()
	defer mu.Unlock()
	names := make([]string, 0, len(phases))
	for p := range phases {
		names = append(names, p)
	}
	slices.Sort(names)
	for _, p := range names {
		a := phases[p]
		mean := time.Duration(0)
		if a.n > 0 {
			mean = a.sum / time.Duration(a.n)
		}
		t.Logf("  %-16s n=%-6s sum=%-12v mean=%-12v max=%v", p, strconv.Itoa(a.n), a.sum.Round(time.Millisecond), mean.Round(time.Microsecond), a.max.Round(time.Millisecond))
	}
}
