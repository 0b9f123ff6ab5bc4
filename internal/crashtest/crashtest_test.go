package crashtest_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/crashtest"
	"github.com/provisiond/provisiond/internal/daemonproc"
)

// build builds the provisiond binary (with the given build tags) into a
// temporary directory. It is built without the race detector: the daemon
// is the system under test, killed hundreds of times, and its races are
// the business of the in-process tests; this test's own process runs with
// -race under make test.
func build(t *testing.T, tags string) string {
	t.Helper()
	dir := t.TempDir()
	if err := daemonproc.Build(dir, tags, "github.com/provisiond/provisiond/cmd/provisiond"); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "provisiond")
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number", name, s)
	}
	return n
}

func logf(t *testing.T) func(string, ...any) {
	if !testing.Verbose() {
		return nil
	}
	return t.Logf
}

// TestCrashRecovery kills the daemon with SIGKILL at random moments while
// it takes concurrent writes, CRASH_CYCLES times (default 50; make crash
// runs 1000), and checks after each kill that every acknowledged write is
// there, the file is consistent, the revision did not go backwards and
// agents see the model on disk. CRASH_SEED repeats a run's random choices.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the daemon binary")
	}
	t.Parallel()
	cycles := envInt(t, "CRASH_CYCLES", 50)
	seed := uint64(envInt(t, "CRASH_SEED", int(time.Now().UnixNano()%1_000_000_000+1)))
	bin := build(t, "")
	ctx, cancel := context.WithTimeout(t.Context(), time.Duration(cycles)*5*time.Second+time.Minute)
	defer cancel()

	res, err := crashtest.Run(ctx, crashtest.Config{
		Binary: bin, DataDir: filepath.Join(t.TempDir(), "data"), Cycles: cycles, Seed: seed, Logf: logf(t),
	})
	t.Logf("seed %d: %s", seed, res.Summary())
	var v *crashtest.Violation
	if errors.As(err, &v) {
		t.Fatalf("seed %d: %v\ndaemon log:\n%s", seed, v, v.Log)
	}
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	requireWorkload(t, res, cycles)
}

// requireWorkload fails t when a run was vacuous: fewer cycles than asked,
// few writes, a writer that got none through, or no machine taken through
// its whole life.
func requireWorkload(t *testing.T, res crashtest.Result, cycles int) {
	t.Helper()
	if res.Cycles != cycles {
		t.Fatalf("%d cycles run; want %d", res.Cycles, cycles)
	}
	// Not vacuous: most cycles acknowledge writes.
	if res.Acked < cycles {
		t.Fatalf("only %d writes acknowledged in %d cycles", res.Acked, cycles)
	}
	// Every writer got writes through, and machines the API added went
	// through their whole life.
	for _, w := range []string{"admin-models", "admin-config", "admin-machines", "agent", "caas"} {
		if res.AckedBy[w] == 0 {
			t.Errorf("writer %s: no write acknowledged (%s)", w, res.Summary())
		}
	}
	if res.MachinesRemoved == 0 {
		t.Errorf("no machine added through the API was removed (%s)", res.Summary())
	}
}

// TestHarnessCatchesPlantedBug runs the harness against a daemon built with
// -tags crashbug, whose committer answers each batch before committing it
// (state/store/boltstore/crashbug.go), and requires the harness to report a lost
// acknowledged write within a bounded number of cycles: with a 50ms wait
// between the answer and the commit, and with none at all (the window is
// then just the commit itself). Measured: the first is caught in the first
// or second cycle; the second within 1 to 9 cycles before the machine
// adder and CAAS writers came, 2 to 12 since (7 runs), so 10 and 60 leave
// no room for a flake.
func TestHarnessCatchesPlantedBug(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the daemon binary")
	}
	t.Parallel()
	seed := uint64(envInt(t, "CRASH_SEED", int(time.Now().UnixNano()%1_000_000_000+1)))
	bin := build(t, "crashbug")
	for _, tc := range []struct {
		delay     string
		maxCycles int
	}{{"50ms", 10}, {"0s", 60}} {
		t.Run("delay="+tc.delay, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			res, err := crashtest.Run(ctx, crashtest.Config{
				Binary: bin, DataDir: filepath.Join(t.TempDir(), "data"), Cycles: tc.maxCycles, Seed: seed,
				Env:      []string{"PROVISIOND_CRASHBUG_DELAY=" + tc.delay},
				SetupEnv: []string{"PROVISIOND_CRASHBUG_DELAY=off"}, Logf: logf(t),
			})
			var v *crashtest.Violation
			if !errors.As(err, &v) {
				t.Fatalf("seed %d: the harness did not catch the planted bug in %d cycles (%s); err = %v",
					seed, tc.maxCycles, res.Summary(), err)
			}
			if v.Kind != crashtest.ViolationLostWrite {
				t.Fatalf("seed %d: caught %v; want %q", seed, v, crashtest.ViolationLostWrite)
			}
			t.Logf("seed %d: caught at cycle %d of at most %d, after %s: %v",
				seed, v.Cycle, tc.maxCycles, res.Elapsed.Round(time.Millisecond), v)
		})
	}
}
