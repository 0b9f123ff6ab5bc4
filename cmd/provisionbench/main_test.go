package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/state/store/etcdstore"
)

// TestMain lets the test binary serve as the child daemon and echo server
// (the tool re-executes itself for them).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == childDaemonCmd || os.Args[1] == childEchoCmd || os.Args[1] == childEtcdCmd || os.Args[1] == childHealthCmd || os.Args[1] == childLoadgenCmd) {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// runJSON runs the tool with --json and decodes its report.
func runJSON(t *testing.T, args ...string) *Report {
	t.Helper()
	if testing.Short() {
		t.Skip("starts daemons")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if code := run(ctx, append(args, "--json"), &stdout, &stderr); code != 0 {
		t.Fatalf("provisionbench %s: exit %d\n%s", strings.Join(args, " "), code, stderr.String())
	}
	var rep Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("output is not one JSON document: %v\n%s", err, stdout.String())
	}
	return &rep
}

// figure returns the median of metric name at size, failing when absent.
func figure(t *testing.T, rep *Report, size int, name string) float64 {
	t.Helper()
	for _, s := range rep.Sizes {
		if s.Size != size {
			continue
		}
		if m := s.metric(name); m != nil {
			return m.Median
		}
	}
	t.Fatalf("%s: no figure %q at size %d in %+v", rep.Workload, name, size, rep.Sizes)
	return 0
}

// The workloads at small sizes: they run, report every figure and meet
// the correctness conditions (nothing lost, no failed call). No timing is
// asserted: the machine running the tests is noisy.

func TestRPC(t *testing.T) {
	rep := runJSON(t, "rpc", "-n", "1,3", "--duration", "300ms", "--baseline", "--daemon", "inproc", "--repeat", "2")
	for _, n := range []int{1, 3} {
		if figure(t, rep, n, "calls/s") <= 0 || figure(t, rep, n, "echo calls/s") <= 0 {
			t.Errorf("no calls at %d agents", n)
		}
		if e := figure(t, rep, n, "errors"); e != 0 {
			t.Errorf("%v errors at %d agents", e, n)
		}
		figure(t, rep, n, "calls/s vs echo")
		figure(t, rep, n, "p99 latency")
		figure(t, rep, n, "daemon objects allocated per call")
	}
	if rep.Repeat != 2 || len(rep.Sizes[0].Metrics[0].Runs) != 2 {
		t.Errorf("repeat: %+v", rep.Sizes[0].Metrics[0])
	}
	if rep.Machine.LoadStart < 0 || rep.Machine.LoadEnd < 0 {
		t.Errorf("load average not read: %+v", rep.Machine)
	}
}

func TestWatch(t *testing.T) {
	for _, mode := range []string{modeInproc, modeChild} {
		rep := runJSON(t, "watch", "-n", "4", "--watchers", "3", "--rate", "20", "--duration", "1s", "--daemon", mode)
		if d := figure(t, rep, 4, "deliveries"); d <= 0 {
			t.Errorf("%s: no deliveries", mode)
		}
		for _, name := range []string{"lost", "failed writes", "duplicates"} {
			if v := figure(t, rep, 4, name); v != 0 {
				t.Errorf("%s: %s = %v", mode, name, v)
			}
		}
		figure(t, rep, 4, "spurious wake-ups")
		figure(t, rep, 4, "p99 latency")
		figure(t, rep, 4, "write p99 latency")
		figure(t, rep, 4, "daemon AddMachines p99 at most")
		figure(t, rep, 4, "commit p99 at most")
		if mode == modeInproc {
			figure(t, rep, 4, "daemon + load generator CPU per change")
		} else {
			figure(t, rep, 4, "daemon CPU per change")
			figure(t, rep, 4, "load generator CPU per change")
			// The tool's collector is kept out of the window: a few MiB
			// allocated there never reach the bound. With the daemon in
			// this process it is left alone, so counted but not asserted.
			if c := figure(t, rep, 4, "load generator GC cycles"); c != 0 {
				t.Errorf("%s: %v collections of the load generator in the window", mode, c)
			}
		}
		figure(t, rep, 4, "daemon GC cycles")
		if s := figure(t, rep, 4, "CPU stolen by the host"); s < 0 || s > 100 {
			t.Errorf("%s: %v%% of the CPU stolen", mode, s)
		}
	}
}

