// Package rawetcd is etcd used through its own client (the watch baseline
// through etcd's gRPC watch API, below the client's Watch), with none of
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

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
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
// clients, one watch stream each), and one more client putting at rate per
// second for d, in an open loop, round robin over the keys, at most one
// put in flight per key. Latency is from a put being issued to its event
// being received (by the reader of the watch's stream); after the run
// (and up to settle for late events) every watcher is checked to have
// seen every put of its key.
//
// The watches are made on etcd's gRPC watch API directly (etcdserverpb's
// Watch, one bidirectional stream per client, with the leader required as
// clientv3 requires it), not through clientv3's Watch: clientv3 gives every
// watch its own goroutines, channels and buffers in the client, which at a
// million watches cost the client gigabytes and minutes to set up, and are
// not what the baseline measures (etcd's own fan-out to that many
// watches). Here each watch is a WatchCreateRequest with an id of the
// client's choosing, its watcher's index plus one (ids are per stream and
// 0 asks etcd to choose), created many at a time on each stream; one
// goroutine per stream reads its responses and counts each event against
// its watch's id, in flat per-watch slices: a few bytes per watch on the
// client. A refused create, a watch etcd cancels, or a stream that ends
// before the run does fail the run with that error.
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

	interval := max(time.Duration(float64(time.Second)/rate), 1)
	// Put i (its value strconv.Itoa(i)) is issued at i x interval from
	// the start, while that is before d.
	puts := max(0, int((d+interval-1)/interval))
	b := &watchBench{
		base:   time.Now(),
		issued: make([]atomic.Int64, puts),
		seen:   make([]int32, keys*perKey),
	}
	// The streams' context requires a leader, as clientv3's watches do:
	// a member that loses its leader ends the stream rather than keep it
	// open and silent.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	streams := make([]*watchStream, len(watchers))
	for s, cli := range watchers {
		ws, err := pb.NewWatchClient(cli.ActiveConnection()).Watch(wctx)
		if err != nil {
			cancel()
			b.wait(streams[:s])
			return WatchResult{}, fmt.Errorf("rawetcd: watch stream: %w", err)
		}
		st := &watchStream{ws: ws, createdc: make(chan struct{}, 1), done: make(chan struct{})}
		streams[s] = st
		go b.read(st)
	}
	// Watcher w watches key w / perKey, on stream w % len(streams), with
	// id w + 1. Each stream's creates go out in a pipeline of its own,
	// the streams side by side.
	var cwg sync.WaitGroup
	createErrs := make([]error, len(streams))
	for s, st := range streams {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			createErrs[s] = st.create(wctx, s, len(streams), len(b.seen), func(w int) string { return key(w / perKey) })
			if createErrs[s] != nil {
				cancel() // the other streams' creates stop too
			}
		}()
	}
	cwg.Wait()
	if err := b.createErr(ctx, createErrs); err != nil {
		cancel()
		b.wait(streams)
		return WatchResult{}, err
	}

	var (
		mu       sync.Mutex
		acked    = make([]int, keys) // puts acknowledged per key
		inflight = make([]bool, keys)
	)
	var pwg sync.WaitGroup
	var failed atomic.Pointer[error]
	start := time.Now()
	next := 0
	for i := range puts {
		if ctx.Err() != nil || b.failed.Load() != nil {
			break
		}
		sleep(ctx, time.Until(start.Add(time.Duration(i)*interval)))
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
		b.issued[i].Store(int64(time.Since(b.base)) + 1)
		mu.Unlock()
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			_, err := writer.Put(ctx, key(k), strconv.Itoa(i))
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
	for b.delivs.Load() < int64(total*perKey) && time.Now().Before(deadline) && ctx.Err() == nil && b.failed.Load() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	b.wait(streams)
	res := WatchResult{Puts: total, Elapsed: elapsed, Deliveries: int(b.delivs.Load())}
	res.Latencies = make([]time.Duration, 0, res.Deliveries)
	for _, st := range streams {
		res.Latencies = append(res.Latencies, st.lats...)
	}
	for w, n := range b.seen {
		res.Lost += max(0, acked[w/perKey]-int(n))
	}
	if p := b.failed.Load(); p != nil {
		return res, *p
	}
	if p := failed.Load(); p != nil {
		return res, *p
	}
	return res, ctx.Err()
}

