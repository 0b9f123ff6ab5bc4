package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/leaktest"
	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"

	_ "github.com/provisiond/provisiond/provisiondtest/embeddedetcd" // WithStore(StoreEtcd)
)

// bin is the provisionctl binary built by TestMain ("" with -short).
var bin string

// waitLimit bounds every wait on a process.
const waitLimit = 30 * time.Second

func TestMain(m *testing.M) {
	flag.Parse()
	var dir string
	if !testing.Short() {
		var err error
		if dir, err = os.MkdirTemp("", "provisionctl-test-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		bin = filepath.Join(dir, "provisionctl")
		cmd := exec.Command("go", "build", "-o", bin, ".")
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "go build:", err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	// os.Exit skips deferred calls: remove the binary's directory first.
	code := leaktest.Run(m)
	if dir != "" {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// env is a daemon started in-process and the environment that makes the
// binary find it.
type env struct {
	d     *daemon.Daemon
	creds string // its credentials.yaml
	home  string // HOME of the binary, with no credentials in it
}

func startDaemon(t *testing.T, opts ...provisiondtest.Option) *env {
	t.Helper()
	if bin == "" {
		t.Skip("builds and runs the binary")
	}
	srv := provisiondtest.Start(t, opts...)
	return &env{d: testkit.Daemon(srv), creds: srv.CredentialsFile(), home: t.TempDir()}
}

type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
}

// command prepares the binary with a clean environment: HOME without
// credentials, $PROVISIOND_CREDENTIALS pointing at the daemon's file.
func (e *env) command(t *testing.T, environ []string, args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append([]string{"HOME=" + e.home, "PATH=" + os.Getenv("PATH"), "PROVISIOND_CREDENTIALS=" + e.creds}, environ...)
	return cmd
}

// runEnv runs the binary to completion with extra environment.
func (e *env) runEnv(t *testing.T, environ []string, args ...string) result {
	t.Helper()
	cmd := e.command(t, environ, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %q: %v", args, err)
	}
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func (e *env) run(t *testing.T, args ...string) result {
	t.Helper()
	return e.runEnv(t, nil, args...)
}

// ok runs the binary, requires exit 0 and decodes stdout (JSON) into v
// when v is not nil.
func (e *env) ok(t *testing.T, v any, args ...string) result {
	t.Helper()
	r := e.run(t, args...)
	if r.code != 0 {
		t.Fatalf("provisionctl %s: %s", strings.Join(args, " "), r)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
			t.Fatalf("provisionctl %s: stdout is not one JSON value: %v\n%s", strings.Join(args, " "), err, r)
		}
	}
	return r
}

type summary struct {
	Name         string `json:"name"`
	UUID         string `json:"uuid"`
	Type         string `json:"type"`
	Life         string `json:"life"`
	IsController bool   `json:"is-controller"`
}

// mutationOut is the json of a mutating verb (see mutation).
type mutationOut struct {
	Model     string              `json:"model"`
	ModelUUID string              `json:"model-uuid"`
	Added     map[string][]string `json:"added"`
	Changed   map[string][]string `json:"changed"`
	Dying     map[string][]string `json:"dying"`
	Removed   map[string][]string `json:"removed"`
	Result    json.RawMessage     `json:"result"`
}

// mutate runs a mutating verb with --format json, requires exit 0 and
// the mutation shape with every key present, and decodes its result into
// v when v is not nil.
func (e *env) mutate(t *testing.T, v any, args ...string) (mutationOut, result) {
	t.Helper()
	r := e.ok(t, nil, append(args, "--format", "json")...)
	var keys map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &keys); err != nil {
		t.Fatalf("provisionctl %s: stdout is not one JSON object: %v\n%s", strings.Join(args, " "), err, r)
	}
	for _, k := range []string{"model", "model-uuid", "added", "changed", "dying", "removed", "result"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("provisionctl %s: no key %q in %s", strings.Join(args, " "), k, r.stdout)
		}
	}
	var m mutationOut
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatal(err)
	}
	if v != nil {
		if err := json.Unmarshal(m.Result, v); err != nil {
			t.Fatalf("provisionctl %s: result: %v\n%s", strings.Join(args, " "), err, r)
		}
	}
	return m, r
}