func TestProcCPU(t *testing.T) {
	d, err := procCPU(os.Getpid())
	if err != nil || d < 0 {
		t.Errorf("procCPU(self) = %v, %v", d, err)
	}
	if _, err := procCPU(-1); err == nil {
		t.Error("procCPU of no process: want an error")
	}
}

func TestWrite(t *testing.T) {
	rep := runJSON(t, "write", "-n", "1,4", "--duration", "300ms", "--baseline", "--daemon", "inproc")
	for _, n := range []int{1, 4} {
		if figure(t, rep, n, "writes/s") <= 0 || figure(t, rep, n, "raw serial commits/s") <= 0 ||
			figure(t, rep, n, "raw Batch commits/s") <= 0 {
			t.Errorf("no writes at %d writers", n)
		}
		if e := figure(t, rep, n, "errors"); e != 0 {
			t.Errorf("%v errors at %d writers", e, n)
		}
		figure(t, rep, n, "writes/s vs raw Batch")
	}
}

// TestWindowCPUProfile: with --window-cpuprofile the child daemon writes
// one CPU profile per measuring window, and only then, and the heap
// profiles as each window opens and closes.
func TestWindowCPUProfile(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "window")
	runJSON(t, "write", "-n", "1", "--duration", "300ms", "--repeat", "2", "--window-cpuprofile", prof)
	for _, f := range []string{prof + ".1", prof + ".2", prof + ".1.heap", prof + ".2.heap", prof + ".1.start.heap", prof + ".2.start.heap"} {
		b, err := os.ReadFile(f)
		if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b { // pprof's gzip
			t.Errorf("window profile %s: %v, %d bytes, not a gzipped profile", f, err, len(b))
		}
	}
	if _, err := os.Stat(prof + ".3"); err == nil {
		t.Errorf("a third profile %s.3 for two windows", prof)
	}
}

// TestConns runs the daemon and the echo server as child processes (this
// test binary, see TestMain), as the tool does by default.
func TestConns(t *testing.T) {
	heap := filepath.Join(t.TempDir(), "heap")
	rep := runJSON(t, "conns", "-n", "4", "--settle", "100ms", "--baseline", "--watchers", "3", "--memprofile", heap)
	// The daemon's heap profile at each of its three readings (before,
	// logged in, watching), and the last one under the name given.
	for _, f := range []string{heap, heap + ".1", heap + ".2", heap + ".3"} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("heap profile %s: %v", f, err)
		}
	}
	if figure(t, rep, 4, "daemon RSS after") <= 0 || figure(t, rep, 4, "daemon RSS logged in") <= 0 {
		t.Error("no daemon memory")
	}
	for _, name := range []string{"daemon KiB/agent", "daemon KiB/agent logged in", "daemon KiB/watcher", "idle conn KiB/conn", "KiB/agent vs target",
		"daemon live heap + stacks KiB/agent", "idle conn live heap + stacks KiB/conn", "live heap + stacks vs idle conn's"} {
		figure(t, rep, 4, name)
	}
	if v := figure(t, rep, 4, "target KiB/agent"); v != 17.5 {
		t.Errorf("target with 3 watchers: %v KiB/agent, want 17.5", v)
	}
	if rep.Parameters["watchers-per-agent"] != 3.0 || rep.Parameters["agent-source-addresses"] == nil || rep.Parameters["open-file-limit"] == nil {
		t.Errorf("parameters %v", rep.Parameters)
	}
}

