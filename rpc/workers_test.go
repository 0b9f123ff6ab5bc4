package rpc

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestWorkerPoolRunsEverything(t *testing.T) {
	p := newWorkerPool(time.Second)
	defer p.stop()
	var n atomic.Int64
	var wg sync.WaitGroup
	for range 1000 {
		wg.Add(1)
		p.run(func() { n.Add(1); wg.Done() })
	}
	wg.Wait()
	if n.Load() != 1000 {
		t.Fatalf("ran %d of 1000", n.Load())
	}
}

// A blocked function never holds up the next: run starts a new worker
// when none is idle.
func TestWorkerPoolNeverWaits(t *testing.T) {
	p := newWorkerPool(time.Second)
	defer p.stop()
	release := make(chan struct{})
	var started sync.WaitGroup
	for range 50 {
		started.Add(1)
		p.run(func() { started.Done(); <-release })
	}
	done := make(chan struct{})
	go func() { started.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("blocked functions held up later ones")
	}
	close(release)
}

// Idle workers exit after the idle time, and at once when stopped; run
// still works after stop. The pool's own workers are counted, exactly.
func TestWorkerPoolIdleWorkersExit(t *testing.T) {
	p := newWorkerPool(50 * time.Millisecond)
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		p.run(func() { time.Sleep(time.Millisecond); wg.Done() })
	}
	wg.Wait()
	if n := p.live.Load(); n < 1 || n > 20 {
		t.Fatalf("%d workers for 20 functions", n)
	}
	waitWorkers(t, p)

	p = newWorkerPool(time.Hour)
	for range 20 {
		wg.Add(1)
		p.run(func() { time.Sleep(time.Millisecond); wg.Done() })
	}
	wg.Wait()
	p.stop()
	waitWorkers(t, p)
	ran := make(chan struct{})
	p.run(func() { close(ran) })
	<-ran
	waitWorkers(t, p)
}

// waitWorkers waits (bounded) until p has no worker left.
func waitWorkers(t *testing.T, p *workerPool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.live.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d workers left: idle workers did not exit", p.live.Load())
		}
		time.Sleep(time.Millisecond)
	}
}

// deep uses about n KiB of stack, as a handler decoding JSON and reading
// bbolt does.
//
//go:noinline
func deep(n int) byte {
	var buf [1024]byte
	buf[n%len(buf)] = byte(n)
	if n == 0 {
		return buf[0]
	}
	return deep(n-1) + buf[n%len(buf)]
}

// BenchmarkHandlerSpawn compares a new goroutine per request (what the
// connection did) with the worker pool, for a handler using 16 KiB of
// stack: the new goroutine grows its stack by copying on every request.
func BenchmarkHandlerSpawn(b *testing.B) {
	for _, tc := range []struct {
		name  string
		spawn func(p *workerPool, fn func())
	}{
		{"goroutine", func(_ *workerPool, fn func()) { go fn() }},
		{"pool", (*workerPool).run},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := newWorkerPool(time.Second)
			defer p.stop()
			var wg sync.WaitGroup
			b.ReportAllocs()
			for b.Loop() {
				wg.Add(8)
				for range 8 {
					tc.spawn(p, func() { deep(16); wg.Done() })
				}
				wg.Wait()
			}
		})
	}
}
