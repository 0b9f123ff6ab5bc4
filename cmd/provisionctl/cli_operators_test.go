package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/sys/unix"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/buildinfo"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// The operator verbs and habits (the removals, --no-wait, show-controller,
// models by UUID), through the built binary.

// unreachable writes a credentials file whose daemon is not there: a verb
// that fails with it before saying "cannot connect" checked its input
// without calling.
func unreachable(t *testing.T, e *env) string {
	t.Helper()
	creds, err := credentials.Read(e.creds)
	if err != nil {
		t.Fatal(err)
	}
	creds.APIAddresses = []string{closedAddr(t)}
	path := filepath.Join(t.TempDir(), "down.yaml")
	if err := credentials.Write(path, creds); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestVersionVerb(t *testing.T) {
	e := startDaemon(t)
	r := e.ok(t, nil, "version")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "client: provisionctl "+buildinfo.Version+" (") ||
		!strings.HasPrefix(lines[1], "server: provisiond "+buildinfo.Version+" (") ||
		!strings.Contains(lines[1], "Juju API 3.3.0, at "+e.d.Addr()) {
		t.Errorf("version:\n%s", r)
	}
	var v struct {
		Client struct{ Version, GoVersion string } `json:"client"`
		Server *struct {
			Version    string
			APIVersion string `json:"api-version"`
			Address    string
		} `json:"server"`
	}
	e.ok(t, &v, "version", "--format", "json")
	if v.Client.Version != buildinfo.Version || v.Server == nil || v.Server.APIVersion != "3.3.0" || v.Server.Address != e.d.Addr() {
		t.Errorf("version json = %+v", v)
	}
	// --client does not dial; without a daemon the client's version is
	// still printed and the exit status says the server is missing.
	down := unreachable(t, e)
	if r := e.ok(t, nil, "version", "--client", "--credentials", down); !strings.HasPrefix(r.stdout, "client: provisionctl ") ||
		strings.Contains(r.stdout, "server:") {
		t.Errorf("version --client:\n%s", r)
	}
	r = e.run(t, "version", "--credentials", down, "--format", "json")
	if r.code != 1 || !strings.Contains(r.stdout, `"server":null`) || !strings.Contains(r.stderr, "ERROR server: cannot connect to provisiond") {
		t.Errorf("version without a daemon:\n%s", r)
	}
}

func TestShowController(t *testing.T) {
	e := startDaemon(t)
	creds := e.d.Credentials()
	var c struct {
		ControllerUUID      string            `json:"controller-uuid"`
		ControllerModelUUID string            `json:"controller-model-uuid"`
		APIAddresses        []string          `json:"api-addresses"`
		APIVersion          string            `json:"api-version"`
		Version             string            `json:"version"`
		Models              int               `json:"models"`
		Health              map[string]string `json:"health"`
		User                string            `json:"user"`
		Credentials         string            `json:"credentials"`
		Store               struct {
			Engine    string `json:"engine"`
			Revision  uint64 `json:"revision"`
			SizeBytes int64  `json:"size-bytes"`
		} `json:"store"`
	}
	e.ok(t, &c, "show-controller", "--format", "json")
	if c.ControllerUUID != creds.ControllerUUID || c.ControllerModelUUID != creds.ControllerModelUUID ||
		!slices.Equal(c.APIAddresses, []string{e.d.Addr()}) || c.APIVersion != "3.3.0" || c.Version != buildinfo.Version ||
		c.Models != 2 || c.Health[e.d.Addr()] != "ok" || c.User != "admin" || c.Credentials != e.creds ||
		c.Store.Engine != "bbolt" || c.Store.Revision == 0 || c.Store.SizeBytes <= 0 {
		t.Errorf("show-controller = %+v", c)
	}
	r := e.ok(t, nil, "show-controller")
	for _, want := range []string{`controller-uuid +` + creds.ControllerUUID, `health ` + regexp.QuoteMeta(e.d.Addr()) + `  ok`,
		`store +bbolt, schema \d+, revision \d+, \d+ KiB`} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("show-controller table lacks %q:\n%s", want, r.stdout)
		}
	}
}