func TestWalkthrough(t *testing.T) {
	e := startDaemon(t)
	st := e.d.State()

	var list struct{ Models []summary }
	e.ok(t, &list, "models", "--format", "json")
	if len(list.Models) != 2 || list.Models[0].Name != "controller" || !list.Models[0].IsController ||
		list.Models[1].Name != "default" || list.Models[1].UUID != e.d.Credentials().DefaultModelUUID {
		t.Fatalf("models = %+v", list)
	}

	var added summary
	mut, r := e.mutate(t, &added, "add-model", "k8s", "--type", "caas", "--config", "n=3", "--config", "b=true",
		"--config", "s=hello, world", "--config", `q="42"`)
	m, err := st.ModelByName(t.Context(), "k8s")
	if err != nil {
		t.Fatal(err)
	}
	if added.Name != "k8s" || added.Type != "caas" || added.UUID != m.UUID || r.stderr != "" ||
		mut.Model != "k8s" || mut.ModelUUID != m.UUID || !slices.Equal(mut.Added["models"], []string{"k8s"}) {
		t.Fatalf("add-model printed %+v %+v (model %+v)\n%s", mut, added, m, r)
	}
	if m.Config["n"] != 3.0 || m.Config["b"] != true || m.Config["s"] != "hello, world" || m.Config["q"] != "42" {
		t.Errorf("config stored = %v", m.Config)
	}
	// The table format: a message on stderr, nothing on stdout.
	if r := e.ok(t, nil, "add-model", "vms"); r.stdout != "" || !strings.Contains(r.stderr, `Added iaas model "vms"`) {
		t.Errorf("add-model (table):\n%s", r)
	}

	var cfg struct {
		Model  string
		UUID   string
		Config map[string]any
	}
	if mut, _ := e.mutate(t, &cfg, "model-config", "-m", "k8s", "x=1.5", "num-provision-workers=8", "--reset", "n,s"); !slices.Equal(mut.Changed["models"], []string{"k8s"}) {
		t.Errorf("model-config set: %+v", mut)
	}
	// The model holds Juju's defaults (a CAAS model's), with its own keys
	// over them; n and s, which have no default, are gone.
	wantCfg := state.ModelConfigDefaults(state.ModelTypeCAAS)
	maps.Copy(wantCfg, map[string]any{"agent-version": "3.3.0", "b": true, "q": "42", "x": 1.5, "num-provision-workers": 8.0})
	if cfg.Model != "k8s" || cfg.UUID != m.UUID || !mapsEqual(cfg.Config, wantCfg) {
		t.Errorf("model-config set printed %+v", cfg)
	}
	var one any
	if e.ok(t, &one, "model-config", "--model", "k8s", "q", "--format", "json"); one != "42" {
		t.Errorf("model-config KEY = %#v", one)
	}
	// The table says where each value comes from, as juju model-config.
	r = e.ok(t, nil, "model-config", "--model", "k8s")
	for _, row := range []string{
		`KEY +FROM +VALUE`, `agent-version +model +3\.3\.0`, `b +model +true`, `num-provision-workers +model +8`,
		`q +model +"42"`, `resource-tags +default +""`, `update-status-hook-interval +default +5m`, `x +model +1\.5`,
	} {
		if !regexp.MustCompile(`(?m)^` + row + `$`).MatchString(r.stdout) {
			t.Errorf("model-config table has no row %s:\n%s", row, r.stdout)
		}
	}
	// --reset of a key with a default sets the default back.
	e.ok(t, nil, "model-config", "-m", "k8s", "--reset", "num-provision-workers")
	if r = e.ok(t, nil, "model-config", "-m", "k8s"); !regexp.MustCompile(`(?m)^num-provision-workers +default +16$`).MatchString(r.stdout) {
		t.Errorf("model-config table after --reset:\n%s", r.stdout)
	}
	r = e.ok(t, nil, "model-config", "-m", "k8s", "--format", "yaml")
	var y map[string]any
	if err := yaml.Unmarshal([]byte(r.stdout), &y); err != nil || y["model"] != "k8s" || y["config"].(map[string]any)["q"] != "42" {
		t.Errorf("model-config yaml: %v\n%s", err, r.stdout)
	}

	var ccfg struct{ Config map[string]any }
	if mut, _ := e.mutate(t, &ccfg, "controller-config", "audit=true", "max-lines=100"); mut.Model != "" ||
		!slices.Equal(mut.Changed["controller"], []string{e.d.Credentials().ControllerUUID}) {
		t.Errorf("controller-config set: %+v", mut)
	}
	if ccfg.Config["audit"] != true || ccfg.Config["max-lines"] != 100.0 || ccfg.Config["controller-uuid"] != e.d.Credentials().ControllerUUID {
		t.Errorf("controller-config set printed %v", ccfg.Config)
	}
	r = e.ok(t, nil, "controller-config")
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if len(l) > 80 {
			t.Errorf("controller-config line wider than 80 columns: %q", l)
		}
	}
	if !strings.Contains(r.stdout, "ca-cert          -----BEGIN CERTIFICATE-----...\n") {
		t.Errorf("controller-config table:\n%s", r.stdout)
	}

	// remove-model: an empty model goes, one with a machine is dying.
	if _, err := st.AddMachine(t.Context(), m.UUID, state.MachineParams{}); err != nil {
		t.Fatal(err)
	}
	var removed summary
	mut, _ = e.mutate(t, &removed, "remove-model", "vms", "-y")
	if removed.Name != "vms" || !slices.Equal(mut.Removed["models"], []string{"vms"}) || len(mut.Dying["models"]) != 0 {
		t.Errorf("remove-model vms printed %+v %+v", mut, removed)
	}
	mut, _ = e.mutate(t, &removed, "remove-model", "k8s", "--yes")
	if removed.Life != "dying" || !slices.Equal(mut.Dying["models"], []string{"k8s"}) || len(mut.Removed["models"]) != 0 {
		t.Errorf("remove-model k8s printed %+v %+v", mut, removed)
	}

	r = e.ok(t, nil, "models")
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	want := []string{
		"NAME        TYPE  LIFE   UUID",
		"controller  iaas  alive  " + e.d.Credentials().ControllerModelUUID,
		"default     iaas  alive  " + e.d.Credentials().DefaultModelUUID,
		"k8s         caas  dying  " + m.UUID,
	}
	if !slices.Equal(lines, want) {
		t.Errorf("models table:\n%s\nwant:\n%s", r.stdout, strings.Join(want, "\n"))
	}
}

