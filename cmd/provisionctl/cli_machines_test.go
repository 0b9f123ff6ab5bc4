package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/state"
)

// machineStatus is a machine in status's json: Juju's shape.
type machineStatus struct {
	Life                string
	Base                struct{ Name, Channel string }
	Constraints         string
	InstanceID          string                            `json:"instance-id"`
	DNSName             string                            `json:"dns-name"`
	JujuStatus          struct{ Current, Message string } `json:"juju-status"`
	MachineStatus       struct{ Current, Message string } `json:"machine-status"`
	SupportedContainers *[]string                         `json:"supported-containers"`
	IPAddresses         []string                          `json:"ip-addresses"`
	Volumes             map[string]struct {
		Pool string
		Size uint64
	}
	Containers    map[string]machineStatus
	AgentPresence struct{ Current, Since string } `json:"agent-presence"`
}

// subnetStatus is a subnet as add-subnet prints it.
type subnetStatus struct {
	CIDR       string
	Space      string
	Zones      []string
	ProviderID string `json:"provider-id"`
	VLANTag    int    `json:"vlan-tag"`
	Addresses  []struct{ Value, Machine, State string }
}

type modelStatus struct {
	Model struct {
		Name, Type, UUID string
		ProvisionerAgent struct{ Current string } `json:"provisioner-agent"`
	}
	Machines map[string]machineStatus
	Subnets  map[string]struct {
		Space     string
		Addresses map[string]struct{ Machine, State string }
	}
}

