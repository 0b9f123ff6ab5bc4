package etcdstore_test

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

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/etcdstore"
	"github.com/provisiond/provisiond/watcher"
)

// The benchmarks compare the store with etcd's own client doing the
// equivalent work, on one etcd started for them with fsync on (the shared
// test etcd skips fsync), in the same run: quote ratios, not absolutes.
//
//	go test -run '^$' -bench . -count 5 ./state/store/etcdstore/

var (
	benchOnce sync.Once
	benchEtcd *etcdtest.Cluster
	benchDir  string
)

func benchCluster(b *testing.B) *etcdtest.Cluster {
	benchOnce.Do(func() {
		var err error
		benchDir, err = os.MkdirTemp("", "etcdstore-bench-")
		if err != nil {
			b.Fatal(err)
		}
		benchEtcd, err = etcdtest.Start(etcdtest.Options{Dir: benchDir})
		if err != nil {
			b.Fatal(err)
		}
	})
	// Stopped by TestMain's cleanup of benchmarks (closeBench).
	return benchEtcd
}

func closeBench() {
	if benchEtcd != nil {
		benchEtcd.Close()
		os.RemoveAll(benchDir)
	}
}

var benchClients = []int{1, 64, 256}

// parallel runs fn(i) b.N times over n goroutines, goroutine g getting
// the indexes g, g+n, ...
func parallel(b *testing.B, n int, fn func(g int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				fn(g)
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
}

// BenchmarkRawTxn is the baseline of writes: etcd transactions through
// one client, each one compare (the key's mod revision) and one put, on a
// key per writer.
func BenchmarkRawTxn(b *testing.B) {
	c := benchCluster(b)
	cli := rawClient(b, c)
	for _, n := range benchClients {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			prefix := newPrefix()
			mods := make([]int64, n)
			val := make([]byte, 200)
			parallel(b, n, func(g int) {
				key := prefix + "machine/" + strconv.Itoa(g)
				resp, err := cli.Txn(context.Background()).
					If(clientv3.Compare(clientv3.ModRevision(key), "=", mods[g])).
					Then(clientv3.OpPut(key, string(val))).Commit()
				if err != nil || !resp.Succeeded {
					b.Errorf("txn: %v %v", err, resp)
					return
				}
				mods[g] = resp.Header.Revision
			})
		})
	}
}

// BenchmarkRawTxnFeedShape decomposes the store's cost at etcd: the raw
// transaction of BenchmarkRawTxn plus what the store's design adds there,
// a second put (the change set, to one feed key all writers share) and a
// watcher of the prefix receiving every event, still through etcd's own
// client.
func BenchmarkRawTxnFeedShape(b *testing.B) {
	c := benchCluster(b)
	cli := rawClient(b, c)
	for _, n := range benchClients {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			prefix := newPrefix()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			wcli := rawClient(b, c)
			wch := wcli.Watch(ctx, prefix, clientv3.WithPrefix())
			done := make(chan struct{})
			go func() {
				defer close(done)
				for range wch {
				}
			}()
			mods := make([]int64, n)
			val := make([]byte, 200)
			feed := string(make([]byte, 40))
			parallel(b, n, func(g int) {
				key := prefix + "machine/" + strconv.Itoa(g)
				resp, err := cli.Txn(context.Background()).
					If(clientv3.Compare(clientv3.ModRevision(key), "=", mods[g])).
					Then(clientv3.OpPut(key, string(val)), clientv3.OpPut(prefix+"meta/changes", feed)).Commit()
				if err != nil || !resp.Succeeded {
					b.Errorf("txn: %v %v", err, resp)
					return
				}
				mods[g] = resp.Header.Revision
			})
			cancel()
			<-done
		})
	}
}

// BenchmarkUpdate is store.Update doing the same: read the writer's key,
// write it (with a one-change change set), through one store.
func BenchmarkUpdate(b *testing.B) {
	c := benchCluster(b)
	for _, n := range benchClients {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			s := benchUpdates(b, c, n, 0)
			b.ReportMetric(float64(s.Stats().Conflicts)/float64(b.N), "conflicts/op")
		})
	}
}

// BenchmarkUpdateInFlight is BenchmarkUpdate's 64 and 256 writers with
// several bounds of the etcd transactions in flight (Config.
// CommitsInFlight): the fewer, the larger the groups.
func BenchmarkUpdateInFlight(b *testing.B) {
	c := benchCluster(b)
	for _, inflight := range []int{1, 2, 4, 8, 16} {
		for _, n := range benchClients[1:] {
			b.Run(fmt.Sprintf("inflight=%d/clients=%d", inflight, n), func(b *testing.B) {
				st := benchUpdates(b, c, n, inflight).Stats()
				if st.Groups > 0 {
					b.ReportMetric(float64(st.Grouped)/float64(st.Groups), "updates/group")
				}
			})
		}
	}
}