func TestStorm(t *testing.T) {
	for _, mode := range []string{modeChild, modeInproc} {
		rep := runJSON(t, "storm", "-n", "4", "--daemon", mode)
		if v := figure(t, rep, 4, "other errors"); v != 0 {
			t.Errorf("%s: %v errors other than try again", mode, v)
		}
		if figure(t, rep, 4, "all back") <= 0 || figure(t, rep, 4, "10,000 back") <= 0 {
			t.Errorf("%s: no reconnection time", mode)
		}
		if figure(t, rep, 4, "/health after listening") <= 0 || figure(t, rep, 4, "listening after") <= 0 {
			t.Errorf("%s: no /health figures", mode)
		}
		figure(t, rep, 4, "/health slowest during the storm")
		figure(t, rep, 4, "  of which cut or timed out")
		if v := figure(t, rep, 4, "  of which no free source port"); v != 0 {
			t.Errorf("%s: %v binds found no free source port", mode, v)
		}
		if v := figure(t, rep, 4, "/health probes failed"); v != 0 {
			t.Errorf("%s: %v /health probes failed", mode, v)
		}
		// What the storm cost: a daemon of its own is read apart from the
		// agents; in this process, with them.
		if mode == modeChild {
			if figure(t, rep, 4, "CPU per agent back: daemons, from their start") <= 0 {
				t.Errorf("%s: the restarted daemon used no CPU", mode)
			}
			figure(t, rep, 4, "CPU per agent back: the agents' processes")
		} else {
			figure(t, rep, 4, "CPU per agent back: daemon and agents (one process)")
		}
		if figure(t, rep, 4, "CPU of the storm over the box's cores") <= 0 {
			t.Errorf("%s: no CPU for the storm", mode)
		}
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{}, {"nope"}, {"rpc", "-n", "0"}, {"write", "--op", "x"}, {"rpc", "extra"},
		{"rpc", "--store", "mongo"}, {"rpc", "--daemons", "2"}, {"rpc", "--etcd-endpoints", "http://127.0.0.1:2379"},
		{"rpc", "--store", "etcd", "--etcd-prefix", "nope"}, {"rpc", "--store", "etcd", "--etcd-endpoints", "127.0.0.1:2379"},
		{"rpc", "--store", "etcd", "--daemons", "0"}, {"rpc", "--store", "etcd", "--credentials", "x.yaml"},
		{"churn", "--store", "etcd", "--daemons", "2"}, {"storm", "--drain", "-1s"}, {"storm", "--drain", "2h"},
		{"failover"}, {"failover", "--store", "etcd"}, {"failover", "--store", "etcd", "--daemons", "3", "--daemon", "inproc"},
		{"write", "--store", "etcd", "--etcd-ca-file", "ca.pem"}, {"write", "--store", "etcd", "--etcd-username", "root"},
		{"write", "--store", "etcd", "--etcd-endpoints", "https://127.0.0.1:2379", "--etcd-cert-file", "c.pem"},
		{"write", "--store", "etcd", "--etcd-endpoints", "https://127.0.0.1:2379", "--etcd-password", "x"},
		{"rpc", "--window-cpuprofile", "w"}, {"write", "--window-cpuprofile", "w", "--daemon", "inproc"},
		{"watch", "--window-cpuprofile", "w", "--cpuprofile", "c"}, {"write", "--window-cpuprofile", "w", "--daemon-bin", "provisiond"},
		{"watch", "--loadgen-gc", "off"}} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 2 {
			t.Errorf("%q: exit %d, want 2 (%s)", args, code, errb.String())
		}
	}
}

func TestScrapeMetric(t *testing.T) {
	in := "# HELP x\nprovisiond_commit_batch_size_sum 12\nprovisiond_commit_batch_size_count 3\n" +
		"provisiond_requests_total{facade=\"A\",method=\"B\",code=\"\"} 2\nprovisiond_requests_total{facade=\"C\"} 5\n"
	for name, want := range map[string]float64{"provisiond_commit_batch_size_sum": 12, "provisiond_requests_total": 7} {
		got, err := scrapeMetric(strings.NewReader(in), name)
		if err != nil || got != want {
			t.Errorf("%s = %v, %v; want %v", name, got, err, want)
		}
	}
	if _, err := scrapeMetric(strings.NewReader(in), "provisiond_nope"); err == nil {
		t.Error("missing metric: want an error")
	}
}

func TestPercentileMedian(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	if p := percentile(ds, 50); p != 3 {
		t.Errorf("p50 = %v", p)
	}
	if p := percentile(ds, 99); p != 5 {
		t.Errorf("p99 = %v", p)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median = %v", m)
	}
}

