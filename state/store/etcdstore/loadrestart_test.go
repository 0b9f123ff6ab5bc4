package etcdstore_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/etcdstore"
)

// TestLoadBeginsAgainAfterCompaction: a store opens through a TCP proxy
// that holds etcd's answers once more than one page of the load has come
// through; meanwhile the prefix is written and etcd compacted past the
// revision the load reads at. Let go, the load's next page is refused as
// compacted, and the load begins again at a new revision: the store
// opens, says so, and holds every key.
func TestLoadBeginsAgainAfterCompaction(t *testing.T) {
	ctx := bounded(t, 2*time.Minute)
	prefix := newPrefix()
	cfg := config(shared, prefix, store.Feed{})
	w := open(t, cfg)
	const keys = 3500 // four pages of the load (1,000 keys each)
	val := bytes.Repeat([]byte("m"), 1024)
	for i := 0; i < keys; i += 100 {
		if _, err := w.Update(ctx, func(tx store.Txn) error {
			for k := i; k < i+100; k++ {
				if err := tx.Put(fmt.Sprintf("machine/%05d", k), val); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	// Past the first page (about 1 MiB) and short of the second's end.
	p := newHoldingProxy(t, shared.Endpoints()[0], 1536<<10)
	var logs bytes.Buffer
	var logMu sync.Mutex
	cfg.Endpoints = []string{p.url}
	cfg.Logger = slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))
	opened := make(chan error, 1)
	var s *etcdstore.Store
	go func() {
		var err error
		s, err = etcdstore.Open(ctx, cfg)
		opened <- err
	}()
	select {
	case <-p.held:
	case err := <-opened:
		t.Fatalf("the store opened (%v) before the proxy held etcd's answers: the load is shorter than the test assumes", err)
	case <-ctx.Done():
		t.Fatal("the proxy never held etcd's answers")
	}
	// A write moves the revision past the load's, and etcd compacts to it.
	rev, err := w.Update(ctx, func(tx store.Txn) error { return tx.Put("machine/99999", val) })
	if err != nil {
		t.Fatal(err)
	}
	cli := clientFor(t, shared.Endpoints())
	if _, err := cli.Compact(ctx, int64(rev)); err != nil {
		t.Fatal(err)
	}
	p.release()
	if err := <-opened; err != nil {
		t.Fatalf("Open after its load's revision was compacted: %v", err)
	}
	defer s.Close()
	logMu.Lock()
	said := logs.String()
	logMu.Unlock()
	if !strings.Contains(said, "its revision was compacted; loading again") {
		t.Errorf("the store did not say it loaded again; its log:\n%s", said)
	}
	if n := countKeys(t, ctx, s, "machine/"); n != keys+1 {
		t.Errorf("the replica holds %d keys; want %d", n, keys+1)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// holdingProxy forwards TCP connections to an etcd endpoint; once more
// than limit bytes have come back from etcd on them all, it holds what
// etcd sends (held is closed) until release.
type holdingProxy struct {
	url      string
	limit    int64
	got      atomic.Int64
	held     chan struct{}
	heldOnce sync.Once
	released chan struct{}
	relOnce  sync.Once
}

func newHoldingProxy(t *testing.T, endpoint string, limit int64) *holdingProxy {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdingProxy{url: "http://" + ln.Addr().String(), limit: limit, held: make(chan struct{}), released: make(chan struct{})}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		p.release()
		ln.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", u.Host)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			open = append(open, c, up)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(up, c); up.Close() })
			wg.Go(func() { p.back(c, up); c.Close() })
		}
	})
	return p
}

// back copies etcd's bytes to the client, holding them past the limit.
func (p *holdingProxy) back(c, up net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 {
			if p.got.Add(int64(n)) > p.limit {
				p.heldOnce.Do(func() { close(p.held) })
				<-p.released
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *holdingProxy) release() { p.relOnce.Do(func() { close(p.released) }) }
