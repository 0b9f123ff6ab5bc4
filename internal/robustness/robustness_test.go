package robustness_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/daemonproc"
	"github.com/provisiond/provisiond/internal/robustness"
)

// binDir holds the binaries TestMain built ("" with -short): provisiond
// with -tags failpoints (its failpoints do nothing unless
// PROVISIOND_FAILPOINTS names them; the harness crashes daemons at them,
// and the planted-bug test switches the planted bugs on) and etcdcluster,
// the etcd member program. They are built without the race detector:
// the daemons are the system under test, killed and stopped; this test's
// process runs with -race.
var binDir string

func TestMain(m *testing.M) {
	daemonproc.RunTests(m, &binDir, "failpoints", "github.com/provisiond/provisiond/cmd/provisiond", "github.com/provisiond/provisiond/cmd/etcdcluster")
}

// bins returns the built provisiond and etcdcluster, or skips the test
// with -short.
func bins(t *testing.T) (provisiond, etcd string) {
	t.Helper()
	if binDir == "" {
		t.Skip("builds and runs etcd members and daemons as processes")
	}
	return filepath.Join(binDir, "provisiond"), filepath.Join(binDir, "etcdcluster")
}

// seed is $ROBUSTNESS_SEED, or a new one.
func seed(t *testing.T) uint64 {
	if s := os.Getenv("ROBUSTNESS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("ROBUSTNESS_SEED=%q: want a number", s)
		}
		return n
	}
	return uint64(time.Now().UnixNano()%1_000_000_000 + 1)
}

// duration is $ROBUSTNESS_DURATION (a Go duration), or def.
func duration(t *testing.T, def time.Duration) time.Duration {
	if s := os.Getenv("ROBUSTNESS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("ROBUSTNESS_DURATION=%q: want a positive Go duration", s)
		}
		return d
	}
	return def
}

func logf(t *testing.T) func(string, ...any) {
	if !testing.Verbose() {
		return nil
	}
	return t.Logf
}

// run runs the harness and reports: the seed, the figures, every
// anomaly, and the history file when there is one. It returns the result.
func run(t *testing.T, cfg robustness.Config) robustness.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), cfg.Duration+10*time.Minute)
	defer cancel()
	t.Logf("seed %d (ROBUSTNESS_SEED=%d replays the fault schedule), %s", cfg.Seed, cfg.Seed, cfg.Duration)
	res, err := robustness.Run(ctx, cfg)
	if res.History != nil {
		t.Log(robustness.Report(res))
	}
	if err != nil {
		if res.History != nil {
			path, herr := robustness.WriteHistory(res.History)
			t.Logf("history in %s (%v)", path, herr)
		}
		t.Fatalf("seed %d: %v", cfg.Seed, err)
	}
	return res
}

// TestRobustness runs three etcd members and three daemons, each a process
// of its own, under a mixed workload through the API and faults drawn
// from a seed (ROBUSTNESS_SEED), for ROBUSTNESS_DURATION (default 30s,
// beside the planted bugs' runs; make robustness runs longer), each daemon in a network namespace of its
// own when the run is root (ROBUSTNESS_NETNS=off keeps them in the
// harness's), with a WatchModel resumed from its revision across
// reconnects on each daemon (unless ROBUSTNESS_RESUMED=off), and fails on any anomaly the checker
// finds in the recorded history, which it then writes to a file it
// names.
func TestRobustness(t *testing.T) {
	provisiond, etcd := bins(t)
	t.Parallel()
	res := run(t, robustness.Config{Provisiond: provisiond, Etcd: etcd, Dir: t.TempDir(), Failpoints: true,
		NoNetns: os.Getenv("ROBUSTNESS_NETNS") == "off", Resumed: os.Getenv("ROBUSTNESS_RESUMED") != "off",
		Seed: seed(t), Duration: duration(t, 30*time.Second), Logf: logf(t)})
	if len(res.Anomalies) > 0 {
		path, err := robustness.WriteHistory(res.History)
		t.Fatalf("seed %d: %d anomalies; history in %s (%v)", res.History.Seed, len(res.Anomalies), path, err)
	}
	requireWorkload(t, res)
}

// requireWorkload fails a vacuous run: no faults, few acknowledged writes
// or reads, no deliveries.
func requireWorkload(t *testing.T, res robustness.Result) {
	t.Helper()
	s := res.Summary
	if s.Acked < 50 || s.Reads < 50 || s.Deliveries < 20 {
		t.Fatalf("too little checked: %s", s)
	}
}
