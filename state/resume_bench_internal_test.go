package state

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/state/store/etcdstore"
	"github.com/provisiond/provisiond/watcher"
)

// BenchmarkResumesUnderWrites: on a real etcd, agents resume their
// WatchModelMachines after one revision, 32 at a time, while a writer adds
// machines without a pause (a failover's resumes under writes). Each op
// is one resumed Watch call; store-reads/op is the history reads of etcd
// it took (the window's fills, shared by the resumes that wait for them),
// recent/op the window extended from the commits the daemon's feed
// brought instead (docs/history.md, "The window").
func BenchmarkResumesUnderWrites(b *testing.B) {
	c, err := etcdtest.Start(etcdtest.Options{Dir: b.TempDir(), NoFsync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	hub := watcher.NewHub()
	ctx0, cancel0 := context.WithTimeout(context.Background(), 30*time.Second)
	s, err := etcdstore.Open(ctx0, etcdstore.Config{Endpoints: c.Endpoints(), Prefix: "/resumes/", Feed: Feed(hub, nil),
		MaxTxnOps: c.MaxTxnOps(), MaxRequestBytes: c.MaxRequestBytes(), RequestTimeout: 10 * time.Second, LeaseTTL: 2 * time.Second})
	cancel0()
	if err != nil {
		b.Fatal(err)
	}
	st, err := Open(s, Options{Hub: hub})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := b.Context()
	res, err := st.Initialize(ctx, InitArgs{AdminPassword: "pw", AgentPassword: "agent-password-long-enough", AgentNonce: "n"})
	if err != nil {
		b.Fatal(err)
	}
	model := res.DefaultModelUUID
	for range 20 {
		if _, err := st.AddMachine(ctx, model, MachineParams{}); err != nil {
			b.Fatal(err)
		}
	}
	from := st.store.Revision()

	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for wctx.Err() == nil {
			if _, err := st.AddMachine(wctx, model, MachineParams{}); err != nil && wctx.Err() == nil {
				b.Error(err)
				return
			}
		}
	})
	before := st.ResumeStats()
	b.SetParallelism(16) // 32 resuming at once on two cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rctx := context.WithValue(ctx, ResumeKey{}, &testResume{from: from})
			w, _, err := st.WatchModelMachines(rctx, model)
			if err != nil {
				b.Error(err)
				return
			}
			w.Stop()
		}
	})
	b.StopTimer()
	after := st.ResumeStats()
	stop()
	wg.Wait()
	b.ReportMetric(float64(after.Reads-before.Reads)/float64(b.N), "store-reads/op")
	b.ReportMetric(float64(after.Recent-before.Recent)/float64(b.N), "recent/op")
}
