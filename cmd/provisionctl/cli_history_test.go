package main

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

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

// withoutPresence removes the agents' presence (agent-presence,
// provisioner-agent) from a decoded status document, at any depth: the
// history does not keep it, so status --at never shows it.
func withoutPresence(v any) any {
	switch v := v.(type) {
	case map[string]any:
		delete(v, "agent-presence")
		delete(v, "provisioner-agent")
		for k, x := range v {
			v[k] = withoutPresence(x)
		}
	case []any:
		for i, x := range v {
			v[i] = withoutPresence(x)
		}
	}
	return v
}

// TestStatusAtVerb: status --at, through the built binary, shows a model
// changed in known steps by provisionctl as status showed it live after
// each step (json, presence aside: every machine stays pending, which
// presence never turns down), at the step's revision and at its time; the
// table too; the point shown on stderr; bad points refused with the exit
// status of their kind. On bbolt and etcd.
func TestStatusAtVerb(t *testing.T) {
	for _, engine := range []provisiondtest.Store{provisiondtest.StoreBolt, provisiondtest.StoreEtcd} {
		t.Run(string(engine), func(t *testing.T) {
			e := startDaemon(t, provisiondtest.WithStore(engine))
			type step struct {
				rev  uint64
				at   string
				live any
			}
			var steps []step
			latest := func() uint64 {
				r := e.ok(t, nil, "history", "--format", "json")
				lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
				var c params.HistoryChange
				if err := json.Unmarshal([]byte(lines[len(lines)-1]), &c); err != nil {
					t.Fatalf("history: %v\n%s", err, r)
				}
				return c.Revision
			}
			for _, args := range [][]string{
				{"add-machine", "--constraints", "mem=4G"},
				{"add-machine", "lxd:0"},
				{"add-machine", "-n", "2"},
				{"remove-machine", "0/lxd/0"},
				{"remove-machine", "2"},
			} {
				e.ok(t, nil, args...)
				var live any
				e.ok(t, &live, "status", "--format", "json")
				steps = append(steps, step{latest(), time.Now().UTC().Format(time.RFC3339Nano), withoutPresence(live)})
			}
			for i, s := range steps {
				for _, at := range []string{itoa(s.rev), s.at} {
					var got any
					r := e.ok(t, &got, "status", "--at", at, "--format", "json")
					if !reflect.DeepEqual(got, s.live) {
						t.Errorf("step %d: status --at %s:\n%s\nwant (live, presence aside) %v", i, at, r.stdout, s.live)
					}
					if !strings.Contains(r.stderr, "status as at revision ") {
						t.Errorf("status --at %s: stderr %q lacks the point", at, r.stderr)
					}
				}
			}
			// The table, at the step before the machine 2 went: it is there.
			r := e.ok(t, nil, "status", "--at", itoa(steps[3].rev))
			if !regexp.MustCompile(`(?m)^2 +`).MatchString(r.stdout) || !strings.Contains(r.stderr, "status as at revision "+itoa(steps[3].rev)+" (") {
				t.Errorf("status --at %d (table) lacks machine 2 or the point:\n%s", steps[3].rev, r)
			}
			for _, bad := range []struct {
				args []string
				code int
				want string
			}{
				{[]string{"status", "--at", itoa(steps[len(steps)-1].rev + 1000)}, 2, "is in the future: the latest is"},
				{[]string{"status", "--at", "last tuesday"}, 2, `at "last tuesday" not valid`},
				{[]string{"status", "--at", ""}, 2, "want a revision (12345) or an RFC 3339 time"},
				{[]string{"status", "--at", "1", "--watch"}, 2, "--at and --watch do not go together"},
				{[]string{"status", "--at", "2001-01-01T00:00:00Z"}, 1, "is older than the history kept: the oldest point kept is revision "},
			} {
				if r := e.run(t, bad.args...); r.code != bad.code || !strings.Contains(r.stderr, bad.want) {
					t.Errorf("provisionctl %q: want exit %d saying %q, got %s", bad.args, bad.code, bad.want, r)
				}
			}
		})
	}
}
