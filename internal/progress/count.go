package progress

import "fmt"

// Count redraws the bar for done of total items named unit ("records"),
// as Update does for bytes: at most every 100 ms and always at the end.
func (p *Bar) Count(done, total int64, unit string) {
	if !p.tty || (p.since() && done != total) {
		return
	}
	p.shown = true
	if total <= 0 {
		fmt.Fprintf(p.w, "\r%s %d %s", p.label, done, unit)
		return
	}
	fmt.Fprintf(p.w, "\r%s %s %d / %d %s", p.label, p.draw(done, total), done, total, unit)
}