func mapsEqual(a, b map[string]any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// Bad input: a clear message on stderr, nothing on stdout, a non-zero exit
// (2 for usage errors found before anything is sent), and no change.
func TestBadInput(t *testing.T) {
	e := startDaemon(t)
	st := e.d.State()
	rev := st.Revision()
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"add-model", "default", "--format", "json"}, 1, `ERROR model "default" already exists`},
		{[]string{"add-model", "My_Model"}, 2, `ERROR model name "My_Model" not valid`},
		{[]string{"add-model", strings.Repeat("a", 64)}, 2, "not valid"},
		{[]string{"add-model", "x", "--type", "vm"}, 2, `ERROR --type "vm": want iaas or caas`},
		{[]string{"add-model", "x", "--config", "novalue"}, 2, `ERROR bad KEY=VALUE "novalue": no "="`},
		{[]string{"add-model", "x", "--config", "=1"}, 2, `ERROR bad KEY=VALUE "=1": empty key`},
		{[]string{"add-model", "x", "--config", "a b=1"}, 2, `ERROR config key "a b" not valid`},
		{[]string{"add-model", "x", "--config", "uuid=1"}, 2, `ERROR config key "uuid" is read-only`},
		{[]string{"add-model", "x", "--config", "a=1", "--config", "a=2"}, 2, `ERROR key "a" given twice`},
		{[]string{"add-model"}, 2, "ERROR add-model needs NAME, got 0 arguments"},
		{[]string{"add-model", "a", "b"}, 2, "ERROR add-model needs NAME, got 2 arguments"},
		{[]string{"completion", "tcsh"}, 2, `ERROR completion has no script for "tcsh": the shells are bash, fish, powershell, zsh`},
		{[]string{"completion"}, 2, "ERROR completion needs a shell: bash, fish, powershell, zsh"},
		{[]string{"remove-model"}, 2, "ERROR remove-model needs NAME, got 0 arguments"},
		{[]string{"remove-model", "controller", "-y", "--format", "json"}, 1, "ERROR cannot remove the controller model"},
		{[]string{"remove-model", "nope", "-y"}, 1, `ERROR model "nope" not found`},
		{[]string{"model-config", "-m", "nope"}, 1, `ERROR model "nope" not found`},
		{[]string{"model-config", "-m", "nope", "a=1"}, 1, `ERROR model "nope" not found`},
		{[]string{"model-config", "a=1", "b"}, 2, `ERROR bad KEY=VALUE "b": no "="`},
		{[]string{"model-config", "a=1", "--reset", "a"}, 2, `ERROR config key "a" is both set and unset`},
		{[]string{"model-config", "type=caas"}, 2, `ERROR config key "type" is read-only`},
		{[]string{"model-config", "num-provision-workers=0"}, 2, `ERROR model config "num-provision-workers": 0 is out of range (1 to 100)`},
		{[]string{"model-config", "update-status-hook-interval=5"}, 2, `ERROR model config "update-status-hook-interval": want a string, got the number 5`},
		{[]string{"model-config", "firewall-mode=global"}, 2, `ERROR model config "firewall-mode" cannot change from the string "instance" to the string "global"`},
		{[]string{"model-config", "never-set", "--format", "json"}, 1, `ERROR model "default" has no key "never-set"`},
		{[]string{"controller-config", "ca-cert=x"}, 2, `ERROR config key "ca-cert" is read-only`},
		{[]string{"controller-config", "--reset", "controller-uuid"}, 2, `ERROR config key "controller-uuid" is read-only`},
		{[]string{"watch", "-m", "nope", "--format", "json"}, 1, `ERROR model "nope" not found`},
		{[]string{"add-machine", "--base", "jammy"}, 2, `ERROR base "jammy" not valid: want OS@CHANNEL`},
		{[]string{"add-machine", "lxd:0"}, 1, "ERROR machine 0 not found"},
		{[]string{"remove-machine", "0"}, 1, "ERROR machine 0 not found"},
		{[]string{"add-subnet", "10.0.0.0/24", "--space", "nope", "--zone", "z", "--provider-id", "p"}, 1, `ERROR space "nope" not found`},
		{[]string{"status", "extra"}, 2, `ERROR status takes no arguments, got ["extra"]`},
		{[]string{"models", "extra"}, 2, `ERROR models takes no arguments, got ["extra"]`},
		{[]string{"models", "--format", "xml"}, 2, `invalid argument "xml" for "--format" flag: want one of table, json, yaml`},
		{[]string{"models", "--nope"}, 2, "ERROR unknown flag: --nope"},
		{[]string{"frobnicate"}, 2, `ERROR unknown command "frobnicate" for "provisionctl"`},
		{[]string{"models", "--credentials", "/nonexistent/credentials.yaml"}, 1,
			"ERROR no credentials file /nonexistent/credentials.yaml: start provisiond, or pass --credentials FILE or $PROVISIOND_CREDENTIALS"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := e.run(t, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) || r.stdout != "" {
				t.Errorf("want exit %d with %q on stderr and nothing on stdout; got %s", tc.code, tc.msg, r)
			}
		})
	}
	if st.Revision() != rev {
		t.Errorf("bad input wrote: revision %d -> %d", rev, st.Revision())
	}
}