// benchUpdates runs b.N Updates over n writers, each reading and writing
// a key of its own, through a new store (CommitsInFlight inflight; 0: the
// default), and returns the store.
func benchUpdates(b *testing.B, c *etcdtest.Cluster, n, inflight int) *etcdstore.Store {
	cfg := benchConfig(c, newPrefix(), store.Feed{Apply: func(watcher.ChangeSet) {}})
	cfg.CommitsInFlight = inflight
	s := open(b, cfg)
	val := make([]byte, 200)
	parallel(b, n, func(g int) {
		key := "machine/" + strconv.Itoa(g)
		_, err := s.Update(context.Background(), func(tx store.Txn) error {
			if _, _, err := tx.Get(key); err != nil {
				return err
			}
			tx.Record(watcher.Change{Kind: "machine", Model: "m", ID: strconv.Itoa(g), Fields: []string{"status"}})
			return tx.Put(key, val)
		})
		if err != nil {
			b.Error(err)
		}
	})
	return s
}

func benchConfig(c *etcdtest.Cluster, prefix string, feed store.Feed) etcdstore.Config {
	cfg := config(c, prefix, feed)
	cfg.RequestTimeout = 30 * time.Second // a loaded 2-core box
	return cfg
}

func rawClient(b *testing.B, c *etcdtest.Cluster) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cli.Close() })
	return cli
}

// BenchmarkRead: a read from the replica (View and Get) against etcd's
// own Get round trip, linearizable (etcd's default) and serializable.
func BenchmarkRead(b *testing.B) {
	c := benchCluster(b)
	prefix := newPrefix()
	s := open(b, benchConfig(c, prefix, store.Feed{}))
	for i := range 1000 {
		if _, err := s.Update(context.Background(), func(tx store.Txn) error {
			return tx.Put("machine/"+strconv.Itoa(i), make([]byte, 200))
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("replica", func(b *testing.B) {
		ctx := context.Background()
		for i := 0; b.Loop(); i++ {
			err := s.View(ctx, func(r store.Reader) error {
				_, _, err := r.Get("machine/" + strconv.Itoa(i%1000))
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	cli := rawClient(b, c)
	for _, mode := range []string{"linearizable", "serializable"} {
		b.Run("etcd-"+mode, func(b *testing.B) {
			var opts []clientv3.OpOption
			if mode == "serializable" {
				opts = append(opts, clientv3.WithSerializable())
			}
			for i := 0; b.Loop(); i++ {
				if _, err := cli.Get(context.Background(), prefix+"machine/"+strconv.Itoa(i%1000), opts...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFeed: a commit through one store reaching Feed.Apply of another
// store (another daemon) over the same etcd, against etcd's own watch
// delivering a put to a second client. It reports the median and p99 of
// the delivery after the writer's call returned (delivery-*), and of the
// whole from the call's start (total-*).
func BenchmarkFeed(b *testing.B) {
	c := benchCluster(b)
	b.Run("store", func(b *testing.B) {
		prefix := newPrefix()
		var mu sync.Mutex
		arrived := map[uint64]time.Time{}
		cond := sync.NewCond(&mu)
		a := open(b, benchConfig(c, prefix, store.Feed{}))
		open(b, benchConfig(c, prefix, store.Feed{Apply: func(cs watcher.ChangeSet) {
			now := time.Now()
			mu.Lock()
			arrived[cs.Rev] = now
			cond.Broadcast()
			mu.Unlock()
		}}))
		var delivery, total []time.Duration
		for i := 0; b.Loop(); i++ {
			start := time.Now()
			rev, err := a.Update(context.Background(), func(tx store.Txn) error {
				tx.Record(watcher.Change{Kind: "machine", ID: "0"})
				return tx.Put("machine/0", []byte(strconv.Itoa(i)))
			})
			if err != nil {
				b.Fatal(err)
			}
			done := time.Now()
			mu.Lock()
			for arrived[rev].IsZero() {
				cond.Wait()
			}
			at := arrived[rev]
			delete(arrived, rev)
			mu.Unlock()
			delivery = append(delivery, max(at.Sub(done), 0))
			total = append(total, at.Sub(start))
		}
		report(b, "delivery", delivery)
		report(b, "total", total)
	})
	b.Run("etcd", func(b *testing.B) {
		prefix := newPrefix()
		w, p := rawClient(b, c), rawClient(b, c)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		wch := w.Watch(ctx, prefix, clientv3.WithPrefix())
		// Let the watch be established before timing.
		if _, err := p.Put(ctx, prefix+"warm", "x"); err != nil {
			b.Fatal(err)
		}
		<-wch
		var delivery, total []time.Duration
		for i := 0; b.Loop(); i++ {
			start := time.Now()
			resp, err := p.Put(ctx, prefix+"machine/0", strconv.Itoa(i))
			if err != nil {
				b.Fatal(err)
			}
			done := time.Now()
			for ev := range wch {
				if len(ev.Events) > 0 && ev.Events[len(ev.Events)-1].Kv.ModRevision >= resp.Header.Revision {
					break
				}
			}
			at := time.Now()
			delivery = append(delivery, max(at.Sub(done), 0))
			total = append(total, at.Sub(start))
		}
		report(b, "delivery", delivery)
		report(b, "total", total)
	})
}

func report(b *testing.B, name string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(ds[len(ds)/2].Seconds()*1e6, name+"-p50-µs")
	b.ReportMetric(ds[len(ds)*99/100].Seconds()*1e6, name+"-p99-µs")
}
