package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/state"
)

const gitlabMetadata = `name: gitlab
summary: GitLab
storage:
  data:
    type: filesystem
    location: /var/opt/gitlab
deployment:
  type: stateful
  service: loadbalancer
`

const dbMetadata = `name: db
summary: a database
storage:
  disk:
    type: block
    multiple:
      range: 0-2
`

// writeFiles writes name → contents into a temporary directory and
// returns name → path.
func writeFiles(t *testing.T, files map[string]string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	out := map[string]string{}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		out[name] = p
	}
	return out
}

// unitJSON is a unit in status's json: Juju's shape.
type unitJSON struct {
	Life           string
	Machine        string
	ProviderID     string `json:"provider-id"`
	Address        string
	WorkloadStatus struct{ Current string } `json:"workload-status"`
	Storage        []string
}

// appJSON is an application in status's json: Juju's shape.
type appJSON struct {
	Life               string
	Charm              string
	CharmName          string `json:"charm-name"`
	CharmRev           int    `json:"charm-rev"`
	Scale              *int
	Trust              bool
	Constraints        string
	StorageConstraints map[string]struct {
		Pool        string
		Count, Size uint64
	} `json:"storage-constraints"`
	Units map[string]unitJSON
}

type appStatusJSON struct {
	Model        struct{ Name, Type string }
	Applications map[string]appJSON
	Storage      struct {
		Storage map[string]struct {
			Owner       string
			Attachments struct{ Units map[string]any }
		}
		Volumes map[string]struct {
			ProviderID  string `json:"provider-id"`
			Attachments struct {
				Units, Machines map[string]any
			}
		}
		Filesystems map[string]struct {
			ProviderID  string `json:"provider-id"`
			Storage     string
			Attachments *struct {
				Units map[string]struct {
					MountPoint string `json:"mount-point"`
				}
			}
		}
	}
}

// reportPods plays the unit provisioner: n pods of app with their storage.
func reportPods(t *testing.T, st *state.State, model, app string, n int, gen int64) {
	t.Helper()
	var pods []state.Pod
	for i := range n {
		id := string(rune('a'+i)) + "-pod"
		pods = append(pods, state.Pod{ProviderID: id, Address: "10.0.0." + string(rune('1'+i)), Ports: []string{"80"},
			Status: "running", Stateful: true, Filesystems: []state.PodFilesystem{{StorageName: "data", Size: 1024,
				FilesystemID: "pv-" + id, Status: "attached", MountPoint: "/var/opt/gitlab",
				Volume: &state.PodVolume{VolumeID: "vol-" + id, Size: 1024, Persistent: true, Status: "attached"}}}})
	}
	if _, err := st.UpdateCAASUnits(t.Context(), model, app, state.UnitsUpdate{Scale: &n, Generation: gen, Pods: pods}); err != nil {
		t.Fatal(err)
	}
}

