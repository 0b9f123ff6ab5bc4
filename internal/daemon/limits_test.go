package daemon_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// Limits and slow clients (issue 7). The watcher limit and the login
// timeout are TestWatcherLimit and TestLoginTimeout (daemon_test.go).

// The connection cap holds, also when many clients connect at once; over
// it the upgrade is refused (HTTP 503) and the open connections keep
// working; a freed slot can be used again.
func TestConnectionLimit(t *testing.T) {
	const limit = 3
	d := start(t, func(c *daemon.Config) { c.MaxConns = limit })
	creds := d.Credentials()
	cfg := client.Config{Addr: d.Addr(), ModelUUID: creds.DefaultModelUUID, CACert: []byte(creds.CACert)}

	// Many dials at once: at most limit get in.
	var (
		mu    sync.Mutex
		conns []*client.Conn
		wg    sync.WaitGroup
		fails atomic.Int32
	)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := client.Dial(ctxT(t), cfg)
			if err != nil {
				if !strings.Contains(err.Error(), "503") && !strings.Contains(err.Error(), "bad handshake") {
					t.Errorf("refused dial: %v", err)
				}
				fails.Add(1)
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	if len(conns) != limit || d.RPC().Conns() > limit {
		t.Fatalf("%d connections accepted, %d open; the limit is %d", len(conns), d.RPC().Conns(), limit)
	}
	for _, c := range conns {
		if _, err := c.LoginUser(ctxT(t), "admin", creds.AdminPassword); err != nil {
			t.Fatalf("login on an accepted connection: %v", err)
		}
	}
	// A freed slot is usable again.
	conns[0].Close()
	waitFor(t, "the closed connection to end", func() bool { return d.RPC().Conns() == limit-1 })
	c, err := client.Dial(ctxT(t), cfg)
	if err != nil {
		t.Fatalf("dial after a slot was freed: %v", err)
	}
	c.Close()
	for _, c := range conns[1:] {
		if err := c.Ping(ctxT(t)); err != nil {
			t.Fatalf("open connection: %v", err)
		}
	}
}

// Over the per-connection request cap a request gets code "try again"
// with a clear message, and the connection stays.
func TestRequestLimitPerConnection(t *testing.T) {
	d := start(t, func(c *daemon.Config) { c.MaxRequests = 2 })
	c := loginController(t, d, d.Credentials().DefaultModelUUID)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	// Two Next calls that block hold both slots.
	for i := 0; i < 2; i++ {
		var res params.NotifyWatchResult
		if err := c.Call(ctxT(t), "Provisioner", 11, "", "WatchForModelConfigChanges", nil, &res); err != nil {
			t.Fatal(err)
		}
		go func() {
			for client.IsCode(client.NewNotifyWatcher(c, res.NotifyWatcherId).Next(ctx), params.CodeTryAgain) {
			}
		}()
	}
	var err error
	waitFor(t, "the request limit", func() bool {
		err = c.Ping(ctxT(t))
		return err != nil
	})
	wantErr(t, err, "too many concurrent requests on this connection (limit 2)", params.CodeTryAgain)
	// A change ends both Next calls; the slots are free again.
	if err := d.State().UpdateModelConfig(d.Credentials().DefaultModelUUID, map[string]any{"x": 1}, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the slots to free", func() bool { return c.Ping(ctxT(t)) == nil })
}

// A client that sends requests with large replies and never reads is
// dropped after the write timeout; meanwhile another client's calls keep
// their pace; the dropped connection's goroutines and memory are released.
func TestSlowReaderDropped(t *testing.T) {
	const (
		writeTimeout = time.Second
		maxRequests  = 8
	)
	d := start(t, func(c *daemon.Config) {
		c.WriteTimeout = writeTimeout
		c.MaxRequests = maxRequests
	})
	creds := d.Credentials()
	// A model config of about 1 MiB makes every ModelConfig reply as big.
	big := strings.Repeat("x", 1<<20)
	if err := d.State().UpdateModelConfig(creds.DefaultModelUUID, map[string]any{"big": big}, nil); err != nil {
		t.Fatal(err)
	}
	other := loginController(t, d, creds.DefaultModelUUID)
	baseGoroutines := runtime.NumGoroutine()
	baseHeap := heapAlloc()

	slow := newRawConn(t, d, creds.DefaultModelUUID)
	slow.login(params.LoginRequest{AuthTag: creds.ControllerAgent.Tag, Credentials: creds.ControllerAgent.Password, Nonce: creds.ControllerAgent.Nonce})
	started := time.Now()
	// Send requests without reading: the replies (hundreds of MiB in all)
	// fill the socket buffers and the server's writer blocks.
	go func() {
		for i := 0; i < 300; i++ {
			if _, err := slow.send("Provisioner", 11, "", "ModelConfig", nil); err != nil {
				return // the server dropped us
			}
		}
	}()

	// The other client keeps working while the slow one is stuck, and the
	// daemon's goroutines stay bounded by the request cap.
	var worst time.Duration
	peak := 0
	for d.RPC().Conns() > 1 {
		if time.Since(started) > writeTimeout+15*time.Second {
			t.Fatalf("slow reader not dropped after %v (write timeout %v)", time.Since(started), writeTimeout)
		}
		t0 := time.Now()
		if err := other.Ping(ctxT(t)); err != nil {
			t.Fatalf("other client: %v", err)
		}
		worst = max(worst, time.Since(t0))
		peak = max(peak, runtime.NumGoroutine())
		time.Sleep(20 * time.Millisecond)
	}
	dropped := time.Since(started)
	t.Logf("dropped after %v; other client's slowest ping %v; goroutines %d -> peak %d", dropped, worst, baseGoroutines, peak)
	if dropped < writeTimeout {
		t.Errorf("dropped after %v, before the write timeout %v", dropped, writeTimeout)
	}
	if worst > time.Second {
		t.Errorf("other client's ping took %v while a slow reader was stuck", worst)
	}
	if peak > baseGoroutines+maxRequests+20 {
		t.Errorf("goroutines peaked at %d (base %d, request cap %d): not bounded by the cap", peak, baseGoroutines, maxRequests)
	}
	// The slow client sees the end of the connection.
	_ = slow.ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		if _, _, err := slow.ws.ReadMessage(); err != nil {
			break
		}
	}
	// Its memory is released: the heap is back near where it started.
	waitFor(t, "the heap to shrink", func() bool { return heapAlloc() < baseHeap+16<<20 })
	if err := other.Ping(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// waitFor polls cond for up to 20 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