// version and show-controller on an etcd controller (operator-guide.md's scale-out
// quick start): the server answers, and the store is shown in etcd's
// figures, with its member.
func TestVersionAndShowControllerOnEtcd(t *testing.T) {
	e := startDaemon(t, provisiondtest.WithStore(provisiondtest.StoreEtcd))
	r := e.ok(t, nil, "version")
	if !strings.Contains(r.stdout, "server: provisiond "+buildinfo.Version+" (") {
		t.Errorf("version on etcd:\n%s", r)
	}
	var c struct {
		Store params.StoreInfo `json:"store"`
	}
	// The store's member watch probes at once; its first answer may still
	// be on its way.
	deadline := time.Now().Add(waitLimit)
	for e.ok(t, &c, "show-controller", "--format", "json"); len(c.Store.Members) == 0 || c.Store.Members[0].SizeBytes == 0; e.ok(t, &c, "show-controller", "--format", "json") {
		if time.Now().After(deadline) {
			t.Fatalf("show-controller never showed the etcd member's size: %+v", c.Store)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s := c.Store; s.Engine != "etcd" || s.SchemaVersion != 0 || s.Revision == 0 || s.SizeBytes <= 0 || len(s.Members) != 1 || !s.Members[0].Up {
		t.Errorf("show-controller store = %+v", s)
	}
	r = e.ok(t, nil, "show-controller")
	ep := regexp.QuoteMeta(c.Store.Members[0].Endpoint)
	for _, want := range []string{`store +etcd, revision \d+, (\d+ KiB|\S+) of \S+ quota, 1 of 1 members up\n`, `store member ` + ep + ` +up, (\d+ KiB|\S+)\n`} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("show-controller table lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestShowVerbs(t *testing.T) {
	e := startDaemon(t)
	files := writeFiles(t, map[string]string{"db.yaml": dbMetadata})
	e.ok(t, nil, "add-machine", "--constraints", "mem=1GiB", "--disks", "loop,1.5G")
	e.ok(t, nil, "add-machine", "lxd:0")
	e.ok(t, nil, "deploy", "db", "--charm-metadata", files["db.yaml"], "--storage", "disk=loop,512M")
	e.ok(t, nil, "add-unit", "db", "--to", "0")

	// show-machine: yaml by default, Juju's shape.
	r := e.ok(t, nil, "show-machine", "0")
	var sm struct {
		Model    string
		Machines map[string]struct {
			Life        string
			Constraints string
			JujuStatus  struct{ Current string } `yaml:"juju-status"`
			Containers  map[string]any
			Volumes     map[string]struct{ Size uint64 }
			Units       []string
		}
	}
	if err := yaml.Unmarshal([]byte(r.stdout), &sm); err != nil || sm.Model != "default" || len(sm.Machines) != 1 {
		t.Fatalf("show-machine 0 (%v):\n%s", err, r.stdout)
	}
	m0 := sm.Machines["0"]
	if m0.Constraints != "mem=1024M" || m0.JujuStatus.Current != "pending" || len(m0.Containers) != 1 ||
		m0.Volumes["0"].Size != 1536 || !slices.Equal(m0.Units, []string{"db/0"}) {
		t.Errorf("show-machine 0 = %+v", m0)
	}
	if !strings.HasPrefix(r.stdout, "model: default\nmachines:\n  \"0\":\n    juju-status:\n") {
		t.Errorf("show-machine yaml:\n%s", r.stdout)
	}
	if r := e.ok(t, nil, "show-machine", "0/lxd/0", "--format", "table"); !strings.Contains(r.stdout, "0/lxd/0  alive  pending") {
		t.Errorf("show-machine --format table:\n%s", r)
	}
	if r := e.run(t, "show-machine", "7"); r.code != 1 || !strings.Contains(r.stderr, `ERROR machine 7 not found in model "default"`) {
		t.Errorf("show-machine 7:\n%s", r)
	}

	// machines: the status machine table; json keyed by id with
	// containers nested.
	if r := e.ok(t, nil, "machines"); !strings.HasPrefix(r.stdout, "MACHINE  LIFE   AGENT") || !strings.Contains(r.stdout, "\n0/lxd/0  alive") {
		t.Errorf("machines:\n%s", r)
	}
	var ms struct {
		Machines map[string]struct{ Containers map[string]any }
	}
	e.ok(t, &ms, "machines", "--format", "json")
	if len(ms.Machines) != 1 || ms.Machines["0"].Containers["0/lxd/0"] == nil {
		t.Errorf("machines json = %+v", ms)
	}

	// units and show-unit.
	if r := e.ok(t, nil, "units"); !strings.Contains(r.stdout, "db/0  alive  0 ") {
		t.Errorf("units:\n%s", r)
	}
	var su struct {
		Units map[string]struct {
			Application string
			Machine     string
			Life        string
		}
	}
	if r := e.ok(t, nil, "show-unit", "db/0", "--format", "json"); json.Unmarshal([]byte(r.stdout), &su) != nil ||
		su.Units["db/0"].Application != "db" || su.Units["db/0"].Machine != "0" {
		t.Errorf("show-unit:\n%s", r)
	}
	if r := e.run(t, "show-unit", "db/9"); r.code != 1 || !strings.Contains(r.stderr, `ERROR unit "db/9" not found`) {
		t.Errorf("show-unit db/9:\n%s", r)
	}

	// show-application: storage constraints with sizes in MiB.
	r = e.ok(t, nil, "show-application", "db")
	for _, want := range []string{"applications:\n  db:\n    charm: local:db-0\n", "    charm-name: db\n",
		"    storage-constraints:\n      disk:\n        pool: loop\n        count: 1\n        size: 512\n", "    units:\n      db/0:\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("show-application lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := e.run(t, "show-application", "web"); r.code != 1 || !strings.Contains(r.stderr, `ERROR application "web" not found`) {
		t.Errorf("show-application web:\n%s", r)
	}
}

// -m takes a name or a UUID; $PROVISIOND_MODEL is the default model.
func TestModelSelection(t *testing.T) {
	e := startDaemon(t)
	var added summary
	e.mutate(t, &added, "add-model", "prod")
	if r := e.ok(t, nil, "add-machine", "-m", added.UUID); r.stdout != "0\n" {
		t.Errorf("add-machine -m UUID:\n%s", r)
	}
	ms, err := e.d.State().Machines(t.Context(), added.UUID)
	if err != nil || len(ms) != 1 {
		t.Fatalf("machines of prod: %v %v", ms, err)
	}
	env := []string{"PROVISIOND_MODEL=prod"}
	if r := e.runEnv(t, env, "machines", "--format", "json"); r.code != 0 || !strings.Contains(r.stdout, `"model":"prod"`) {
		t.Errorf("machines with $PROVISIOND_MODEL:\n%s", r)
	}
	if r := e.runEnv(t, env, "machines", "-m", "default", "--format", "json"); r.code != 0 || !strings.Contains(r.stdout, `"model":"default"`) {
		t.Errorf("-m over $PROVISIOND_MODEL:\n%s", r)
	}
	if r := e.runEnv(t, []string{"PROVISIOND_MODEL=" + added.UUID}, "status", "--format", "json"); r.code != 0 ||
		!strings.Contains(r.stdout, `"name":"prod"`) {
		t.Errorf("$PROVISIOND_MODEL as a UUID:\n%s", r)
	}
	if r := e.runEnv(t, []string{"PROVISIOND_MODEL=nope"}, "status"); r.code != 1 || !strings.Contains(r.stderr, `ERROR model "nope" not found`) {
		t.Errorf("$PROVISIOND_MODEL naming no model:\n%s", r)
	}
	// A mutation names the model by name and UUID, however it was given.
	if mut, _ := e.mutate(t, nil, "add-machine", "-m", added.UUID); mut.Model != "prod" || mut.ModelUUID != added.UUID {
		t.Errorf("add-machine -m UUID printed %+v", mut)
	}
}

// openPTY returns the two ends of a new pseudo-terminal.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	return master, tty
}

// remove-model asks on a terminal, refuses without one unless -y.
func TestRemoveModelConfirmation(t *testing.T) {
	e := startDaemon(t)
	e.ok(t, nil, "add-model", "prod")
	e.ok(t, nil, "add-machine", "-m", "prod", "-n", "2")
	e.ok(t, nil, "add-model", "empty")
	st := e.d.State()
	exists := func(name string) bool {
		_, err := st.ModelByName(t.Context(), name)
		return err == nil
	}

	// No terminal (stdin is /dev/null here): refused, usage status, before
	// anything is sent.
	r := e.run(t, "remove-model", "prod")
	if r.code != 2 || !strings.Contains(r.stderr, `ERROR remove-model asks for confirmation and stdin is not a terminal: pass -y to remove model "prod" without asking`) ||
		!exists("prod") {
		t.Errorf("remove-model without a terminal:\n%s", r)
	}
	if r := e.run(t, "remove-model", "prod", "--credentials", unreachable(t, e)); r.code != 2 {
		t.Errorf("the refusal called the daemon:\n%s", r)
	}

	answer := func(name, reply string) result {
		t.Helper()
		master, tty := openPTY(t)
		cmd := e.command(t, nil, "remove-model", name)
		var stdout, stderr bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := master.WriteString(reply + "\n"); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(interface{ ExitCode() int }); ok {
			code = ee.ExitCode()
		}
		return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
	}
	r = answer("prod", "n")
	if r.code != 1 || !strings.Contains(r.stderr, `Remove iaas model "prod" (uuid `) ||
		!strings.Contains(r.stderr, "it holds 2 machines, which go with it.\nThis cannot be undone. Continue? [y/N]: ") ||
		!strings.Contains(r.stderr, `ERROR aborted: model "prod" not removed`) || !exists("prod") {
		t.Errorf("remove-model answered n:\n%s", r)
	}
	r = answer("empty", "yes")
	if r.code != 0 || !strings.Contains(r.stderr, "it is empty.") || !strings.Contains(r.stderr, `Removed model "empty".`) || exists("empty") {
		t.Errorf("remove-model answered yes:\n%s", r)
	}
	r = answer("prod", "y")
	if r.code != 0 || !strings.Contains(r.stderr, `Model "prod" is dying`) {
		t.Errorf("remove-model answered y:\n%s", r)
	}
}

func TestRemovalVerbs(t *testing.T) {
	e := startDaemon(t)
	st := e.d.State()
	model := e.d.Credentials().DefaultModelUUID
	e.ok(t, nil, "add-space", "db")
	e.ok(t, nil, "add-space", "spare")
	e.ok(t, nil, "add-subnet", "10.0.0.0/24", "--space", "db", "--zone", "z", "--provider-id", "s0", "--allocatable-range", "10.0.0.10-10.0.0.20")
	e.ok(t, nil, "add-machine", "zone=z")
	e.ok(t, nil, "add-machine", "lxd:0")
	if _, err := st.AllocateAddress(t.Context(), model, "10.0.0.0/24", "0/lxd/0", "eth0", "00:16:3e:00:00:01", 0); err != nil {
		t.Fatal(err)
	}
	e.ok(t, nil, "add-agent-binaries", "3.3.0", "--os", "ubuntu", "--arch", "amd64", "--url", "https://example.com/a.tgz",
		"--sha256", strings.Repeat("ab", 32), "--size", "10")

	rev := st.Revision()
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"remove-space", "db"}, 2, `ERROR space "db" holds subnets 10.0.0.0/24: remove them first`},
		{[]string{"remove-space", "nope"}, 1, `ERROR space "nope" not found`},
		{[]string{"remove-subnet", "10.0.0.0/24"}, 2, `ERROR subnet "10.0.0.0/24" has 1 address(es) in use (10.0.0.`},
		{[]string{"remove-subnet", "10.9.0.0/24"}, 1, `ERROR subnet "10.9.0.0/24" not found`},
		{[]string{"remove-agent-binaries", "9.9.9-ubuntu-amd64"}, 1, `ERROR agent binaries "9.9.9-ubuntu-amd64" not found`},
		{[]string{"remove-space"}, 2, "ERROR remove-space needs NAME, got 0 arguments"},
		{[]string{"remove-machine", "0", "--no-wait"}, 2, "ERROR --no-wait needs --force"},
	} {
		if r := e.run(t, tc.args...); r.code != tc.code || !strings.Contains(r.stderr, tc.msg) || r.stdout != "" {
			t.Errorf("%q: want exit %d with %q; got %s", tc.args, tc.code, tc.msg, r)
		}
	}
	if st.Revision() != rev {
		t.Errorf("refused removals wrote")
	}

	if mut, _ := e.mutate(t, nil, "remove-space", "spare"); !slices.Equal(mut.Removed["spaces"], []string{"spare"}) {
		t.Errorf("remove-space printed %+v", mut)
	}
	if mut, _ := e.mutate(t, nil, "remove-agent-binaries", "3.3.0-ubuntu-amd64"); mut.Model != "" ||
		!slices.Equal(mut.Removed["agent-binaries"], []string{"3.3.0-ubuntu-amd64"}) {
		t.Errorf("remove-agent-binaries printed %+v", mut)
	}
	// --force --no-wait removes at once, container first.
	if mut, _ := e.mutate(t, nil, "remove-machine", "0", "--force", "--no-wait"); !slices.Equal(mut.Removed["machines"], []string{"0/lxd/0", "0"}) ||
		len(mut.Dying["machines"]) != 0 {
		t.Errorf("remove-machine --force --no-wait printed %+v", mut)
	}
	if r := e.ok(t, nil, "remove-subnet", "10.0.0.0/24"); !strings.Contains(r.stderr, "Removed subnet 10.0.0.0/24.") {
		t.Errorf("remove-subnet:\n%s", r)
	}
	if r := e.ok(t, nil, "remove-space", "db"); !strings.Contains(r.stderr, `Removed space "db".`) {
		t.Errorf("remove-space:\n%s", r)
	}
	if ms, _ := st.Machines(t.Context(), model); len(ms) != 0 {
		t.Errorf("machines left: %v", ms)
	}
}

