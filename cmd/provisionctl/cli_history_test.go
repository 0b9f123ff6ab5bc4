package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/store"
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
			// From the start: it says where the history kept begins.
			if !regexp.MustCompile(`(?m)^The history kept begins at revision \d+ \(\d{4}-\d\d-\d\dT\S+Z\); nothing older is kept\.$`).MatchString(r.stderr) {
				t.Errorf("history from the start does not say where the history kept begins:\n%s", r)
			}
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
			if strings.Contains(r.stderr, "history kept begins") {
				t.Errorf("history --since %d (after the oldest kept) names the oldest kept:\n%s", first, r)
			}
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

// TestHistoryFollow: history --follow --from REV, through the built
// binary, prints the changes after REV, then each change as it commits,
// once each and in revision order, across a restart of the daemon (bbolt:
// stopped and started on the same data dir) in the middle; a later run
// --from the last revision it printed prints nothing, and --from REV the
// same lines it printed. Interrupted, it exits 0. A --from that is not a
// revision is a usage error; one older than the history kept fails naming
// the oldest revision kept.
func TestHistoryFollow(t *testing.T) {
	if bin == "" {
		t.Skip("builds and runs the binary")
	}
	e, cfg, stop := startRestartable(t)
	d := e.d
	var err error
	model := d.Credentials().DefaultModelUUID
	e.ok(t, nil, "add-machine")
	before := historyLines(t, e.ok(t, nil, "history", "-m", "default", "--format", "json").stdout)
	from := before[len(before)-1].Revision

	cmd := e.command(t, nil, "history", "--follow", "-m", "default", "--from", itoa(from), "--format", "json")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errs := &lockedBuffer{}
	cmd.Stderr = writerFunc(func(p []byte) (int, error) { errs.WriteString(string(p)); return len(p), nil })
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var got []string
	// until reads lines until machine id's creation is printed.
	until := func(id string) {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("output ended: %s", errs)
				}
				got = append(got, l)
				c := historyLines(t, l)[0]
				if c.Kind == "machine" && c.ID == id && c.Op == "created" {
					return
				}
			case <-time.After(waitLimit):
				t.Fatalf("machine %s's creation not printed; so far:\n%s\n%s", id, strings.Join(got, "\n"), errs)
			}
		}
	}
	add := func() {
		t.Helper()
		if _, err := d.State().AddMachine(t.Context(), model, state.MachineParams{}); err != nil {
			t.Fatal(err)
		}
	}
	add()
	add()
	until("2")
	stop(d)
	if d, err = daemon.Start(cfg); err != nil {
		t.Fatal(err)
	}
	defer stop(d)
	add()
	add()
	until("4")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		got = append(got, l)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("history --follow exit: %v\n%s", err, errs)
	}
	if !strings.Contains(errs.String(), "Reconnected; following the history after revision") {
		t.Errorf("stderr:\n%s", errs)
	}
	// Once each, in order, none at or before --from.
	seen := map[string]bool{}
	created := map[string]int{}
	last := from
	for _, c := range historyLines(t, strings.Join(got, "\n")) {
		if c.Revision <= from || c.Revision < last {
			t.Errorf("revision %d after %d (--from %d)", c.Revision, last, from)
		}
		last = c.Revision
		k := fmt.Sprintf("%d %s/%s %s %s", c.Revision, c.Kind, c.ID, c.Op, c.Field)
		if seen[k] {
			t.Errorf("printed twice: %s", k)
		}
		seen[k] = true
		if c.Kind == "machine" && c.Op == "created" {
			created[c.ID]++
		}
	}
	if want := map[string]int{"1": 1, "2": 1, "3": 1, "4": 1}; !maps.Equal(created, want) {
		t.Errorf("machines created: %v, want %v", created, want)
	}
	// A run --from REV prints what the follow printed; --from the last
	// revision printed, nothing.
	if r := e.ok(t, nil, "history", "-m", "default", "--from", itoa(from), "--format", "json"); strings.TrimSpace(r.stdout) != strings.Join(got, "\n") {
		t.Errorf("--from %d printed\n%s\nthe follow printed\n%s", from, r.stdout, strings.Join(got, "\n"))
	}
	if r := e.ok(t, nil, "history", "-m", "default", "--from", itoa(last)); r.stdout != "" {
		t.Errorf("--from %d (the last printed) printed:\n%s", last, r.stdout)
	}
	for _, bad := range []string{"abc", "0", "-3"} {
		if r := e.run(t, "history", "--from", bad); r.code != 2 || !strings.Contains(r.stderr, "want a revision") {
			t.Errorf("history --from %s: %s", bad, r)
		}
	}
	if r := e.run(t, "history", "--follow", "--until", "5"); r.code != 2 {
		t.Errorf("history --follow --until 5: %s", r)
	}
	// Pruned past --from (a retention of 2 revisions, the pruner run as
	// the history pruner runs it): the error names the oldest kept.
	pruner := d.State().Store().(interface {
		PruneHistory(ctx context.Context, r store.Retention, now time.Time, max int) (int, error)
	})
	if n, err := pruner.PruneHistory(t.Context(), store.Retention{Revisions: 2}, time.Now(), 0); err != nil || n == 0 {
		t.Fatalf("PruneHistory = %d, %v", n, err)
	}
	for _, args := range [][]string{{"history", "--from", itoa(from)}, {"history", "--follow", "-m", "default", "--from", itoa(from)}} {
		if r := e.run(t, args...); r.code != 1 || !regexp.MustCompile(`the history after revision \d+ is no longer kept: the oldest revision kept is \d+`).MatchString(r.stderr) {
			t.Errorf("provisionctl %s after pruning: %s", strings.Join(args, " "), r)
		}
	}
}

// historyLines reads history's JSON lines.
func historyLines(t *testing.T, out string) []params.HistoryChange {
	t.Helper()
	var cs []params.HistoryChange
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var c params.HistoryChange
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("not a JSON line: %q: %v", l, err)
		}
		cs = append(cs, c)
	}
	return cs
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// startRestartable starts a daemon on bbolt in a data dir of its own, on
// a fixed address, so that a test can stop it and start it again (cfg) as
// an operator restarts it; stop shuts one down.
func startRestartable(t *testing.T) (e *env, cfg daemon.Config, stop func(*daemon.Daemon)) {
	t.Helper()
	dir := t.TempDir()
	cfg = daemon.Default(dir)
	cfg.Addr = closedAddr(t)
	d, err := daemon.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop = func(d *daemon.Daemon) {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}
	return &env{d: d, creds: filepath.Join(dir, daemon.CredentialsFile), home: t.TempDir()}, cfg, stop
}
