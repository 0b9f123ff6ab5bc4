// Package rawetcd is etcd used through its own client, with none of
// etcdstore's machinery: the baseline provisiond's etcd mode is judged
// against, for provisionbench (its write and watch workloads with --store
// etcd --baseline). It is never part of the daemon: only the benchmark
// tool imports it, and it lives under etcdstore because only etcdstore
// (and internal/etcdtest) may import etcd.
//
// Every function works under a prefix of its own, which it deletes when
// it is done.
package rawetcd

import (
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Conn is how the baselines reach etcd: its client URLs, and the
// cluster's security as the daemons are given it.
type Conn struct {
	Endpoints []string
	// TLS, if set, is the client's TLS configuration (etcd's CA, the
	// client certificate of --client-cert-auth).
	TLS *tls.Config
	// Username and Password log in to etcd's auth.
	Username, Password string
}

// dial opens n clients of c.
func dial(c Conn, n int) ([]*clientv3.Client, error) {
	clis := make([]*clientv3.Client, 0, n)
	for range n {
		cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints, TLS: c.TLS, Username: c.Username, Password: c.Password,
			DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			closeAll(clis)
			return nil, fmt.Errorf("rawetcd: %w", err)
		}
		clis = append(clis, cli)
	}
	return clis, nil
}

func closeAll(clis []*clientv3.Client) {
	for _, c := range clis {
		_ = c.Close()
	}
}

// subPrefix is a new prefix under prefix for one run.
func subPrefix(prefix string) string {
	b := make([]byte, 6)
	_, _ = crand.Read(b)
	return prefix + "rawetcd-" + hex.EncodeToString(b) + "/"
}

// DBSize is the database size of the first endpoint's member, bytes:
// the file's and the part of it in use (what a defragmentation would
// leave), for the tool's reports of what a model costs etcd.
func DBSize(ctx context.Context, c Conn) (size, inUse int64, err error) {
	clis, err := dial(c, 1)
	if err != nil {
		return 0, 0, err
	}
	defer closeAll(clis)
	st, err := clis[0].Status(ctx, c.Endpoints[0])
	if err != nil {
		return 0, 0, fmt.Errorf("rawetcd: status: %w", err)
	}
	return st.DbSize, st.DbSizeInUse, nil
}

// DeletePrefix deletes every key under prefix.
func DeletePrefix(ctx context.Context, c Conn, prefix string) error {
	if prefix == "" {
		return errors.New("rawetcd: DeletePrefix needs a prefix")
	}
	clis, err := dial(c, 1)
	if err != nil {
		return err
	}
	defer closeAll(clis)
	_, err = clis[0].Delete(ctx, prefix, clientv3.WithPrefix())
	return err
}

// TxnResult is what TxnBench measured.
type TxnResult struct {
	Commits int           // transactions committed
	Elapsed time.Duration // measuring time
	// Latencies are the transactions' durations, one per commit.
	Latencies []time.Duration
}

// PerSecond is the commit rate.
func (r TxnResult) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Commits) / r.Elapsed.Seconds()
}

// TxnBench is provisionbench's write baseline on etcd: writers goroutines,
// spread over clients etcd clients, each committing for d one transaction
// at a time on a key of its own: one compare (the key's mod revision, as
// the store's optimistic transactions do) and one put of valueSize bytes.
// Warm (not counted) runs first. window, if not nil, is called as the
// measuring starts (true) and as it ends (false), so a caller can read
// what the processes used over the same time.
func TxnBench(ctx context.Context, c Conn, prefix string, writers, clients, valueSize int, warm, d time.Duration, window func(start bool)) (TxnResult, error) {
	if writers < 1 || clients < 1 {
		return TxnResult{}, errors.New("rawetcd: TxnBench needs a writer and a client")
	}
	clis, err := dial(c, min(clients, writers))
	if err != nil {
		return TxnResult{}, err
	}
	defer closeAll(clis)
	prefix = subPrefix(prefix)
	defer func() { _, _ = clis[0].Delete(context.Background(), prefix, clientv3.WithPrefix()) }()
	val := string(make([]byte, valueSize))
	var (
		wg             sync.WaitGroup
		mu             sync.Mutex
		lats           []time.Duration
		firstErr       atomic.Pointer[error]
		counting, stop atomic.Bool
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cli := clis[w%len(clis)]
			key := prefix + "machine/" + strconv.Itoa(w)
			var mod int64
			own := make([]time.Duration, 0, 1024)
			for !stop.Load() {
				t0 := time.Now()
				resp, err := cli.Txn(ctx).
					If(clientv3.Compare(clientv3.ModRevision(key), "=", mod)).
					Then(clientv3.OpPut(key, val)).Commit()
				if err == nil && !resp.Succeeded {
					err = errors.New("rawetcd: a transaction's compare failed on a key only its writer writes")
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					stop.Store(true)
					break
				}
				mod = resp.Header.Revision
				if counting.Load() && !stop.Load() {
					own = append(own, time.Since(t0))
				}
			}
			mu.Lock()
			lats = append(lats, own...)
			mu.Unlock()
		}()
	}
	sleep(ctx, warm)
	if window != nil {
		window(true)
	}
	counting.Store(true)
	start := time.Now()
	sleep(ctx, d)
	stop.Store(true)
	elapsed := time.Since(start)
	if window != nil {
		window(false)
	}
	wg.Wait()
	res := TxnResult{Commits: len(lats), Elapsed: elapsed, Latencies: lats}
	if p := firstErr.Load(); p != nil {
		return res, *p
	}
	return res, ctx.Err()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// WatchResult is what WatchBench measured.