// watchBench is what WatchBench's stream readers share.
type watchBench struct {
	base time.Time // what issued's times count from
	// issued holds, per put, when it was issued (time since base, plus
	// one: 0 is not issued).
	issued []atomic.Int64
	// seen holds, per watcher (its watch id minus one), the events it
	// received of issued puts: written by its stream's reader only, read
	// once the readers are done.
	seen   []int32
	delivs atomic.Int64          // events received of issued puts, all streams
	failed atomic.Pointer[error] // why a stream failed, if one did
}

// watchStream is one client's watch stream.
type watchStream struct {
	ws       pb.Watch_WatchClient
	created  atomic.Int64  // created responses received
	createdc chan struct{} // signalled (at most one waiting) on a created response
	done     chan struct{} // closed when the reader returns
	err      error         // why the reader returned, once done is closed
	lats     []time.Duration
}

// createWindow is how many creates a stream has sent ahead of their
// created responses.
const createWindow = 1024

// create creates watchers s, s+n, s+2n, ... below watchers on st, each
// on key(w) with id w + 1, and returns once etcd has created them all.
func (st *watchStream) create(ctx context.Context, s, n, watchers int, key func(w int) string) error {
	var sent int64
	wait := func(until int64) error {
		for st.created.Load() < until {
			select {
			case <-st.createdc:
			case <-st.done:
				return st.err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	for w := s; w < watchers; w += n {
		if err := wait(sent - createWindow + 1); err != nil {
			return err
		}
		err := st.ws.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{
			CreateRequest: &pb.WatchCreateRequest{Key: []byte(key(w)), WatchId: int64(w) + 1},
		}})
		if err != nil {
			// The stream is gone: its reader has the reason.
			<-st.done
			if st.err != nil {
				return st.err
			}
			return fmt.Errorf("rawetcd: watch stream %d: %w", s, err)
		}
		sent++
	}
	return wait(sent)
}

// read reads st's responses until the stream ends: created responses are
// counted, each event of an issued put is counted against its watch.
func (b *watchBench) read(st *watchStream) {
	defer close(st.done)
	fail := func(err error) {
		st.err = err
		b.failed.CompareAndSwap(nil, &err)
	}
	for {
		resp, err := st.ws.Recv()
		if err != nil {
			if st.ws.Context().Err() == nil {
				fail(fmt.Errorf("rawetcd: watch stream ended: %w", err))
			}
			return
		}
		now := int64(time.Since(b.base)) + 1
		switch {
		case resp.Created && resp.Canceled:
			fail(fmt.Errorf("rawetcd: etcd refused to create a watch: %s", resp.CancelReason))
			return
		case resp.Canceled:
			fail(fmt.Errorf("rawetcd: etcd canceled watch %d: %s", resp.WatchId, resp.CancelReason))
			return
		case resp.Created:
			st.created.Add(1)
			select {
			case st.createdc <- struct{}{}:
			default:
			}
			continue
		}
		if len(resp.Events) == 0 {
			continue
		}
		w := resp.WatchId - 1
		if w < 0 || w >= int64(len(b.seen)) {
			fail(fmt.Errorf("rawetcd: an event for watch %d, which was not created", resp.WatchId))
			return
		}
		var n int64
		for _, ev := range resp.Events {
			i := putIndex(ev.Kv.Value)
			if ev.Type != mvccpb.PUT || i < 0 || i >= len(b.issued) {
				continue
			}
			t0 := b.issued[i].Load()
			if t0 == 0 {
				continue
			}
			st.lats = append(st.lats, time.Duration(now-t0))
			b.seen[w]++
			n++
		}
		b.delivs.Add(n)
	}
}

// createErr is why creating the watches failed, or nil: a stream's
// failure (once one fails, the others' creates are canceled), else the
// caller's context's, else the first stream's error.
func (b *watchBench) createErr(ctx context.Context, errs []error) error {
	if p := b.failed.Load(); p != nil {
		return *p
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// wait waits for the readers of streams (those not nil) to return.
func (b *watchBench) wait(streams []*watchStream) {
	for _, st := range streams {
		if st != nil {
			<-st.done
		}
	}
}

// putIndex is the put index a value of WatchBench's writer holds, or -1.
func putIndex(v []byte) int {
	if len(v) == 0 || len(v) > 18 {
		return -1
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}