// The walk-through of docs/provisionctl.md, machine side: a space, a subnet, machines and a
// container, status; then agent binaries and removal.
func TestMachinesWalkthrough(t *testing.T) {
	e := startDaemon(t)
	st := e.d.State()
	model := e.d.Credentials().DefaultModelUUID

	if r := e.ok(t, nil, "add-space", "db"); r.stdout != "" || !strings.Contains(r.stderr, `Added space "db".`) {
		t.Errorf("add-space:\n%s", r)
	}
	var sn subnetStatus
	if mut, _ := e.mutate(t, &sn, "add-subnet", "10.0.0.0/24", "--space", "db", "--zone", "zone-a,zone-b", "--provider-id", "subnet-0",
		"--vlan", "42", "--allocatable-range", "10.0.0.10-10.0.0.200"); mut.Model != "default" || mut.ModelUUID != model ||
		!slices.Equal(mut.Added["subnets"], []string{"10.0.0.0/24"}) {
		t.Errorf("add-subnet: %+v", mut)
	}
	if sn.CIDR != "10.0.0.0/24" || sn.Space != "db" || !slices.Equal(sn.Zones, []string{"zone-a", "zone-b"}) || sn.VLANTag != 42 {
		t.Errorf("add-subnet printed %+v", sn)
	}

	// The table format prints the ids, one a line.
	r := e.ok(t, nil, "add-machine", "--base", "ubuntu@22.04", "--constraints", "cores=2 mem=4G", "--count", "2",
		"--disks", "loop,10G,2")
	if r.stdout != "0\n1\n" || r.stderr != "" {
		t.Errorf("add-machine:\n%s", r)
	}
	if added, _ := e.mutate(t, nil, "add-machine", "lxd:0"); !slices.Equal(added.Added["machines"], []string{"0/lxd/0"}) ||
		string(added.Result) != "null" {
		t.Errorf("add-machine lxd:0 printed %+v", added)
	}
	if added, _ := e.mutate(t, nil, "add-machine", "zone=zone-b", "-n", "1"); !slices.Equal(added.Added["machines"], []string{"2"}) {
		t.Errorf("add-machine zone=zone-b printed %+v", added)
	}
	m, err := st.Machine(t.Context(), model, "1")
	if err != nil {
		t.Fatal(err)
	}
	if m.Base.String() != "ubuntu@22.04" || m.Constraints.String() != "cores=2 mem=4096M" {
		t.Errorf("machine 1 = %+v", m)
	}

	// The agents' side: machine 0 is provisioned and its container gets an
	// address.
	if err := st.SetInstanceInfo(t.Context(), model, "0", state.InstanceInfo{InstanceID: "i-0", Nonce: "n0"}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetMachineStatus(t.Context(), model, "0", state.InstanceStatus, state.Status{Status: "running"}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetMachineStatus(t.Context(), model, "0", state.AgentStatus, state.Status{Status: "started"}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetSupportedContainers(t.Context(), model, "0", []string{"lxd"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AllocateAddress(t.Context(), model, "10.0.0.0/24", "0/lxd/0", "eth0", "00:16:3e:00:00:01", 0); err != nil {
		t.Fatal(err)
	}
	// Machine 0's agent logs in (it is alive; the others have no agent
	// connected, and no provisioner agent is).
	const agentPassword = "machine-0-agent-password-for-tests"
	if err := st.SetMachinePassword(t.Context(), model, "0", agentPassword); err != nil {
		t.Fatal(err)
	}
	agent, err := client.Dial(t.Context(), client.Config{Addr: e.d.Addr(), ModelUUID: model, CACert: []byte(e.d.Credentials().CACert)})
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	if _, err := agent.LoginAgent(t.Context(), "machine-0", agentPassword, "n0"); err != nil {
		t.Fatal(err)
	}

	// json: Juju's shape, maps keyed by id.
	var s modelStatus
	e.ok(t, &s, "status", "--format", "json")
	if s.Model.Name != "default" || s.Model.Type != "iaas" || s.Model.UUID != model || len(s.Machines) != 3 {
		t.Fatalf("status = %+v", s)
	}
	m0 := s.Machines["0"]
	c0 := m0.Containers["0/lxd/0"]
	if m0.InstanceID != "i-0" || m0.JujuStatus.Current != "started" || m0.MachineStatus.Current != "running" ||
		m0.Base.Name != "ubuntu" || m0.Base.Channel != "22.04" ||
		m0.SupportedContainers == nil || len(m0.Volumes) != 2 || m0.Volumes["0"].Size != 10240 ||
		len(m0.Containers) != 1 || !slices.Equal(c0.IPAddresses, []string{"10.0.0.10"}) || c0.DNSName != "10.0.0.10" {
		t.Errorf("status machine 0 = %+v", m0)
	}
	if s.Machines["1"].SupportedContainers != nil || s.Machines["1"].MachineStatus.Current != "pending" {
		t.Errorf("status machine 1 = %+v", s.Machines["1"])
	}
	if m0.AgentPresence.Current != "alive" || s.Machines["1"].AgentPresence.Current != "down" || s.Model.ProvisionerAgent.Current != "down" {
		t.Errorf("presence: machine 0 %+v, machine 1 %+v, provisioner %+v; want alive, down, down",
			m0.AgentPresence, s.Machines["1"].AgentPresence, s.Model.ProvisionerAgent)
	}
	if sn := s.Subnets["10.0.0.0/24"]; sn.Space != "db" || len(sn.Addresses) != 1 || sn.Addresses["10.0.0.10"].Machine != "0/lxd/0" {
		t.Errorf("status subnets = %+v", s.Subnets)
	}
	// yaml: the same document, with Juju's quoting of ids.
	r = e.ok(t, nil, "status", "--format", "yaml")
	for _, want := range []string{"model:\n  name: default\n  type: iaas\n", "machines:\n  \"0\":\n    juju-status:\n      current: started\n",
		"    instance-id: i-0\n    machine-status:\n      current: running\n", "    base:\n      name: ubuntu\n      channel: \"22.04\"\n",
		"    containers:\n      0/lxd/0:\n        juju-status:\n          current: pending\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status yaml lacks %q:\n%s", want, r.stdout)
		}
	}

	r = e.ok(t, nil, "status")
	want := []string{
		"MODEL    TYPE  LIFE   UUID",
		"default  iaas  alive  " + model,
		"",
		"PROVISIONER-AGENT  SINCE  MESSAGE",
		"down               -      no provisioner agent is connected to this model",
		"",
		"MACHINE  LIFE   AGENT    INSTANCE-ID  INSTANCE  BASE          ADDRESSES  MESSAGE",
		"0        alive  started  i-0          running   ubuntu@22.04  -",
		"0/lxd/0  alive  pending  -            pending   -             10.0.0.10",
		"1        alive  pending  -            pending   ubuntu@22.04  -",
		"2        alive  pending  -            pending   -             -",
		"",
		"SUBNET       SPACE  ZONES          PROVIDER-ID  VLAN  RANGE                 IN-USE",
		"10.0.0.0/24  db     zone-a,zone-b  subnet-0     42    10.0.0.10-10.0.0.200  1",
		"",
		"ADDRESS    SUBNET       MACHINE  STATE      MAC",
		"10.0.0.10  10.0.0.0/24  0/lxd/0  allocated  00:16:3e:00:00:01",
	}
	if got := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n"); !slices.Equal(got, want) {
		t.Errorf("status table:\n%s\nwant:\n%s", r.stdout, strings.Join(want, "\n"))
	}

	// Machine 0's agent goes: status and show-machine show it down, as
	// Juju's status does (apiserver/common/machinestatus.go: agent status
	// "down", "agent is not communicating with the server"), since when
	// it went.
	gone := time.Now()
	agent.Close()
	for deadline := time.Now().Add(waitLimit); ; time.Sleep(20 * time.Millisecond) {
		e.ok(t, &s, "status", "--format", "json")
		if s.Machines["0"].JujuStatus.Current == "down" || time.Now().After(deadline) {
			break
		}
	}
	if m := s.Machines["0"]; m.JujuStatus.Current != "down" || m.JujuStatus.Message != "agent is not communicating with the server" ||
		m.AgentPresence.Current != "down" || m.AgentPresence.Since < gone.UTC().Truncate(time.Second).Format(time.RFC3339) {
		t.Errorf("status machine 0 once its agent went: %+v, presence %+v", m.JujuStatus, m.AgentPresence)
	}
	r = e.ok(t, nil, "show-machine", "0")
	for _, want := range []string{"    juju-status:\n      current: down\n      message: agent is not communicating with the server\n",
		"    agent-presence:\n      current: down\n      since: "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("show-machine 0 lacks %q:\n%s", want, r.stdout)
		}
	}
	if r = e.ok(t, nil, "machines"); !strings.Contains(r.stdout, "\n0        alive  down     i-0          running   ubuntu@22.04  -          agent is not") {
		t.Errorf("machines:\n%s", r.stdout)
	}

	r = e.ok(t, nil, "subnets")
	if !strings.HasPrefix(r.stdout, "SUBNET ") || !strings.Contains(r.stdout, "10.0.0.0/24  db     zone-a,zone-b") {
		t.Errorf("subnets:\n%s", r)
	}
	var spaces struct {
		Spaces []struct {
			Name    string
			Subnets []string
		}
	}
	e.ok(t, &spaces, "spaces", "--format", "json")
	if len(spaces.Spaces) != 1 || !slices.Equal(spaces.Spaces[0].Subnets, []string{"10.0.0.0/24"}) {
		t.Errorf("spaces = %+v", spaces)
	}

	// Agent binaries.
	sum := strings.Repeat("ab", 32)
	var bin struct {
		Version, URL, SHA256 string
		SizeBytes            int64 `json:"size-bytes"`
	}
	if mut, _ := e.mutate(t, &bin, "add-agent-binaries", "3.3.0", "--os", "ubuntu", "--arch", "amd64", "--url", "https://example.com/a.tgz",
		"--sha256", sum, "--size", "1234"); mut.Model != "" || !slices.Equal(mut.Added["agent-binaries"], []string{"3.3.0-ubuntu-amd64"}) {
		t.Errorf("add-agent-binaries: %+v", mut)
	}
	if bin.Version != "3.3.0-ubuntu-amd64" || bin.SHA256 != sum || bin.SizeBytes != 1234 {
		t.Errorf("add-agent-binaries printed %+v", bin)
	}
	r = e.ok(t, nil, "agent-binaries")
	if want := "VERSION             SIZE  SHA256           URL\n3.3.0-ubuntu-amd64  1234  abababababab...  https://example.com/a.tgz\n"; r.stdout != want {
		t.Errorf("agent-binaries:\n%s\nwant:\n%s", r.stdout, want)
	}

	// remove-machine: refused while hosting a container, then forced.
	rev := st.Revision()
	r = e.run(t, "remove-machine", "1", "0", "--format", "json")
	if r.code != 1 || !strings.Contains(r.stderr, `ERROR machine 0 is hosting containers "0/lxd/0"`) || r.stdout != "" {
		t.Errorf("remove-machine 0:\n%s", r)
	}
	if st.Revision() != rev {
		t.Errorf("refused remove-machine wrote")
	}
	if dying, _ := e.mutate(t, nil, "remove-machine", "0", "1", "--force"); !slices.Equal(dying.Dying["machines"], []string{"0", "0/lxd/0", "1"}) ||
		dying.Removed["machines"] == nil || len(dying.Removed["machines"]) != 0 {
		t.Errorf("remove-machine --force printed %+v", dying)
	}
	if r := e.ok(t, nil, "remove-machine", "2"); !strings.Contains(r.stderr, "Machine 2 is dying.") {
		t.Errorf("remove-machine 2:\n%s", r)
	}
	if r := e.ok(t, nil, "remove-machine", "2"); !strings.Contains(r.stderr, "Nothing to do") {
		t.Errorf("remove-machine 2 again:\n%s", r)
	}
}

// Bad input against a model with a space, a subnet, a pool and machines:
// a clear message, nothing on stdout, exit 1 (server) or 2 (usage), and
// no change.
func TestMachinesBadInput(t *testing.T) {
	e := startDaemon(t)
	st := e.d.State()
	model := e.d.Credentials().DefaultModelUUID
	e.ok(t, nil, "add-space", "db")
	e.ok(t, nil, "add-subnet", "10.0.0.0/24", "--space", "db", "--zone", "z1", "--provider-id", "sn-0")
	e.ok(t, nil, "add-machine", "-n", "2")
	e.ok(t, nil, "add-model", "k8s", "--type", "caas")
	if err := st.AddStoragePool(t.Context(), model, "files", "tmpfs", nil); err != nil {
		t.Fatal(err)
	}
	if err := st.SetSupportedContainers(t.Context(), model, "1", []string{"lxd"}); err != nil {
		t.Fatal(err)
	}
	sum := strings.Repeat("ab", 32)
	e.ok(t, nil, "add-agent-binaries", "3.3.0", "--os", "ubuntu", "--arch", "amd64", "--url", "https://h/a", "--sha256", sum, "--size", "1")
	bin := func(extra ...string) []string {
		args := map[string]string{"--os": "ubuntu", "--arch": "amd64", "--url": "https://h/b", "--sha256": sum, "--size": "1"}
		for i := 0; i < len(extra); i += 2 {
			args[extra[i]] = extra[i+1]
		}
		out := []string{"add-agent-binaries", "3.4.0"}
		for _, k := range []string{"--os", "--arch", "--url", "--sha256", "--size"} {
			out = append(out, k, args[k])
		}
		return out
	}
	subnet := func(extra ...string) []string {
		return append([]string{"add-subnet", "10.1.0.0/24", "--space", "db", "--zone", "z1", "--provider-id", "sn-1"}, extra...)
	}

	rev := st.Revision()
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		// add-machine
		{[]string{"add-machine", "-m", "nope"}, 1, `ERROR model "nope" not found`},
		{[]string{"add-machine", "-m", "k8s"}, 1, `ERROR model "k8s" is a caas model: machines need an iaas model`},
		{[]string{"add-machine", "--base", "jammy"}, 2, `ERROR base "jammy" not valid: want OS@CHANNEL, for example "ubuntu@22.04"`},
		{[]string{"add-machine", "--base", "ubuntu@jammy"}, 2, `channel track "jammy" is not a version such as 22.04`},
		{[]string{"add-machine", "--constraints", "cores=2 mem=4Q"}, 2, `ERROR bad "mem" constraint: size "4Q": unknown unit "Q"; want a number of MiB, or with a unit M, G, T, P, E, Z or Y (powers of 1024; B or iB may follow): 512M, 1G, 1.5GiB`},
		{[]string{"add-machine", "--constraints", "cores"}, 2, `ERROR malformed constraint "cores"`},
		{[]string{"add-machine", "--constraints", "arch=sparc"}, 2, `ERROR bad "arch" constraint: "sparc" not recognized`},
		{[]string{"add-machine", "--constraints", "colour=red"}, 2, `ERROR unknown constraint "colour"`},
		{[]string{"add-machine", "--constraints", "spaces=web"}, 1, `space "web" not found`},
		{[]string{"add-machine", "--count", "0"}, 2, "ERROR --count 0: want at least 1"},
		{[]string{"add-machine", "--count", "many"}, 2, `invalid argument "many" for "-n, --count" flag`},
		{[]string{"add-machine", "--count", "101"}, 2, "ERROR count 101: want 1 to 100"},
		{[]string{"add-machine", "lxd:0", "lxd:1"}, 2, "ERROR add-machine takes at most 1 argument (PLACEMENT), got 2"},
		{[]string{"add-machine", "lxd:9"}, 1, "ERROR machine 9 not found"},
		{[]string{"add-machine", "docker:0"}, 2, `ERROR placement "docker:0" not valid: container type "docker" is not one of lxd, kvm`},
		{[]string{"add-machine", "lxc:0"}, 2, `ERROR placement "lxc:0" not valid: container type "lxc" is not one of lxd, kvm`},
		{[]string{"add-machine", "kvm:1", "-n", "3"}, 1, "ERROR machine 1 cannot host kvm containers"},
		{[]string{"add-machine", "zone=z9"}, 2, `ERROR zone "z9" is not a zone of any subnet (known: z1)`},
		{[]string{"add-machine", "somewhere"}, 2, `ERROR placement "somewhere" not valid: want TYPE:MACHINE (lxd:3, kvm:3) or zone=ZONE`},
		{[]string{"add-machine", "--disks", "fast,10G"}, 1, `ERROR disks "fast,10G": storage pool "fast" not found`},
		{[]string{"add-machine", "--disks", "files,10G"}, 2, `storage pool "files" (provider tmpfs) makes no block storage`},
		{[]string{"add-machine", "--disks", "loop,10G", "--disks", "loop,ten"}, 2, `ERROR disks "loop,ten"`},
		// remove-machine
		{[]string{"remove-machine"}, 2, "ERROR remove-machine needs at least 1 argument (ID...), got 0"},
		{[]string{"remove-machine", "0", "7"}, 1, "ERROR machine 7 not found"},
		{[]string{"remove-machine", "0", "-m", "nope"}, 1, `ERROR model "nope" not found`},
		{[]string{"remove-machine", "0", "-m", "controller", "--force"}, 1, "ERROR machine 0 is required by the model"},
		{[]string{"remove-machine", "zero"}, 2, `ERROR machine id "zero" not valid`},
		// spaces and subnets
		{[]string{"add-space", "db"}, 1, `ERROR space "db" already exists`},
		{[]string{"add-space", "DB"}, 2, `ERROR space name "DB" not valid: lowercase letters, digits and hyphens, starting with a letter`},
		{[]string{"add-space", "x", "-m", "nope"}, 1, `ERROR model "nope" not found`},
		{[]string{"add-space"}, 2, "ERROR add-space needs NAME, got 0 arguments"},
		{[]string{"spaces", "-m", "nope"}, 1, `ERROR model "nope" not found`},
		{subnet("-m", "nope"), 1, `ERROR model "nope" not found`},
		{[]string{"add-subnet", "10.0.0.0/24", "--space", "db", "--zone", "z1", "--provider-id", "sn-9"}, 1, `ERROR subnet "10.0.0.0/24" already exists`},
		{[]string{"add-subnet", "10.0.0.0/16", "--space", "db", "--zone", "z1", "--provider-id", "sn-9"}, 2, `ERROR subnet "10.0.0.0/16" overlaps subnet "10.0.0.0/24"`},
		{[]string{"add-subnet", "10.1.0.0/33", "--space", "db", "--zone", "z1", "--provider-id", "sn-9"}, 2, `ERROR invalid CIDR "10.1.0.0/33"`},
		{[]string{"add-subnet", "10.1.0.5/24", "--space", "db", "--zone", "z1", "--provider-id", "sn-9"}, 2, `ERROR invalid CIDR "10.1.0.5/24"`},
		{subnet("--allocatable-range", "10.1.0.10-10.2.0.10"), 2, "ERROR allocatable range 10.1.0.10-10.2.0.10 is not inside 10.1.0.0/24"},
		{subnet("--allocatable-range", "10.1.0.10"), 2, `ERROR allocatable range "10.1.0.10" not valid: want LOW-HIGH`},
		{subnet("--vlan", "5000"), 2, "ERROR VLAN tag 5000: want 0 to 4094"},
		{subnet("--space", "web"), 1, `ERROR space "web" not found`},
		{subnet("--provider-id", "sn-0"), 1, `ERROR subnet with provider id "sn-0" already exists (10.0.0.0/24)`},
		{[]string{"add-subnet", "10.1.0.0/24", "--zone", "z1", "--provider-id", "sn-1"}, 2, "ERROR add-subnet needs --space"},
		{[]string{"add-subnet", "10.1.0.0/24", "--space", "db", "--provider-id", "sn-1"}, 2, "ERROR add-subnet needs --zone"},
		{[]string{"add-subnet", "10.1.0.0/24", "--space", "db", "--zone", "z1"}, 2, "ERROR add-subnet needs --provider-id"},
		{[]string{"subnets", "-m", "nope"}, 1, `ERROR model "nope" not found`},
		// agent binaries
		{append([]string{"add-agent-binaries", "3.3.0"}, bin()[2:]...), 1, "ERROR agent binaries 3.3.0-ubuntu-amd64 already exists"},
		{append([]string{"add-agent-binaries", "3.x"}, bin()[2:]...), 2, `ERROR invalid version "3.x": want a version number such as 3.3.0`},
		{bin("--arch", "sparc"), 2, `ERROR architecture "sparc" not valid`},
		{bin("--sha256", "abc"), 2, `ERROR sha256 "abc" is not 64 lowercase hex digits`},
		{bin("--size", "0"), 2, "ERROR size 0 is not positive"},
		{bin("--size", "big"), 2, `invalid argument "big" for "--size" flag`},
		{bin("--url", "file:///tmp/x"), 2, `ERROR url "file:///tmp/x" is not an absolute http or https URL`},
		{bin("--os", ""), 2, "ERROR agent binaries need an OS and an architecture"},
		{[]string{"agent-binaries", "extra"}, 2, `ERROR agent-binaries takes no arguments, got ["extra"]`},
		// status
		{[]string{"status", "-m", "nope", "--format", "json"}, 1, `ERROR model "nope" not found`},
		{[]string{"status", "--format", "xml"}, 2, `invalid argument "xml" for "--format" flag`},
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

// A machine marked for removal, as the operator sees it: dead and marked
// in machines, show-machine and status (juju-status carries its life as
// Juju's status does), while an external undertaker is to remove it
// (controller-config machine-undertaker=external); with the built-in one
// back, it is gone.
func TestMachinesMarkedForRemoval(t *testing.T) {
	e := startDaemon(t)
	st := e.d.State()
	model := e.d.Credentials().DefaultModelUUID
	e.ok(t, nil, "controller-config", "machine-undertaker=external")
	if r := e.run(t, "controller-config", "machine-undertaker=sometimes"); r.code != 2 ||
		!strings.Contains(r.stderr, `machine-undertaker: sometimes: want "builtin" or "external"`) {
		t.Errorf("controller-config machine-undertaker=sometimes:\n%s", r)
	}
	e.ok(t, nil, "add-machine", "-n", "2")
	if err := st.EnsureMachineDead(t.Context(), model, "1"); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkMachineForRemoval(t.Context(), model, "1"); err != nil {
		t.Fatal(err)
	}

	r := e.ok(t, nil, "machines")
	want := []string{
		"MACHINE  LIFE   AGENT    INSTANCE-ID  INSTANCE  BASE  ADDRESSES  MESSAGE",
		"0        alive  pending  -            pending   -     -",
		"1        dead   pending  -            pending   -     -          marked for removal",
	}
	if got := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n"); !slices.Equal(got, want) {
		t.Errorf("machines:\n%s\nwant:\n%s", r.stdout, strings.Join(want, "\n"))
	}
	r = e.ok(t, nil, "show-machine", "1")
	for _, s := range []string{"    juju-status:\n      current: pending\n", "      life: dead\n", "    life: dead\n", "    marked-for-removal: true\n"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("show-machine 1 lacks %q:\n%s", s, r.stdout)
		}
	}
	var s struct {
		Machines map[string]struct {
			Life             string
			MarkedForRemoval bool                           `json:"marked-for-removal"`
			JujuStatus       struct{ Current, Life string } `json:"juju-status"`
		}
	}
	e.ok(t, &s, "status", "--format", "json")
	if m := s.Machines["1"]; m.Life != "dead" || !m.MarkedForRemoval || m.JujuStatus.Life != "dead" {
		t.Errorf("status machine 1 = %+v", m)
	}
	if m := s.Machines["0"]; m.Life != "alive" || m.MarkedForRemoval || m.JujuStatus.Life != "" {
		t.Errorf("status machine 0 = %+v (an alive machine's juju-status has no life, as Juju's)", m)
	}

	e.ok(t, nil, "controller-config", "--reset", "machine-undertaker")
	deadline := time.Now().Add(waitLimit)
	for {
		r = e.ok(t, nil, "machines", "--format", "json")
		if !strings.Contains(r.stdout, `"1":`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("machine 1 still there %s after the built-in undertaker was back:\n%s", waitLimit, r.stdout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
