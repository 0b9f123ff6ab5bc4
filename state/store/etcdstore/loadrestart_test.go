package etcdstore_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/etcdstore"
)

// TestLoadBeginsAgainAfterCompaction: a store opens through a TCP proxy
// (etcdtest.Proxy) that holds etcd's answers once more than one page of
// the load has come through; meanwhile the prefix is written and etcd compacted past the
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

	p, err := etcdtest.NewProxy("127.0.0.1", shared.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// Past the first page (about 1 MiB) and short of the second's end.
	held := p.BlockAfter(1536 << 10)
	var logs bytes.Buffer
	var logMu sync.Mutex
	cfg.Endpoints = []string{p.URL()}
	cfg.Logger = slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))
	opened := make(chan error, 1)
	var s *etcdstore.Store
	go func() {
		var err error
		s, err = etcdstore.Open(ctx, cfg)
		opened <- err
	}()
	select {
	case <-held:
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
	p.Block(false)
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
