// Package progress draws a one-line progress bar on a terminal (and
// nothing elsewhere) for the commands' long transfers: provisiond backup's
// download, provisionctl add-agent-binaries' upload, provisiond migrate's
// records (Count). A Bar belongs to the goroutine that moves the data; it
// is not safe for concurrent use.
package progress

import (
	"fmt"
	"io"
	"os"
	"time"
)

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Bar is a progress bar labelled label, drawn on w when it is a terminal.
type Bar struct {
	w     io.Writer
	label string
	tty   bool
	last  time.Time
	shown bool
}

// New returns a bar on w (drawn only when w is a terminal).
func New(w io.Writer, label string) *Bar { return &Bar{w: w, label: label, tty: IsTerminal(w)} }

// Update redraws the bar for done of total bytes (total <= 0: unknown), at
// most every 100 ms and always at the end.
func (p *Bar) Update(done, total int64) {
	if !p.tty || (p.since() && done != total) {
		return
	}
	p.shown = true
	if total <= 0 {
		fmt.Fprintf(p.w, "\r%s %s", p.label, MiB(done))
		return
	}
	fmt.Fprintf(p.w, "\r%s %s %s / %s", p.label, p.draw(done, total), MiB(done), MiB(total))
}

// since reports whether the bar was drawn less than 100 ms ago, and
// otherwise notes that it is drawn now.
func (p *Bar) since() bool {
	if time.Since(p.last) < 100*time.Millisecond {
		return true
	}
	p.last = time.Now()
	return false
}

// draw is the bar and percentage of done of total (> 0).
func (p *Bar) draw(done, total int64) string {
	const width = 30
	done = min(max(done, 0), total)
	n := int(done * width / total)
	bar := make([]byte, width)
	for i := range bar {
		bar[i] = ' '
		if i < n {
			bar[i] = '='
		}
	}
	return fmt.Sprintf("[%s] %3d%%", bar, done*100/total)
}

// Done ends the bar's line, if it drew one.
func (p *Bar) Done() {
	if p.shown {
		fmt.Fprintln(p.w)
	}
}

// Reader counts what r gives through the bar, of total bytes.
func (p *Bar) Reader(r io.Reader, total int64) io.Reader {
	return &reader{r: r, bar: p, total: total}
}

type reader struct {
	r     io.Reader
	bar   *Bar
	done  int64
	total int64
}

func (r *reader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.done += int64(n)
	r.bar.Update(r.done, r.total)
	return n, err
}

// MiB formats a byte count in MiB with one decimal.
func MiB(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