func TestScrapeHistogram(t *testing.T) {
	read := func(in string) histogram {
		t.Helper()
		h, err := scrapeHistogram(strings.NewReader(in), "d", `method="A"`)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	before := read(`# TYPE d histogram
d_bucket{method="A",le="0.001"} 1
d_bucket{method="A",le="0.004"} 2
d_bucket{method="A",le="+Inf"} 2
d_bucket{method="B",le="0.001"} 50
d_sum{method="A"} 0.003
d_count{method="A"} 2
`)
	after := read(`d_bucket{method="A",le="0.001"} 91
d_bucket{method="A",le="0.004"} 101
d_bucket{method="A",le="+Inf"} 102
d_bucket{method="A",other="x",le="0.001"} 0
d_bucket{method="A",other="x",le="0.004"} 0
d_bucket{method="A",other="x",le="+Inf"} 0
`)
	run := after.since(before) // 90 at most 1 ms, 9 more at most 4 ms, 1 beyond
	for p, want := range map[float64]float64{50: 0.001, 90: 0.001, 99: 0.004, 100: math.Inf(1)} {
		if got := run.quantileBound(p); got != want {
			t.Errorf("p%v at most %v, want %v", p, got, want)
		}
	}
	if !math.IsNaN(before.since(before).quantileBound(50)) {
		t.Error("no observations: want NaN")
	}
	if _, err := scrapeHistogram(strings.NewReader("x 1\n"), "d"); err == nil {
		t.Error("missing histogram: want an error")
	}
}

// Against a daemon it did not start, the tool removes the machines it
// added at the end, or lists them with --keep-machines.
func TestCredentialsLeavesNoMachines(t *testing.T) {
	if testing.Short() {
		t.Skip("starts daemons")
	}
	cfg := daemon.Default(t.TempDir())
	cfg.Addr = "127.0.0.1:0"
	d, err := daemon.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = d.Shutdown(ctx)
	})
	credsPath := filepath.Join(cfg.DataDir, credentials.File)
	model := d.Credentials().DefaultModelUUID
	bench := func(extra ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var stdout, stderr bytes.Buffer
		args := append([]string{"rpc", "-n", "3", "--duration", "200ms", "--credentials", credsPath, "--json"}, extra...)
		if code := run(ctx, args, &stdout, &stderr); code != 0 {
			t.Fatalf("provisionbench %v: exit %d\n%s", args, code, stderr.String())
		}
		return stderr.String()
	}
	out := bench()
	if ms, err := d.State().Machines(t.Context(), model); err != nil || len(ms) != 0 {
		t.Errorf("machines left after a --credentials run: %v %v", ms, err)
	}
	if !strings.Contains(out, "provisionbench: removed the 3 machines this run added to model "+model+" (0-2)") {
		t.Errorf("stderr:\n%s", out)
	}
	out = bench("--keep-machines")
	ms, err := d.State().Machines(t.Context(), model)
	if err != nil || len(ms) != 3 {
		t.Fatalf("machines after --keep-machines: %v %v", ms, err)
	}
	want := "provisionbench: --keep-machines: left behind in model " + model + ": machines 3-5 (and the containers on them); remove them with\n" +
		"  provisionctl --credentials " + credsPath + " remove-machine -m " + model + " --force --no-wait 3 4 5\n"
	if !strings.Contains(out, want) {
		t.Errorf("stderr:\n%s\nwant:\n%s", out, want)
	}
}

func TestCompactIDs(t *testing.T) {
	for _, tc := range []struct {
		ids  []string
		want string
	}{
		{nil, ""},
		{[]string{"7"}, "7"},
		{[]string{"1", "2"}, "1, 2"},
		{[]string{"1", "2", "3", "5", "6", "9", "10", "11", "12"}, "1-3, 5, 6, 9-12"},
		{[]string{"0/lxd/0", "1", "2", "3"}, "0/lxd/0, 1-3"},
	} {
		if got := compactIDs(tc.ids); got != tc.want {
			t.Errorf("compactIDs(%q) = %q, want %q", tc.ids, got, tc.want)
		}
	}
}

// Etcd mode (etcd.go): the tool starts one etcd member and the daemons on
// it; the baselines are etcd's own client and, for rpc, a bbolt daemon.

func TestEtcdWrite(t *testing.T) {
	// A second rather than 300 ms: under the whole suite on two cores one
	// stall of etcd's fsync or of a daemon can outlast a 300 ms window at
	// one writer, which then counts no write (seen once in CI).
	rep := runJSON(t, "write", "-n", "1,3", "--duration", "1s", "--baseline", "--daemon", "inproc",
		"--store", "etcd", "--daemons", "2")
	for _, n := range []int{1, 3} {
		if figure(t, rep, n, "writes/s") <= 0 || figure(t, rep, n, "raw etcd txn/s") <= 0 {
			t.Errorf("no writes at %d writers", n)
		}
		if e := figure(t, rep, n, "errors"); e != 0 {
			t.Errorf("%v errors at %d writers", e, n)
		}
		figure(t, rep, n, "writes/s vs raw etcd txn")
	}
	figure(t, rep, 1, "writes/s vs raw etcd txn + echo")
	if !strings.Contains(rep.Daemon, "etcd") {
		t.Errorf("daemon %q does not say etcd", rep.Daemon)
	}
}