// Required flags, sizes and arguments are checked before anything is
// sent: with a daemon that is not there, these fail as usage errors.
func TestCheckedBeforeAnyCall(t *testing.T) {
	e := startDaemon(t)
	down := unreachable(t, e)
	files := writeFiles(t, map[string]string{"db.yaml": dbMetadata})
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"add-subnet", "10.0.0.0/24"}, "ERROR add-subnet needs --space, --zone and --provider-id"},
		{[]string{"add-subnet", "10.0.0.0/24", "--space", "db"}, "ERROR add-subnet needs --zone and --provider-id"},
		{[]string{"add-agent-binaries", "3.3.0", "--os", "ubuntu"}, "ERROR add-agent-binaries needs --arch, --url, --sha256 and --size"},
		{[]string{"deploy", "db"}, "ERROR deploy needs --charm-metadata FILE"},
		{[]string{"add-machine", "--disks", "loop,10X"}, `ERROR --disks "loop,10X": size "10X": unknown unit "X"; want a number of MiB, or with a unit M, G, T, P, E, Z or Y`},
		{[]string{"deploy", "db", "--charm-metadata", files["db.yaml"], "--storage", "disk=loop,1.2.3G"}, `ERROR --storage "disk=loop,1.2.3G": size "1.2.3G": not a number`},
		{[]string{"remove-machine", "0", "--no-wait"}, "ERROR --no-wait needs --force"},
		{[]string{"status", "--watch", "soon"}, `ERROR status --watch "soon": want an interval such as 2s or 1m`},
		{[]string{"remove-model", "x"}, "ERROR remove-model asks for confirmation"},
	} {
		r := e.run(t, append(tc.args, "--credentials", down)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.msg) || strings.Contains(r.stderr, "cannot connect") {
			t.Errorf("%q: want exit 2 with %q before any call; got %s", tc.args, tc.msg, r)
		}
	}
	// Sizes mean the same on both sides: 1GiB, 1G and 1024M are one size.
	// (A bare number is MiB in a constraint, a count in a storage
	// constraint, as in Juju.)
	for i, sz := range []string{"1GiB", "1G", "1024M", "1024MiB"} {
		e.ok(t, nil, "add-machine", "--constraints", "mem="+sz, "--disks", "loop,"+sz)
		m, err := e.d.State().Machine(t.Context(), e.d.Credentials().DefaultModelUUID, fmt.Sprint(i))
		if err != nil || m.Constraints.String() != "mem=1024M" {
			t.Errorf("mem=%s: %+v %v", sz, m.Constraints, err)
		}
	}
	var s struct {
		Machines map[string]struct {
			Volumes map[string]struct{ Size uint64 }
		}
	}
	e.ok(t, &s, "status", "--format", "json")
	for id, m := range s.Machines {
		for _, v := range m.Volumes {
			if v.Size != 1024 {
				t.Errorf("machine %s volume size %d, want 1024", id, v.Size)
			}
		}
	}
}

