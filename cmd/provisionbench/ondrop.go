package main

import (
	"context"
	"sync"

	"github.com/provisiond/provisiond/rpc/client"
)

// dropWatch runs what agents do when their connections end, without a
// goroutine waiting on each connection: a connection's end
// (client.Conn.OnEnd) starts a goroutine of the watch's for it, until
// stop. Its context, which those goroutines get, ends at stop.
type dropWatch struct {
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex // orders stop's cancel before its Wait against Add
	wg     sync.WaitGroup
}

func newDropWatch(ctx context.Context) *dropWatch {
	w := &dropWatch{}
	w.ctx, w.cancel = context.WithCancel(ctx)
	return w
}

// on runs fn(ctx) on a goroutine of its own once c has ended, unless the
// watch has stopped by then. It takes no lock of the caller's: c's end
// may come from a Close made under one.
func (w *dropWatch) on(c *client.Conn, fn func(ctx context.Context)) {
	c.OnEnd(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.ctx.Err() != nil {
			return
		}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			fn(w.ctx)
		}()
	})
}

// stop ends the watch: ends after it start nothing, and it waits for
// the goroutines started (their context ended).
func (w *dropWatch) stop() {
	w.mu.Lock()
	w.cancel()
	w.mu.Unlock()
	w.wg.Wait()
}