// The walk-through of docs/provisionctl.md, application side: a CAAS model, a pool, a
// deploy with storage at scale 3, status, settings, scale, removal; then
// an IAAS application with units on machines.
func TestApplicationsWalkthrough(t *testing.T) {
	e := startDaemon(t)
	st := e.d.State()
	files := writeFiles(t, map[string]string{"gitlab.yaml": gitlabMetadata, "db.yaml": dbMetadata,
		"spec.yaml": "containers:\n  - name: gitlab\n    image: gitlab/gitlab-ce\n", "raw.yaml": "kind: Deployment\n"})

	e.ok(t, nil, "add-model", "k8s", "--type", "caas", "--config", "workload-storage=standard")
	k8s, err := st.ModelByName(t.Context(), "k8s")
	if err != nil {
		t.Fatal(err)
	}
	var pool struct {
		Name, Provider string
		Attrs          map[string]any
	}
	if mut, _ := e.mutate(t, &pool, "create-storage-pool", "fast", "kubernetes", "storage-class=ssd", "-m", "k8s"); mut.Model != "k8s" ||
		!slices.Equal(mut.Added["storage-pools"], []string{"fast"}) {
		t.Errorf("create-storage-pool: %+v", mut)
	}
	if pool.Name != "fast" || pool.Provider != "kubernetes" || pool.Attrs["storage-class"] != "ssd" {
		t.Errorf("create-storage-pool printed %+v", pool)
	}
	if r := e.ok(t, nil, "create-storage-pool", "scratch", "tmpfs", "-m", "k8s"); r.stdout != "" ||
		!strings.Contains(r.stderr, `Created storage pool "scratch" (tmpfs).`) {
		t.Errorf("create-storage-pool (table):\n%s", r)
	}
	r := e.ok(t, nil, "storage-pools", "-m", "k8s")
	if want := "NAME     PROVIDER    ATTRIBUTES\nfast     kubernetes  storage-class=ssd\nscratch  tmpfs\n"; r.stdout != want {
		t.Errorf("storage-pools:\n%s\nwant:\n%s", r.stdout, want)
	}

	// The result of a verb that returns an application: the application
	// as show-application prints it, sizes in MiB.
	var apps map[string]appJSON
	mut, _ := e.mutate(t, &apps, "deploy", "gitlab", "--charm-metadata", files["gitlab.yaml"], "-m", "k8s", "--scale", "3",
		"--storage", "data=fast,1GiB", "--config", "port=8080", "--trust")
	app := apps["gitlab"]
	if !slices.Equal(mut.Added["applications"], []string{"gitlab"}) || mut.ModelUUID != k8s.UUID || app.Charm != "local:gitlab-0" ||
		app.CharmName != "gitlab" || app.Scale == nil || *app.Scale != 3 || !app.Trust ||
		app.StorageConstraints["data"].Pool != "fast" || app.StorageConstraints["data"].Size != 1024 || app.StorageConstraints["data"].Count != 1 {
		t.Errorf("deploy printed %+v %+v", mut, app)
	}
	reportPods(t, st, k8s.UUID, "gitlab", 3, 1)

	var s appStatusJSON
	e.ok(t, &s, "status", "-m", "k8s", "--format", "json")
	if s.Model.Name != "k8s" || s.Model.Type != "caas" || len(s.Applications) != 1 || len(s.Applications["gitlab"].Units) != 3 {
		t.Fatalf("status = %+v", s)
	}
	for i := range 3 {
		name := "gitlab/" + string(rune('0'+i))
		u := s.Applications["gitlab"].Units[name]
		pid := string(rune('a'+i)) + "-pod"
		if u.ProviderID != pid || u.Address != "10.0.0."+string(rune('1'+i)) || len(u.Storage) != 1 || u.WorkloadStatus.Current != "waiting" {
			t.Errorf("status unit %s = %+v", name, u)
		}
	}
	fs := s.Storage.Filesystems["gitlab/0/0"]
	if len(s.Storage.Filesystems) != 3 || fs.Attachments == nil || fs.Attachments.Units["gitlab/0"].MountPoint != "/var/opt/gitlab" ||
		fs.Storage != "data/0" || len(s.Storage.Volumes) != 3 || s.Storage.Storage["data/0"].Owner != "gitlab/0" {
		t.Errorf("status storage = %+v", s.Storage)
	}
	r = e.ok(t, nil, "status", "-m", "k8s")
	want := []string{
		"MODEL  TYPE  LIFE   UUID",
		"k8s    caas  alive  " + k8s.UUID,
		"",
		"PROVISIONER-AGENT  SINCE  MESSAGE", // the test reports the pods itself: no agent runs
		"down               -      no provisioner agent is connected to this model",
		"",
		"APP     LIFE   CHARM           SCALE  UNITS  ADDRESS  STATUS",
		"gitlab  alive  local:gitlab-0  3      3      -",
		"",
		"UNIT      LIFE   MACHINE  PROVIDER-ID  ADDRESS   WORKLOAD  CONTAINER  MESSAGE",
		"gitlab/0  alive  -        a-pod        10.0.0.1  waiting   running    installing agent",
		"gitlab/1  alive  -        b-pod        10.0.0.2  waiting   running    installing agent",
		"gitlab/2  alive  -        c-pod        10.0.0.3  waiting   running    installing agent",
		"",
		"STORAGE  UNIT      POOL  SIZE  FILESYSTEM  VOLUME     STATUS    LOCATION",
		"data/0   gitlab/0  fast  1G    pv-a-pod    vol-a-pod  attached  /var/opt/gitlab",
		"data/1   gitlab/1  fast  1G    pv-b-pod    vol-b-pod  attached  /var/opt/gitlab",
		"data/2   gitlab/2  fast  1G    pv-c-pod    vol-c-pod  attached  /var/opt/gitlab",
	}
	if got := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n"); !slices.Equal(got, want) {
		t.Errorf("status table:\n%s\nwant:\n%s", r.stdout, strings.Join(want, "\n"))
	}

	// Settings.
	if r := e.ok(t, nil, "scale", "gitlab", "1", "-m", "k8s"); !strings.Contains(r.stderr, `Scaled "gitlab" to 1.`) {
		t.Errorf("scale:\n%s", r)
	}
	if a, _ := st.Application(t.Context(), k8s.UUID, "gitlab"); a.Scale != 1 {
		t.Errorf("scale stored = %d", a.Scale)
	}
	var cfg struct {
		Application string
		Config      map[string]any
	}
	if mut, _ := e.mutate(t, &cfg, "config", "gitlab", "-m", "k8s", "port=9090", "name=git"); !slices.Equal(mut.Changed["applications"], []string{"gitlab"}) {
		t.Errorf("config set: %+v", mut)
	}
	if cfg.Config["port"] != 9090.0 || cfg.Config["name"] != "git" || cfg.Config["trust"] != true {
		t.Errorf("config set printed %+v", cfg)
	}
	var port any
	if e.ok(t, &port, "config", "gitlab", "port", "-m", "k8s", "--format", "json"); port != 9090.0 {
		t.Errorf("config KEY = %#v", port)
	}
	e.ok(t, nil, "config", "gitlab", "-m", "k8s", "--reset", "name")
	r = e.ok(t, nil, "config", "gitlab", "-m", "k8s")
	if want := "KEY    VALUE\nport   9090\ntrust  true\n"; r.stdout != want {
		t.Errorf("config table:\n%s\nwant:\n%s", r.stdout, want)
	}
	if r := e.ok(t, nil, "trust", "gitlab", "--remove", "-m", "k8s"); !strings.Contains(r.stderr, `Application "gitlab" is no longer trusted.`) {
		t.Errorf("trust --remove:\n%s", r)
	}
	if mut, _ := e.mutate(t, &apps, "trust", "gitlab", "-m", "k8s"); !apps["gitlab"].Trust || !slices.Equal(mut.Changed["applications"], []string{"gitlab"}) {
		t.Errorf("trust printed %+v %+v", mut, apps)
	}
	e.ok(t, nil, "constraints", "gitlab", "mem=2G", "-m", "k8s")
	if r := e.ok(t, nil, "constraints", "gitlab", "-m", "k8s"); r.stdout != "mem=2048M\n" {
		t.Errorf("constraints:\n%s", r)
	}
	var cons struct{ Application, Constraints string }
	if e.mutate(t, &cons, "constraints", "gitlab", "", "-m", "k8s"); cons.Constraints != "" || cons.Application != "gitlab" {
		t.Errorf("constraints clear printed %+v", cons)
	}
	var spec struct {
		UpgradeCounter int `json:"upgrade-counter"`
	}
	e.mutate(t, &spec, "set-pod-spec", "gitlab", files["spec.yaml"], "-m", "k8s")
	if r := e.ok(t, nil, "set-pod-spec", "gitlab", files["raw.yaml"], "--raw", "-m", "k8s"); spec.UpgradeCounter != 1 ||
		!strings.Contains(r.stderr, `Set the raw k8s spec of "gitlab" (upgrade counter 2).`) {
		t.Errorf("set-pod-spec: %+v\n%s", spec, r)
	}
	if ps, err := st.K8sSpec(t.Context(), k8s.UUID, "gitlab"); err != nil || !strings.Contains(ps.Spec, "gitlab-ce") || ps.RawSpec != "kind: Deployment\n" {
		t.Errorf("spec stored = %+v, %v", ps, err)
	}

	// Pools: one in use stays, a spare one goes.
	rev := st.Revision()
	if r := e.run(t, "remove-storage-pool", "fast", "-m", "k8s"); r.code != 1 || !strings.Contains(r.stderr, `ERROR deleting pool "fast": storage pool "fast" in use`) {
		t.Errorf("remove-storage-pool in use:\n%s", r)
	}
	if st.Revision() != rev {
		t.Error("refused remove-storage-pool wrote")
	}
	if r := e.ok(t, nil, "remove-storage-pool", "scratch", "-m", "k8s"); !strings.Contains(r.stderr, `Removed storage pool "scratch".`) {
		t.Errorf("remove-storage-pool:\n%s", r)
	}

	if r := e.ok(t, nil, "remove-application", "gitlab", "-m", "k8s"); !strings.Contains(r.stderr, `Application "gitlab" is dead; it goes once its unit provisioner has deleted its pods.`) {
		t.Errorf("remove-application:\n%s", r)
	}

	// IAAS: an application, units on an existing and on new machines.
	e.ok(t, nil, "deploy", "db", "--charm-metadata", files["db.yaml"], "--constraints", "cores=2", "--storage", "disk=loop,5G,2")
	e.ok(t, nil, "add-machine")
	if units, _ := e.mutate(t, nil, "add-unit", "db", "--to", "0", "--count", "2"); !slices.Equal(units.Added["units"], []string{"db/0", "db/1"}) ||
		!slices.Equal(units.Added["machines"], []string{"1"}) {
		t.Errorf("add-unit printed %+v", units)
	}
	// Every machine was placed: added.machines is present, empty.
	if units, r := e.mutate(t, nil, "add-unit", "db", "--to", "0"); units.Added["machines"] == nil || len(units.Added["machines"]) != 0 ||
		!strings.Contains(r.stdout, `"machines":[]`) {
		t.Errorf("add-unit --to printed %+v", units)
	}
	e.ok(t, nil, "remove-unit", "db/2")
	if r := e.ok(t, nil, "add-unit", "db"); r.stdout != "db/3\n" {
		t.Errorf("add-unit:\n%s", r)
	}
	if removed, _ := e.mutate(t, nil, "remove-unit", "db/1", "db/3"); !slices.Equal(removed.Removed["units"], []string{"db/1", "db/3"}) {
		t.Errorf("remove-unit printed %+v", removed)
	}
	r = e.ok(t, nil, "status")
	for _, line := range []string{
		"APP  LIFE   CHARM       SCALE  UNITS  ADDRESS  STATUS",
		"db   alive  local:db-0  -      1      -",
		"UNIT  LIFE   MACHINE  PROVIDER-ID  ADDRESS  WORKLOAD  CONTAINER  MESSAGE",
		"db/0  alive  0        -            -        -         -",
	} {
		if !strings.Contains(r.stdout, line+"\n") {
			t.Errorf("status has no line %q:\n%s", line, r.stdout)
		}
	}
}