// No ModelAdmin method name appears where a verb is meant: not in any
// verb's help, and a method the daemon lacks is reported as the verb.
func TestNoMethodNamesShown(t *testing.T) {
	e := startDaemon(t)
	var methods []string
	for _, m := range daemon.NewRegistry(nil).MethodNames("ModelAdmin", 1) {
		if len(regexp.MustCompile(`[A-Z]`).FindAllString(m, -1)) >= 2 { // AddMachines, not Status
			methods = append(methods, m)
		}
	}
	if len(methods) < 20 {
		t.Fatalf("ModelAdmin methods = %v", methods)
	}
	r := e.ok(t, nil, "__complete", "")
	var verbs []string
	for _, l := range strings.Split(r.stdout, "\n") {
		if v, _, _ := strings.Cut(l, "\t"); v != "" && !strings.HasPrefix(v, ":") {
			verbs = append(verbs, v)
		}
	}
	if len(verbs) < 30 {
		t.Fatalf("verbs = %v", verbs)
	}
	for _, v := range verbs {
		help := e.ok(t, nil, v, "--help").stdout
		for _, m := range methods {
			if regexp.MustCompile(`\b` + m + `\b`).MatchString(help) {
				t.Errorf("%s --help names method %s", v, m)
			}
		}
	}
	a := &app{verb: "remove-space"}
	err := a.explain("RemoveSpace", &params.Error{Message: `unknown method "RemoveSpace" at version 1 for facade type "ModelAdmin"`,
		Code: params.CodeNotImplemented})
	if err == nil || strings.Contains(err.Error(), "RemoveSpace") || strings.Contains(err.Error(), "ModelAdmin") ||
		!strings.Contains(err.Error(), "the daemon does not support remove-space") {
		t.Errorf("not implemented: %v", err)
	}
	err = a.explain("Status", fmt.Errorf("client: decoding ModelAdmin.Status response: %w", strErr("unexpected end of JSON input")))
	if err == nil || strings.Contains(err.Error(), "ModelAdmin") || strings.Contains(err.Error(), "client:") {
		t.Errorf("client error: %v", err)
	}
}

