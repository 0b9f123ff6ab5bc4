package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// progress shows one status line on a terminal (stderr), redrawn in
// place; on anything else it prints nothing.
type progress struct {
	w     io.Writer
	tty   bool
	mu    sync.Mutex
	phase string
	extra func() string
	last  int
	stop  chan struct{}
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
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
	p.phase, p.extra = phase, extra
	p.mu.Unlock()
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
