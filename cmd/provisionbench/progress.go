package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pbar "github.com/provisiond/provisiond/internal/progress"
)

// progress shows one status line on a terminal (stderr), redrawn in
// place every 250 ms by its own goroutine (stopped by done); on anything
// else it prints nothing. A counted phase (count: connecting 100,000
// agents takes minutes) shows a bar, the rate and the time left.
type progress struct {
	w     io.Writer
	tty   bool
	mu    sync.Mutex
	phase string
	extra func() string
	last  int
	stop  chan struct{}

	// A counted phase: done of total since started.
	counted *atomic.Int64
	total   int64
	started time.Time
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w, tty: pbar.IsTerminal(w)}
	if p.tty {
		p.stop = make(chan struct{})
		go p.loop()
	}
	return p
}

// set changes the phase shown, dropping any counter.
func (p *progress) set(phase string) { p.setWith(phase, nil) }

// setWith shows phase followed by what extra returns, refreshed.
func (p *progress) setWith(phase string, extra func() string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.phase, p.extra, p.counted = phase, extra, nil
	p.mu.Unlock()
}

// count shows phase with a bar of done out of total, the rate since now
// and the time left, followed by what extra returns (nil: nothing).
func (p *progress) count(phase string, done *atomic.Int64, total int64, extra func() string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.phase, p.extra, p.counted, p.total, p.started = phase, extra, done, total, time.Now()
	p.mu.Unlock()
}

// countLine is a counted phase's figures: "[====      ]  40% 40000/100000
// 1234/s, 48s left".
func countLine(done, total int64, elapsed time.Duration) string {
	const width = 20
	if total <= 0 {
		return fmt.Sprint(done)
	}
	d := min(max(done, 0), total)
	bar := strings.Repeat("=", int(d*width/total)) + strings.Repeat(" ", width-int(d*width/total))
	line := fmt.Sprintf("[%s] %3d%% %d/%d", bar, d*100/total, done, total)
	if secs := elapsed.Seconds(); secs >= 1 && d > 0 {
		rate := float64(d) / secs
		line += fmt.Sprintf(" %.0f/s", rate)
		if d < total {
			line += fmt.Sprintf(", %s left", (time.Duration(float64(total-d)/rate) * time.Second).Round(time.Second))
		}
	}
	return line
}

func (p *progress) loop() {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.draw()
		}
	}
}

func (p *progress) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	line := p.phase
	if p.counted != nil {
		line += " " + countLine(p.counted.Load(), p.total, time.Since(p.started))
	}
	if p.extra != nil {
		line += " " + p.extra()
	}
	pad := max(0, p.last-len(line))
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
	p.last = len(line)
}

// done clears the line and stops redrawing.
func (p *progress) done() {
	if p == nil || !p.tty {
		return
	}
	close(p.stop)
	p.mu.Lock()
	fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.last))
	p.mu.Unlock()
}