type strErr string

func (e strErr) Error() string { return string(e) }

// Completion of machine ids, applications, units, pools, spaces, subnets
// and agent binaries comes from the daemon, in the model of -m.
func TestCompletionFromDaemon(t *testing.T) {
	e := startDaemon(t)
	files := writeFiles(t, map[string]string{"db.yaml": dbMetadata, "gitlab.yaml": gitlabMetadata})
	e.ok(t, nil, "add-machine")
	e.ok(t, nil, "add-machine", "lxd:0")
	e.ok(t, nil, "deploy", "db", "--charm-metadata", files["db.yaml"])
	e.ok(t, nil, "add-unit", "db", "--to", "0")
	e.ok(t, nil, "add-space", "db")
	e.ok(t, nil, "add-subnet", "10.0.0.0/24", "--space", "db", "--zone", "z", "--provider-id", "s0")
	e.ok(t, nil, "create-storage-pool", "fast", "loop")
	e.ok(t, nil, "add-agent-binaries", "3.3.0", "--os", "ubuntu", "--arch", "amd64", "--url", "https://example.com/a.tgz",
		"--sha256", strings.Repeat("ab", 32), "--size", "10")
	e.ok(t, nil, "add-model", "k8s", "--type", "caas")
	e.ok(t, nil, "deploy", "gitlab", "--charm-metadata", files["gitlab.yaml"], "-m", "k8s")

	complete := func(args ...string) []string {
		t.Helper()
		r := e.ok(t, nil, append([]string{"__complete"}, args...)...)
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if !strings.HasPrefix(l, ":") {
				out = append(out, l)
			}
		}
		return out
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"remove-machine", ""}, []string{"0", "0/lxd/0"}},
		{[]string{"remove-machine", "0", ""}, []string{"0/lxd/0"}},
		{[]string{"show-machine", "0/"}, []string{"0/lxd/0"}},
		{[]string{"add-unit", "db", "--to", ""}, []string{"0", "0/lxd/0"}},
		{[]string{"scale", ""}, []string{"db"}},
		{[]string{"scale", "-m", "k8s", ""}, []string{"gitlab"}},
		{[]string{"show-application", "-m", "k8s", "g"}, []string{"gitlab"}},
		{[]string{"remove-unit", ""}, []string{"db/0"}},
		{[]string{"show-unit", ""}, []string{"db/0"}},
		{[]string{"remove-storage-pool", ""}, []string{"fast"}},
		{[]string{"remove-space", ""}, []string{"db"}},
		{[]string{"add-subnet", "10.1.0.0/24", "--space", ""}, []string{"db"}},
		{[]string{"remove-subnet", ""}, []string{"10.0.0.0/24"}},
		{[]string{"remove-agent-binaries", ""}, []string{"3.3.0-ubuntu-amd64"}},
		{[]string{"status", "-m", ""}, []string{"controller", "default", "k8s"}},
	} {
		if got := complete(tc.args...); !slices.Equal(got, tc.want) {
			t.Errorf("complete %q = %q, want %q", tc.args, got, tc.want)
		}
	}
}