func TestCredentialsLookup(t *testing.T) {
	e := startDaemon(t)
	data, err := os.ReadFile(e.creds)
	if err != nil {
		t.Fatal(err)
	}
	put := func(path string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	xdg := t.TempDir()
	put(filepath.Join(xdg, "provisiond", "credentials.yaml"))
	put(filepath.Join(e.home, ".local", "share", "provisiond", "credentials.yaml"))
	copyPath := filepath.Join(t.TempDir(), "copy.yaml")
	put(copyPath)

	// A daemon that is not there, and a wrong password: clear errors.
	creds, err := credentials.Read(e.creds)
	if err != nil {
		t.Fatal(err)
	}
	down, wrong := *creds, *creds
	down.APIAddresses = []string{closedAddr(t)}
	wrong.AdminPassword = "not-the-password"
	for _, tc := range []struct {
		creds credentials.Credentials
		msg   string
	}{
		{down, "ERROR cannot connect to provisiond: "},
		{wrong, "ERROR login as admin: invalid entity name or password"},
	} {
		path := filepath.Join(t.TempDir(), "credentials.yaml")
		if err := credentials.Write(path, &tc.creds); err != nil {
			t.Fatal(err)
		}
		if r := e.run(t, "models", "--credentials", path); r.code != 1 || !strings.HasPrefix(r.stderr, tc.msg) || r.stdout != "" {
			t.Errorf("want exit 1 and %q; got %s", tc.msg, r)
		}
	}

	for _, tc := range []struct {
		name    string
		environ []string
		args    []string
		ok      bool
	}{
		{"flag beats the environment", []string{"PROVISIOND_CREDENTIALS=" + missing}, []string{"--credentials", copyPath}, true},
		{"bad flag is not skipped", nil, []string{"--credentials", missing}, false},
		{"environment beats the data dir", []string{"PROVISIOND_CREDENTIALS=" + missing}, nil, false},
		{"XDG_DATA_HOME data dir", []string{"PROVISIOND_CREDENTIALS=", "XDG_DATA_HOME=" + xdg}, nil, true},
		{"HOME data dir", []string{"PROVISIOND_CREDENTIALS="}, nil, true},
		{"empty XDG_DATA_HOME data dir", []string{"PROVISIOND_CREDENTIALS=", "XDG_DATA_HOME=" + t.TempDir()}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.runEnv(t, tc.environ, append(tc.args, "models", "--format", "json")...)
			if tc.ok != (r.code == 0) {
				t.Fatalf("%s", r)
			}
			if !tc.ok && !strings.Contains(r.stderr, "ERROR no credentials file") {
				t.Fatalf("%s", r)
			}
		})
	}
}