type WatchResult struct {
	Puts       int             // puts acknowledged
	Elapsed    time.Duration   // the writer's time
	Latencies  []time.Duration // put issued to event received, one per delivery
	Deliveries int             // events received for acknowledged puts
	Lost       int             // (watcher, put of its key) pairs never delivered
}

// WatchBench is provisionbench's watch baseline on etcd: keys keys, each
// watched perKey times (keys x perKey watchers, spread over clients etcd
// clients, a watch stream each), and one more client putting at rate per
// second for d, in an open loop, round robin over the keys, at most one
// put in flight per key. Latency is from a put being issued to a watcher
// receiving its event; after the run (and up to settle for late events)
// every watcher is checked to have seen every put of its key.
func WatchBench(ctx context.Context, c Conn, prefix string, keys, perKey, clients int, rate float64, d, settle time.Duration) (WatchResult, error) {
	if keys < 1 || perKey < 1 || clients < 1 || rate <= 0 {
		return WatchResult{}, errors.New("rawetcd: WatchBench needs keys, watchers, clients and a rate")
	}
	clis, err := dial(c, min(clients, keys)+1)
	if err != nil {
		return WatchResult{}, err
	}
	defer closeAll(clis)
	writer, watchers := clis[0], clis[1:]
	prefix = subPrefix(prefix)
	defer func() { _, _ = writer.Delete(context.Background(), prefix, clientv3.WithPrefix()) }()
	key := func(k int) string { return prefix + "machine/" + strconv.Itoa(k) }

	var (
		mu       sync.Mutex
		issued   = map[string]time.Time{} // value -> when its put was issued
		acked    = make([]int, keys)      // puts acknowledged per key
		inflight = make([]bool, keys)
		lats     []time.Duration
		delivs   atomic.Int64
	)
	seen := make([][]int, keys) // per key, per watcher: events received
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for k := range keys {
		seen[k] = make([]int, perKey)
		for j := range perKey {
			cli := watchers[(k*perKey+j)%len(watchers)]
			// The watches of one client share its watch stream (as
			// etcd's own benchmark tool's do); each is its own watch
			// there, with its own copy of every event.
			ch := cli.Watch(clientv3.WithRequireLeader(wctx), key(k), clientv3.WithCreatedNotify())
			created := <-ch
			if err := created.Err(); err != nil {
				return WatchResult{}, fmt.Errorf("rawetcd: watch: %w", err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for resp := range ch {
					now := time.Now()
					mu.Lock()
					for _, ev := range resp.Events {
						if t0, ok := issued[string(ev.Kv.Value)]; ok {
							lats = append(lats, now.Sub(t0))
							seen[k][j]++
							delivs.Add(1)
						}
					}
					mu.Unlock()
				}
			}()
		}
	}

	interval := time.Duration(float64(time.Second) / rate)
	var pwg sync.WaitGroup
	var failed atomic.Pointer[error]
	start := time.Now()
	next := 0
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if at.Sub(start) >= d || ctx.Err() != nil {
			break
		}
		sleep(ctx, time.Until(at))
		mu.Lock()
		k := -1
		for tries := 0; tries < keys; tries++ {
			cand := next % keys
			next++
			if !inflight[cand] {
				k = cand
				break
			}
		}
		if k < 0 {
			mu.Unlock()
			continue
		}
		inflight[k] = true
		val := strconv.Itoa(i)
		issued[val] = time.Now()
		mu.Unlock()
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			_, err := writer.Put(ctx, key(k), val)
			mu.Lock()
			defer mu.Unlock()
			inflight[k] = false
			if err != nil {
				failed.CompareAndSwap(nil, &err)
				return
			}
			acked[k]++
		}()
	}
	elapsed := time.Since(start)
	pwg.Wait()
	total := 0
	for _, n := range acked {
		total += n
	}
	deadline := time.Now().Add(settle)
	for delivs.Load() < int64(total*perKey) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	res := WatchResult{Puts: total, Elapsed: elapsed, Latencies: lats, Deliveries: int(delivs.Load())}
	for k := range keys {
		for j := range perKey {
			res.Lost += max(0, acked[k]-seen[k][j])
		}
	}
	if p := failed.Load(); p != nil {
		return res, *p
	}
	return res, ctx.Err()
}