// Bad input for the application and storage verbs: a clear message,
// nothing on stdout, exit 1 (server) or 2 (usage), and no change.
func TestApplicationsBadInput(t *testing.T) {
	e := startDaemon(t)
	st := e.d.State()
	files := writeFiles(t, map[string]string{"gitlab.yaml": gitlabMetadata, "db.yaml": dbMetadata,
		"bad.yaml": "name: x\nstorage:\n  data:\n    type: tape\n", "broken.yaml": "name: x\nsummary: a\n  bad: indent\n",
		"spec.yaml": "a: b\n", "badspec.yaml": "containers: [a\n", "list.yaml": "- a\n"})
	e.ok(t, nil, "add-model", "k8s", "--type", "caas")
	e.ok(t, nil, "create-storage-pool", "fast", "kubernetes", "-m", "k8s")
	e.ok(t, nil, "deploy", "gitlab", "--charm-metadata", files["gitlab.yaml"], "-m", "k8s", "--storage", "data=fast")
	e.ok(t, nil, "deploy", "db", "--charm-metadata", files["db.yaml"])
	e.ok(t, nil, "add-machine")
	e.ok(t, nil, "add-unit", "db", "--to", "0")
	k8s, err := st.ModelByName(t.Context(), "k8s")
	if err != nil {
		t.Fatal(err)
	}
	reportPods(t, st, k8s.UUID, "gitlab", 1, 1)
	gl := func(extra ...string) []string {
		return append([]string{"deploy", "x", "--charm-metadata", files["gitlab.yaml"], "-m", "k8s"}, extra...)
	}

	rev := st.Revision()
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		// deploy
		{[]string{"deploy", "x"}, 2, "ERROR deploy needs --charm-metadata FILE"},
		{[]string{"deploy", "--charm-metadata", files["db.yaml"]}, 2, "ERROR deploy needs APP, got 0 arguments"},
		{[]string{"deploy", "x", "--charm-metadata", "/nonexistent/metadata.yaml"}, 1, "ERROR cannot read charm metadata: open /nonexistent/metadata.yaml"},
		{[]string{"deploy", "x", "--charm-metadata", files["bad.yaml"]}, 2, `ERROR metadata.yaml line 4: storage "data"`},
		{[]string{"deploy", "x", "--charm-metadata", files["broken.yaml"]}, 2, "ERROR metadata.yaml line 3: mapping values are not allowed in this context"},
		{gl()[:4], 1, `ERROR charm "gitlab" is a kubernetes charm (deployment or containers): deploy it to a caas model`},
		{append([]string{"deploy", "gitlab"}, gl()[2:]...), 1, `ERROR application "gitlab" already exists`},
		{append([]string{"deploy", "Git_Lab"}, gl()[2:]...), 2, `ERROR application name "Git_Lab" not valid`},
		{[]string{"deploy", "x", "--charm-metadata", files["db.yaml"], "-m", "nope"}, 1, `ERROR model "nope" not found`},
		{gl("--storage", "data=nope"), 1, `ERROR storage "data": pool "nope" not found`},
		{gl("--storage", "logs=fast"), 2, `ERROR storage "logs" (charm "gitlab" has no such storage) not valid`},
		{gl("--storage", "data=fast,ten"), 2, `cannot parse constraints for storage "data"`},
		{gl("--scale", "-1"), 2, "ERROR application scale -1 not valid"},
		{gl("--scale", "two"), 2, `invalid argument "two" for "--scale" flag`},
		{gl("--config", "novalue"), 2, `ERROR bad KEY=VALUE "novalue": no "="`},
		{gl("--config", "trust=yes"), 2, "ERROR trust yes (want a bool) not valid"},
		{gl("--constraints", "mem=lots"), 2, `ERROR bad "mem" constraint`},
		{gl("--device", "gpu=1,x"), 2, `ERROR device "gpu": charm "gitlab" has no such device`},
		{[]string{"deploy", "x", "--charm-metadata", files["db.yaml"], "--scale", "2"}, 2,
			`ERROR model "default" is an iaas model: scale is for caas applications`},
		{[]string{"deploy", "x", "--charm-metadata", files["db.yaml"], "--storage", "disk=nope"}, 1, `ERROR storage "disk": pool "nope" not found`},
		// add-unit, remove-unit
		{[]string{"add-unit"}, 2, "ERROR add-unit needs APP, got 0 arguments"},
		{[]string{"add-unit", "nope"}, 1, `ERROR application "nope" not found`},
		{[]string{"add-unit", "db", "--to", "9"}, 1, "ERROR machine 9 not found"},
		{[]string{"add-unit", "db", "--count", "0"}, 2, "ERROR --count 0: want at least 1"},
		{[]string{"add-unit", "db", "--to", "0,0", "--count", "1"}, 2, "ERROR 2 placements for 1 units"},
		{[]string{"add-unit", "gitlab", "-m", "k8s"}, 1, "its units follow the application's scale"},
		{[]string{"remove-unit"}, 2, "ERROR remove-unit needs at least 1 argument (UNIT...), got 0"},
		{[]string{"remove-unit", "db/0", "db/9"}, 1, `ERROR unit "db/9" not found`},
		{[]string{"remove-unit", "db"}, 2, `ERROR unit name "db" not valid`},
		{[]string{"remove-unit", "gitlab/0", "-m", "k8s"}, 1, "change its scale instead"},
		// scale
		{[]string{"scale", "gitlab", "x", "-m", "k8s"}, 2, `ERROR scale "x" is not a whole number`},
		{[]string{"scale", "gitlab", "-m", "k8s"}, 2, "ERROR scale needs APP N, got 1 argument"},
		{[]string{"scale", "gitlab", "-m", "k8s", "--", "-1"}, 2, "ERROR application scale -1 not valid"},
		{[]string{"scale", "db", "2"}, 1, `ERROR model "default" is an iaas model: add and remove units instead of scaling`},
		{[]string{"scale", "nope", "1", "-m", "k8s"}, 1, `ERROR application "nope" not found`},
		// config, trust, constraints
		{[]string{"config", "nope"}, 1, `ERROR application "nope" not found`},
		{[]string{"config"}, 2, "ERROR config needs at least 1 argument (APP), got 0"},
		{[]string{"config", "db", "a=1", "b"}, 2, `ERROR bad KEY=VALUE "b": no "="`},
		{[]string{"config", "db", "a=1", "--reset", "a"}, 2, `ERROR config key "a" is both set and unset`},
		{[]string{"config", "db", "trust=yes"}, 2, "ERROR trust yes (want a bool) not valid"},
		{[]string{"config", "db", "never-set", "--format", "json"}, 1, `ERROR application "db" has no key "never-set"`},
		{[]string{"trust", "nope"}, 1, `ERROR application "nope" not found`},
		{[]string{"constraints", "db", "colour=red"}, 2, `ERROR unknown constraint "colour"`},
		{[]string{"constraints"}, 2, "ERROR constraints needs APP and at most one VALUE"},
		{[]string{"constraints", "db", "a", "b"}, 2, "ERROR constraints needs APP and at most one VALUE"},
		{[]string{"constraints", "nope", "-m", "k8s"}, 1, `ERROR application "nope" not found`},
		// set-pod-spec
		{[]string{"set-pod-spec", "gitlab", files["badspec.yaml"], "-m", "k8s"}, 2, "ERROR pod spec is not valid YAML: yaml: line"},
		{[]string{"set-pod-spec", "gitlab", files["list.yaml"], "-m", "k8s", "--raw"}, 2, "ERROR raw k8s spec is not a YAML mapping"},
		{[]string{"set-pod-spec", "gitlab", "/nonexistent/spec.yaml", "-m", "k8s"}, 1, "ERROR cannot read pod spec"},
		{[]string{"set-pod-spec", "db", files["spec.yaml"]}, 1, "pod specs are for caas applications"},
		{[]string{"set-pod-spec", "gitlab", "-m", "k8s"}, 2, "ERROR set-pod-spec needs APP FILE, got 1 argument"},
		// remove-application
		{[]string{"remove-application", "nope"}, 1, `ERROR application "nope" not found`},
		{[]string{"remove-application"}, 2, "ERROR remove-application needs APP, got 0 arguments"},
		// storage pools
		{[]string{"create-storage-pool", "fast", "tmpfs", "-m", "k8s"}, 1, `ERROR creating pool "fast": pool "fast" already exists`},
		{[]string{"create-storage-pool", "x", "nfs-magic"}, 1, `ERROR storage provider "nfs-magic" not found`},
		{[]string{"create-storage-pool", "x", "kubernetes"}, 1, `ERROR storage provider "kubernetes" not found`},
		{[]string{"create-storage-pool", "Bad!", "loop"}, 2, `ERROR pool name "Bad!" not valid`},
		{[]string{"create-storage-pool", "x"}, 2, "ERROR create-storage-pool needs at least 2 arguments (NAME PROVIDER), got 1"},
		{[]string{"create-storage-pool", "x", "loop", "attr"}, 2, `ERROR bad KEY=VALUE "attr": no "="`},
		{[]string{"create-storage-pool", "x", "kubernetes", "storage-provisioner=p", "-m", "k8s"}, 2, "validating storage provider config"},
		{[]string{"storage-pools", "-m", "nope"}, 1, `ERROR model "nope" not found`},
		{[]string{"storage-pools", "extra"}, 2, `ERROR storage-pools takes no arguments, got ["extra"]`},
		{[]string{"remove-storage-pool", "nope"}, 1, `ERROR storage pool "nope" not found`},
		{[]string{"remove-storage-pool", "fast", "-m", "k8s", "--format", "json"}, 1, `ERROR deleting pool "fast": storage pool "fast" in use`},
		{[]string{"remove-storage-pool"}, 2, "ERROR remove-storage-pool needs NAME, got 0 arguments"},
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

// Every verb's --help shows an example.
func TestEveryVerbHasExample(t *testing.T) {
	a := &app{stdout: &strings.Builder{}, stderr: &strings.Builder{}, getenv: func(string) string { return "" }}
	root := a.rootCommand()
	if root.Example == "" {
		t.Error("provisionctl has no example")
	}
	for _, c := range root.Commands() {
		if c.Example == "" {
			t.Errorf("%s has no example", c.Name())
		}
		for _, sub := range c.Commands() {
			if sub.Example == "" {
				t.Errorf("%s %s has no example", c.Name(), sub.Name())
			}
		}
	}
}
