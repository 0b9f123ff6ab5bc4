//go:build failpoints

package failpoint

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Enabled is true in a build with -tags failpoints.
const Enabled = true

type point struct {
	percent int
	action  string
	delay   time.Duration
}

var points = func() map[string]point {
	ps, err := Parse(os.Getenv(EnvVar))
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", EnvVar, err)
		os.Exit(2)
	}
	return ps
}()

// Parse reads the failpoints of a $PROVISIOND_FAILPOINTS value.
func Parse(s string) (map[string]point, error) {
	ps := map[string]point{}
	for item := range strings.SplitSeq(s, ";") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, spec, ok := strings.Cut(item, "=")
		if !ok || !slices.Contains(Points, name) {
			return nil, fmt.Errorf("%q: want POINT=[P%%]ACTION, POINT one of %v", item, Points)
		}
		p := point{percent: 100}
		if pc, rest, ok := strings.Cut(spec, "%"); ok {
			n, err := strconv.Atoi(pc)
			if err != nil || n < 1 || n > 100 {
				return nil, fmt.Errorf("%q: the share is 1%% to 100%%", item)
			}
			p.percent, spec = n, rest
		}
		switch {
		case spec == "crash" || spec == "skip" || spec == "repeat" || spec == "early":
			p.action = spec
		case strings.HasPrefix(spec, "delay(") && strings.HasSuffix(spec, ")"):
			d, err := time.ParseDuration(spec[len("delay(") : len(spec)-1])
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("%q: delay(DURATION), a positive Go duration", item)
			}
			p.action, p.delay = "delay", d
		default:
			return nil, fmt.Errorf("%q: the action is crash, delay(DUR), skip, repeat or early", item)
		}
		ps[name] = p
	}
	return ps, nil
}

// Eval runs the failpoint name: a crash or a delay happens here; the
// planted bugs' actions are returned for the call site to do.
func Eval(name string) Action {
	p, ok := points[name]
	if !ok || (p.percent < 100 && rand.IntN(100) >= p.percent) {
		return None
	}
	switch p.action {
	case "crash":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	case "delay":
		time.Sleep(p.delay)
	case "skip":
		return Skip
	case "repeat":
		return Repeat
	case "early":
		return Early
	}
	return None
}
