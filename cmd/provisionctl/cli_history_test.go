package main

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/params"
)

// TestHistoryVerb: what provisionctl's own calls changed reads back with
// history, through the built binary and the wire: each change with its
// revision, time, who (the admin, its address and the daemon), the call,
// the entity and the fields before -> after; filtered by entity, kind,
// who and revisions; as JSON lines; show-controller's history line; bad
// input refused with the reason.
func TestHistoryVerb(t *testing.T) {
	for _, engine := range []provisiondtest.Store{provisiondtest.StoreBolt, provisiondtest.StoreEtcd} {
		t.Run(string(engine), func(t *testing.T) {
			e := startDaemon(t, provisiondtest.WithStore(engine))
			e.ok(t, nil, "add-machine")
			e.ok(t, nil, "remove-machine", "0")
			r := e.ok(t, nil, "history", "--model", "default", "--entity", "machine-0")
			for _, want := range []string{
				`(?m)^\d+ \d{4}-\d\d-\d\dT\S+Z user-admin@127\.0\.0\.1:\d+/\S+ ModelAdmin\.AddMachines machine/0 created \{.*$`,
				`(?m)^\d+ \S+Z user-admin@\S+ ModelAdmin\.RemoveMachines machine/0 life: "alive" -> "dying"$`,
			} {
				if !regexp.MustCompile(want).MatchString(r.stdout) {
					t.Errorf("history of machine-0 lacks %s:\n%s", want, r)
				}
			}
			for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				if !strings.Contains(l, " machine/0 ") {
					t.Errorf("--entity machine-0 printed another entity's change: %s", l)
				}
			}
			// JSON lines, one change each, filtered by who and kind.
			r = e.ok(t, nil, "history", "--who", "user-admin", "--kind", "machine", "--format", "json")
			var revs []uint64
			for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				var c params.HistoryChange
				if err := json.Unmarshal([]byte(l), &c); err != nil {
					t.Fatalf("not a JSON line: %q: %v", l, err)
				}
				if c.Who != "user-admin" || c.Kind != "machine" || c.Call == "" || c.Daemon == "" || c.Time == "" {
					t.Errorf("history --who user-admin --kind machine: %+v", c)
				}
				revs = append(revs, c.Revision)
			}
			if len(revs) == 0 {
				t.Fatalf("no changes as JSON:\n%s", r)
			}
			// --since and --until as revisions bound it.
			first := revs[0]
			r = e.ok(t, nil, "history", "--since", itoa(first), "--until", itoa(first), "--format", "json")
			for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				var c params.HistoryChange
				if err := json.Unmarshal([]byte(l), &c); err != nil || c.Revision != first {
					t.Errorf("--since %d --until %d: %s (%v)", first, first, l, err)
				}
			}
			// --limit stops early.
			if r := e.ok(t, nil, "history", "--limit", "2"); strings.Count(r.stdout, "\n") != 2 {
				t.Errorf("--limit 2 printed:\n%s", r.stdout)
			}
			// show-controller says what is kept.
			r = e.ok(t, nil, "show-controller")
			if !regexp.MustCompile(`history +retention 7d, from revision \d+ \(\d{4}-`).MatchString(r.stdout) {
				t.Errorf("show-controller lacks the history:\n%s", r.stdout)
			}
			for _, bad := range []struct {
				args []string
				want string
			}{
				{[]string{"history", "--since", "yesterday"}, `since "yesterday" not valid: want a revision (12345) or an RFC 3339 time`},
				{[]string{"history", "--since", "0"}, `a revision is a number from 1`},
				{[]string{"history", "--kind", "unit", "--entity", "machine-0"}, `entity "machine-0" is a machine, not a unit`},
				{[]string{"history", "--limit", "-1"}, `--limit -1`},
				{[]string{"history", "--model", "no-such"}, `model "no-such" not found`},
			} {
				if r := e.run(t, bad.args...); r.code == 0 || !strings.Contains(r.stderr, bad.want) {
					t.Errorf("provisionctl %s: want an error saying %q, got %s", strings.Join(bad.args, " "), bad.want, r)
				}
			}
		})
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