// watchProc is a running "provisionctl watch".
type watchProc struct {
	cmd   *exec.Cmd
	lines chan string // stdout lines
	exit  chan error
	errs  *lockedBuffer
}

// lockedBuffer is a bytes.Buffer a test may read while a goroutine writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) WriteString(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (e *env) startWatch(t *testing.T, args ...string) *watchProc {
	t.Helper()
	cmd := e.command(t, nil, append([]string{"watch"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &watchProc{cmd: cmd, lines: make(chan string, 100), exit: make(chan error, 1), errs: &lockedBuffer{}}
	// The watch is registered when its announcement reaches stderr.
	ready := make(chan struct{})
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			w.errs.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "Watching model") {
				close(ready)
			}
		}
	}()
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		close(w.lines)
		<-stderrDone
		w.exit <- cmd.Wait()
	}()
	select {
	case <-ready:
	case err := <-w.exit:
		t.Fatalf("watch exited before watching: %v\n%s", err, w.errs)
	case <-time.After(waitLimit):
		t.Fatal("watch did not start")
	}
	return w
}

func (w *watchProc) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case l, ok := <-w.lines:
		if !ok {
			t.Fatal("watch output ended")
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("watch line %q: %v", l, err)
		}
		ts, _ := ev["time"].(string)
		if _, err := time.Parse(time.RFC3339, ts); err != nil {
			t.Errorf("watch line %q: time: %v", l, err)
		}
		delete(ev, "time")
		return ev
	case <-time.After(waitLimit):
		t.Fatal("no watch line")
	}
	return nil
}

func (w *watchProc) wait(t *testing.T) {
	t.Helper()
	select {
	case err := <-w.exit:
		if err != nil {
			t.Fatalf("watch exit: %v\n%s", err, w.errs)
		}
	case <-time.After(waitLimit):
		t.Fatal("watch did not exit")
	}
}

