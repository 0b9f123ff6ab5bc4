package daemon_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/internal/migrate"
	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/state"
)

// BenchmarkMigrate migrates a stopped bbolt controller of 10,000 machines
// (each with a unit) into an empty prefix of a one-member etcd that
// fsyncs, and back into a new data dir, at etcd's default --max-txn-ops
// (128) and at 1024: the figures of docs/scale-out.md (Moving between
// stores). Run with -benchtime=1x -count=5 and take the medians.
func BenchmarkMigrate(b *testing.B) {
	const machines = 10_000
	src := provisiondtest.Start(b)
	model := src.DefaultModel()
	st := testkit.Daemon(src).State()
	if _, err := st.AddApplication(b.Context(), model, state.ApplicationParams{Name: "app"}); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < machines; i += 16 {
				m, err := st.AddMachine(b.Context(), model, state.MachineParams{})
				if err == nil {
					_, err = st.AddUnit(b.Context(), model, "app", m.ID, "")
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := src.Close(); err != nil {
		b.Fatal(err)
	}
	etcd, err := etcdtest.Start(etcdtest.Options{Dir: b.TempDir(), Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	defer etcd.Close()
	ctx := context.Background()
	n := 0
	for _, ops := range []int{128, 1024} {
		b.Run(fmt.Sprintf("max-txn-ops=%d", ops), func(b *testing.B) {
			var toEtcd, toBolt time.Duration
			var records int
			for b.Loop() {
				n++
				ecfg := daemon.EtcdConfig{Endpoints: etcd.Endpoints(), Prefix: fmt.Sprintf("/bench-%d/", n),
					MaxTxnOps: ops, MaxRequestBytes: etcdtest.MaxRequestBytes, RequestTimeout: time.Minute}
				start := time.Now()
				res, err := migrate.Run(ctx, migrate.Config{
					From: migrate.End{DataDir: src.DataDir()},
					To:   migrate.End{Store: daemon.StoreEtcd, Etcd: ecfg},
				})
				if err != nil {
					b.Fatal(err)
				}
				toEtcd += time.Since(start)
				records = res.Records
				start = time.Now()
				if _, err := migrate.Run(ctx, migrate.Config{
					From: migrate.End{Store: daemon.StoreEtcd, Etcd: ecfg},
					To:   migrate.End{DataDir: filepath.Join(b.TempDir(), "back")},
				}); err != nil {
					b.Fatal(err)
				}
				toBolt += time.Since(start)
			}
			b.ReportMetric(float64(records), "records")
			b.ReportMetric(toEtcd.Seconds()/float64(b.N), "s-to-etcd")
			b.ReportMetric(toBolt.Seconds()/float64(b.N), "s-to-bbolt")
			b.ReportMetric(0, "ns/op")
		})
	}
}