func TestEtcdRPC(t *testing.T) {
	rep := runJSON(t, "rpc", "-n", "3", "--duration", "300ms", "--baseline", "--daemon", "inproc",
		"--store", "etcd", "--daemons", "2")
	if figure(t, rep, 3, "calls/s") <= 0 || figure(t, rep, 3, "bbolt calls/s") <= 0 {
		t.Error("no calls")
	}
	for _, name := range []string{"errors", "bbolt errors"} {
		if e := figure(t, rep, 3, name); e != 0 {
			t.Errorf("%s: %v", name, e)
		}
	}
	figure(t, rep, 3, "calls/s vs bbolt")
}

// Writes through the last daemon reach watchers on the first; etcd's own
// watch is the baseline. Child processes: the daemons, the etcd member.
func TestEtcdWatchAcrossDaemons(t *testing.T) {
	rep := runJSON(t, "watch", "-n", "4", "--watchers", "2", "--rate", "20", "--duration", "1s", "--baseline",
		"--store", "etcd", "--daemons", "2")
	if d := figure(t, rep, 4, "deliveries"); d <= 0 {
		t.Error("no deliveries")
	}
	for _, name := range []string{"lost", "failed writes", "duplicates", "etcd lost"} {
		if v := figure(t, rep, 4, name); v != 0 {
			t.Errorf("%s = %v", name, v)
		}
	}
	figure(t, rep, 4, "etcd p99 latency")
	figure(t, rep, 4, "p99 over etcd p99")
	figure(t, rep, 4, "daemon CPU per change")
}

// Three child daemons; the last is killed twice (it is started again
// between the runs); its agents come back on the others.
func TestFailover(t *testing.T) {
	rep := runJSON(t, "failover", "-n", "3", "--repeat", "2", "--store", "etcd", "--daemons", "3")
	if v := figure(t, rep, 3, "agents moved"); v != 3 {
		t.Errorf("agents moved = %v, want 3", v)
	}
	for _, name := range []string{"other errors", "survivors dropped"} {
		if v := figure(t, rep, 3, name); v != 0 {
			t.Errorf("%s = %v", name, v)
		}
	}
	if figure(t, rep, 3, "all back") <= 0 {
		t.Error("no failover time")
	}
}

// TestEtcdSecured: on a given cluster with TLS (client certificates) and
// auth, the daemons (child processes: flags, and the password in their
// environment) and the raw baseline reach it as told; without the
// password the run fails with a message, not a hang.
func TestEtcdSecured(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and daemons")
	}
	c, files := etcdtest.NewTLS(t)
	tc, err := etcdstore.ClientTLS(files.CAFile, files.ClientCert, files.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), TLS: tc, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cli.UserAdd(ctx, "root", "bench-secret"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	args := []string{"write", "-n", "1", "--duration", "300ms", "--baseline", "--op", "status", "--store", "etcd",
		"--etcd-endpoints", strings.Join(c.Endpoints(), ","), "--etcd-ca-file", files.CAFile,
		"--etcd-cert-file", files.ClientCert, "--etcd-key-file", files.ClientKey, "--etcd-username", "root"}

	t.Setenv(etcdPasswordEnv, "bench-secret")
	rep := runJSON(t, args...)
	if figure(t, rep, 1, "writes/s") <= 0 || figure(t, rep, 1, "raw etcd txn/s") <= 0 {
		t.Error("no writes")
	}
	if e := figure(t, rep, 1, "errors"); e != 0 {
		t.Errorf("%v errors", e)
	}

	t.Setenv(etcdPasswordEnv, "")
	var stdout, stderr bytes.Buffer
	if code := run(ctx, append(args, "--etcd-password", "wrong"), &stdout, &stderr); code == 0 {
		t.Fatalf("a wrong etcd password: exit 0\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "authentication failed") {
		t.Errorf("a wrong etcd password: %s", stderr.String())
	}
}