func TestWatch(t *testing.T) {
	e := startDaemon(t)
	creds := e.d.Credentials()
	w := e.startWatch(t, "--format", "json")

	if _, err := e.d.State().AddMachine(t.Context(), creds.DefaultModelUUID, state.MachineParams{}); err != nil {
		t.Fatal(err)
	}
	if ev := w.next(t); ev["model"] != "default" || ev["kind"] != "machine" || ev["id"] != "0" || ev["removed"] != false ||
		ev["value"].(map[string]any)["life"] != "alive" {
		t.Errorf("first event %v", ev)
	}
	// Another model's change is not shown; the next line is the default
	// model's own change.
	e.ok(t, nil, "model-config", "-m", "controller", "a=1")
	e.ok(t, nil, "model-config", "a=1")
	if ev := w.next(t); ev["model"] != "default" || ev["kind"] != "model" || ev["id"] != creds.DefaultModelUUID {
		t.Errorf("second event %v", ev)
	}
	// Interrupted, it stops cleanly with status 0.
	if err := w.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	w.wait(t)
	if _, ok := <-w.lines; ok {
		t.Error("more output after the interrupt")
	}
}

func TestWatchEndsWhenModelRemoved(t *testing.T) {
	e := startDaemon(t)
	e.ok(t, nil, "add-model", "tmp")
	w := e.startWatch(t, "-m", "tmp")
	e.ok(t, nil, "remove-model", "tmp", "-y")
	select {
	case l := <-w.lines:
		if f := strings.Fields(l); len(f) != 4 || f[1] != "model" || f[3] != "removed" {
			t.Errorf("table line %q", l)
		}
	case <-time.After(waitLimit):
		t.Fatal("no watch line")
	}
	w.wait(t)
	if !strings.Contains(w.errs.String(), `Model "tmp" was removed.`) {
		t.Errorf("stderr: %s", w.errs)
	}
}

func TestHelpAndCompletion(t *testing.T) {
	e := startDaemon(t)
	r := e.ok(t, nil, "add-model", "--help")
	if !strings.Contains(r.stdout, "Examples:\n  provisionctl add-model prod") {
		t.Errorf("add-model --help:\n%s", r)
	}
	r = e.ok(t, nil, "completion", "bash")
	if !strings.Contains(r.stdout, "bash completion") {
		t.Errorf("completion bash: %.200s", r.stdout)
	}
	e.ok(t, nil, "add-model", "k8s", "--type", "caas")
	r = e.ok(t, nil, "__complete", "remove-model", "")
	if got := strings.Fields(r.stdout); !slices.Equal(got, []string{"controller", "default", "k8s", ":4"}) {
		t.Errorf("model name completion: %q", got)
	}
	r = e.ok(t, nil, "__complete", "models", "--format", "")
	if got := strings.Fields(r.stdout); !slices.Equal(got, []string{"table", "json", "yaml", ":4"}) {
		t.Errorf("format completion: %q", got)
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// A login the daemon throttles ("too many failed logins; try again in
// 2s", with its retry-after in the error's info) is tried again after the
// wait, saying so on stderr, as kubectl honours Retry-After; the command
// then succeeds.
func TestLoginThrottledWaitsAndRetries(t *testing.T) {
	e := startDaemon(t)
	creds := e.d.Credentials()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var throttled *params.Error
	for i := 0; i < 30 && throttled == nil; i++ { // wrong passwords from this client, as the admin
		c, err := client.Dial(ctx, client.Config{Addr: creds.APIAddresses[0], CACert: []byte(creds.CACert)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.LoginUser(ctx, "admin", "wrong-password")
		c.Close()
		if errors.As(err, &throttled) && throttled.Code != params.CodeTryAgain {
			throttled = nil
		}
	}
	if throttled == nil {
		t.Fatal("wrong passwords were never throttled")
	}
	if n, ok := throttled.Info["retry-after"].(float64); !ok || n < 1 {
		t.Errorf("throttled login's error-info %v: want retry-after, whole seconds", throttled.Info)
	}
	r := e.run(t, "models", "--format", "json")
	if r.code != 0 || !strings.Contains(r.stderr, "The daemon asks to try again in ") || !strings.Contains(r.stderr, "too many failed logins") {
		t.Errorf("models while throttled:\n%s", r)
	}
}