// watch prints the fields of what changed, aligned, and reconnects with
// backoff when the daemon restarts.
func TestWatchFieldsAndReconnect(t *testing.T) {
	if bin == "" {
		t.Skip("builds and runs the binary")
	}
	e, cfg, stop := startRestartable(t)
	d := e.d
	var err error
	w := e.startWatch(t)
	model := d.Credentials().DefaultModelUUID
	if _, err := d.State().AddMachine(t.Context(), model, state.MachineParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.State().AddMachine(t.Context(), model, state.MachineParams{ParentID: "0", ContainerType: "lxd"}); err != nil {
		t.Fatal(err)
	}
	// One line for each machine (a host may show twice: its container's
	// creation touches it too).
	seen := map[string]string{}
	for seen["0"] == "" || seen["0/lxd/0"] == "" {
		select {
		case l := <-w.lines:
			if f := strings.Fields(l); len(f) > 2 {
				seen[f[2]] = l
			}
		case <-time.After(waitLimit):
			t.Fatalf("watch lines: %q\n%s", seen, w.errs.String())
		}
	}
	lines := []string{seen["0"], seen["0/lxd/0"]}
	// TIME  KIND  ID  FIELDS, the columns aligned.
	re := regexp.MustCompile(`^(\S+)  (machine +)  (\S+ +)  (.*)$`)
	var cols []int
	for _, l := range lines {
		m := re.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("watch line %q", l)
		}
		if !strings.Contains(m[4], "life=alive") || !strings.Contains(m[4], "id=") || strings.Contains(m[4], "password") {
			t.Errorf("watch fields %q", m[4])
		}
		cols = append(cols, strings.Index(l, m[4]))
	}
	if cols[0] != cols[1] {
		t.Errorf("fields do not line up:\n%s", strings.Join(lines, "\n"))
	}

	// The daemon restarts on the same address: watch says so, dials
	// again, and shows what changes after.
	stop(d)
	d, err = daemon.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer stop(d)
	deadline := time.Now().Add(waitLimit)
	for !strings.Contains(w.errs.String(), "Reconnected; watching model \"default\" again") {
		if time.Now().After(deadline) {
			t.Fatalf("watch did not reconnect:\n%s", w.errs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(w.errs.String(), "Lost the connection to provisiond") {
		t.Errorf("stderr:\n%s", w.errs.String())
	}
	if err := d.State().SetMachineDying(t.Context(), model, "0/lxd/0"); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-w.lines:
		if !strings.Contains(l, " 0/lxd/0 ") || !strings.Contains(l, "life=dying") {
			t.Errorf("line after the reconnection %q", l)
		}
	case <-time.After(waitLimit):
		t.Fatalf("no line after the reconnection\n%s", w.errs.String())
	}

	// Fields print as the operator typed them ("<" is not "\u003c"), and
	// an entity changed and removed before its fields are read says
	// "removed" once, not once per change.
	if err := d.State().SetMachineStatus(t.Context(), model, "0/lxd/0", state.AgentStatus, state.Status{Status: "error", Message: "<ok>"}); err != nil {
		t.Fatal(err)
	}
	next := func(what string) string {
		t.Helper()
		select {
		case l := <-w.lines:
			return l
		case <-time.After(waitLimit):
			t.Fatalf("no line for %s\n%s", what, w.errs.String())
		}
		return ""
	}
	if l := next("the status"); !strings.Contains(l, "<ok>") || strings.Contains(l, `\u003c`) {
		t.Errorf("status line %q: want <ok> as it was set", l)
	}
	if err := d.State().EnsureMachineDead(t.Context(), model, "0/lxd/0"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.State().RemoveMachine(t.Context(), model, "0/lxd/0"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.State().AddMachine(t.Context(), model, state.MachineParams{}); err != nil { // machine 1: the end of the removal's lines
		t.Fatal(err)
	}
	removed := 0
	for l := next("machine 1"); !strings.Contains(l, " 1 "); l = next("machine 1") {
		if strings.Contains(l, " 0/lxd/0 ") && strings.HasSuffix(l, " removed") {
			removed++
		}
	}
	if removed != 1 {
		t.Errorf("the container's removal printed %d times", removed)
	}
	if err := w.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	w.wait(t)
}

// status --watch redraws until interrupted; elsewhere than a terminal
// each snapshot follows the last.
func TestStatusWatch(t *testing.T) {
	e := startDaemon(t)
	cmd := e.command(t, nil, "status", "--watch", "50ms", "--format", "json")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	machines := func() int {
		t.Helper()
		select {
		case l := <-lines:
			var s struct{ Machines map[string]any }
			if err := json.Unmarshal([]byte(l), &s); err != nil {
				t.Fatalf("status --watch line %q: %v", l, err)
			}
			return len(s.Machines)
		case <-time.After(waitLimit):
			t.Fatal("no status --watch line")
		}
		return 0
	}
	if n := machines(); n != 0 {
		t.Fatalf("first snapshot has %d machines", n)
	}
	if _, err := e.d.State().AddMachine(t.Context(), e.d.Credentials().DefaultModelUUID, state.MachineParams{}); err != nil {
		t.Fatal(err)
	}
	for n := 0; n != 1; {
		n = machines()
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("status --watch after SIGINT: %v", err)
	}
	// --watch=INTERVAL and the table format.
	cmd = e.command(t, nil, "status", "--watch=30ms")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	heads := 0
	for heads < 2 && sc.Scan() {
		if strings.HasPrefix(sc.Text(), "MODEL    TYPE") {
			heads++
		}
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	_ = cmd.Wait()
	if heads < 2 {
		t.Errorf("status --watch=30ms printed %d snapshots", heads)
	}
}
