package watchers_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/provisiondtest"
	_ "github.com/provisiond/provisiond/provisiondtest/embeddedetcd" // PROVISIOND_TEST_STORE=etcd: the daemons' etcd
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state/store"

	_ "github.com/provisiond/provisiond/provisiondtest/embeddedetcd" // WithStore(StoreEtcd)
)

// daemons starts the daemons a resume test moves between: on bbolt one
// (the agent reconnects to it), with PROVISIOND_TEST_STORE=etcd two of
// one controller (the agent reconnects to the other).
func daemons(t *testing.T) (first, second *provisiondtest.Server) {
	if os.Getenv("PROVISIOND_TEST_STORE") == "etcd" {
		first = provisiondtest.Start(t, provisiondtest.WithStore(provisiondtest.StoreEtcd))
		return first, provisiondtest.Start(t, provisiondtest.Join(first))
	}
	first = provisiondtest.Start(t)
	return first, first
}

func nextValue(t *testing.T, w *client.StringsWatch) []string {
	t.Helper()
	select {
	case ids, ok := <-w.Changes():
		if !ok {
			t.Fatalf("watch ended: %v", w.Err())
		}
		return slices.Sorted(slices.Values(ids))
	case <-time.After(30 * time.Second):
		t.Fatal("no event in 30s")
	}
	return nil
}

func addMachines(t *testing.T, c *client.Conn, model string, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := client.NewModelAdmin(c).AddMachines(ctx, params.AddMachinesArgs{Model: model, Count: n})
	if err != nil {
		t.Fatal(err)
	}
	return res.Machines
}

// watchedRevision opens a fresh machines watch on ctrl with
// from-revision, takes its initial event and stops it, and returns the
// revision the event covered: one to resume after later.
func watchedRevision(t *testing.T, ctx context.Context, ctrl *client.Conn) uint64 {
	t.Helper()
	w, err := client.NewProvisioner(ctrl).WatchModelMachinesFrom(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	nextValue(t, w)
	defer w.Stop()
	return w.Revision()
}

// TestResumedWatchOnTheWire: a watcher opened with provisiond's
// from-revision reports the revision each event covers; after its
// connection is gone, a watch of the same thing resumed from that
// revision, on the other daemon of the controller (etcd) or the same
// (bbolt), reports exactly the machines added meanwhile, then goes on
// live; none is missed, none of those already seen comes again.
func TestResumedWatchOnTheWire(t *testing.T) {
	first, second := daemons(t)
	model := first.DefaultModel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	admin := first.Admin(t, "")
	before := addMachines(t, admin, model, 2)
	ctrl := first.ControllerAgent(t, model)
	w, err := client.NewProvisioner(ctrl).WatchModelMachinesFrom(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := nextValue(t, w); !slices.Equal(got, slices.Sorted(slices.Values(before))) {
		t.Fatalf("initial event %v, want %v", got, before)
	}
	if w.Revision() == 0 {
		t.Fatal("a watch opened with from-revision reports no revision")
	}
	seen := addMachines(t, admin, model, 1)
	if got := nextValue(t, w); !slices.Equal(got, seen) {
		t.Fatalf("event %v, want %v", got, seen)
	}
	rev := w.Revision()
	_ = ctrl.Close()

	// Written through the other daemon while the agent is away.
	admin2 := second.Admin(t, "")
	missed := addMachines(t, admin2, model, 3)

	ctrl2 := second.ControllerAgent(t, model)
	w2, err := client.NewProvisioner(ctrl2).WatchModelMachinesFrom(ctx, rev)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	if got := nextValue(t, w2); !slices.Equal(got, slices.Sorted(slices.Values(missed))) {
		t.Fatalf("resumed after %d: initial event %v, want exactly the machines added meanwhile %v", rev, got, missed)
	}
	if w2.Revision() < rev {
		t.Fatalf("resumed watch covers revision %d, before the one resumed from (%d)", w2.Revision(), rev)
	}
	live := addMachines(t, admin2, model, 1)
	if got := nextValue(t, w2); !slices.Equal(got, live) {
		t.Fatalf("live event after the resume %v, want %v", got, live)
	}
}

// TestResumeWithoutHistory: a Watch call with from-revision 0 is a fresh
// watch whose reply carries its revision; a call that opens no resumable
// watcher answers none, nor does a watch opened without the key (Juju's
// bytes).
func TestResumeWithoutHistory(t *testing.T) {
	srv := provisiondtest.Start(t)
	model := srv.DefaultModel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctrl := srv.ControllerAgent(t, model)
	var res params.StringsWatchResult
	rev, err := ctrl.CallFrom(ctx, "Provisioner", 11, "", "WatchModelMachines", 0, nil, &res)
	if err != nil || rev == 0 {
		t.Fatalf("CallFrom(0): revision %d, %v", rev, err)
	}
	// Juju's call: no from-revision, no revision.
	if rev, err := ctrl.CallFrom(ctx, "Pinger", 1, "", "Ping", 0, nil, nil); err != nil || rev != 0 {
		t.Fatalf("a Ping with from-revision: revision %d, %v (want none: not a watch)", rev, err)
	}
	w, err := client.NewProvisioner(ctrl).WatchModelMachines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if w.Revision() != 0 {
		t.Fatalf("a watch opened without from-revision reports revision %d", w.Revision())
	}
}

// TestResumeTooOld: a watch resumed after a revision whose history the
// pruner has since deleted (a retention of 10 revisions, the pruner run
// as the history pruner runs it) fails over the wire with code "watcher
// reset" (client.ErrWatcherReset), and no watcher is left open; resumed
// after a revision still kept, it opens. On bbolt: etcd's window is its
// compaction floor's (TestCompactionFloor).
func TestResumeTooOld(t *testing.T) {
	srv := provisiondtest.Start(t)
	model := srv.DefaultModel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := srv.Admin(t, "")
	ctrl := srv.ControllerAgent(t, model)
	old := watchedRevision(t, ctx, ctrl)
	for range 12 {
		addMachines(t, admin, model, 1)
	}
	pruner, ok := testkit.Daemon(srv).State().Store().(interface {
		PruneHistory(ctx context.Context, r store.Retention, now time.Time, max int) (int, error)
	})
	if !ok {
		t.Fatal("the bbolt store has no PruneHistory")
	}
	if n, err := pruner.PruneHistory(ctx, store.Retention{Revisions: 10}, time.Now(), 0); err != nil || n == 0 {
		t.Fatalf("PruneHistory = %d, %v; want some pruned", n, err)
	}
	_, err := client.NewProvisioner(ctrl).WatchModelMachinesFrom(ctx, old)
	if !errors.Is(err, client.ErrWatcherReset) || !client.IsCode(err, params.CodeWatcherReset) {
		t.Fatalf("resumed after pruned revision %d: %v, want code %q", old, err, params.CodeWatcherReset)
	}
	if !strings.Contains(err.Error(), "older than the history kept") {
		t.Errorf("error %q does not say why", err)
	}
	// The same from a revision still kept: the watch opens.
	rev := watchedRevision(t, ctx, ctrl)
	w, err := client.NewProvisioner(ctrl).WatchModelMachinesFrom(ctx, rev)
	if err != nil {
		t.Fatalf("resumed after %d, still kept: %v", rev, err)
	}
	defer w.Stop()
	if got := nextValue(t, w); len(got) != 0 {
		t.Errorf("resumed after the newest revision: initial event %v, want none", got)
	}
}

// TestResumedNotifyWatchOnTheWire: a notify watch opened with
// from-revision sends its initial value and reports the revision it
// covers; resumed after that revision on the other daemon (etcd) or the
// same (bbolt) once the model's config was written meanwhile, its first
// value comes at once (the event left pending) and covers the write;
// resumed after the write, with nothing written since, it reports that
// revision without a value, and a later write sends one.
func TestResumedNotifyWatchOnTheWire(t *testing.T) {
	first, second := daemons(t)
	model := first.DefaultModel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	recv := func(w *client.NotifyWatch) {
		t.Helper()
		select {
		case _, ok := <-w.Changes():
			if !ok {
				t.Fatalf("watch ended: %v", w.Err())
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no value in 30s")
		}
	}
	setConfig := func(v string) {
		t.Helper()
		if _, err := client.NewModelAdmin(second.Admin(t, "")).SetModelConfig(ctx, params.SetModelConfigArgs{
			Model: model, Config: map[string]any{"ftp-proxy": v}}); err != nil {
			t.Fatal(err)
		}
	}

	ctrl := first.ControllerAgent(t, model)
	w, err := client.NewProvisioner(ctrl).WatchForModelConfigChangesFrom(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	recv(w)
	rev := w.Revision()
	if rev == 0 {
		t.Fatal("a notify watch opened with from-revision reports no revision")
	}
	_ = ctrl.Close()

	setConfig("http://a")
	ctrl2 := second.ControllerAgent(t, model)
	w2, err := client.NewProvisioner(ctrl2).WatchForModelConfigChangesFrom(ctx, rev)
	if err != nil {
		t.Fatal(err)
	}
	recv(w2)
	written := w2.Revision()
	if written <= rev {
		t.Fatalf("the value after the write covers revision %d, not after the one resumed from (%d)", written, rev)
	}
	_ = w2.Stop()

	w3, err := client.NewProvisioner(ctrl2).WatchForModelConfigChangesFrom(ctx, written)
	if err != nil {
		t.Fatal(err)
	}
	defer w3.Stop()
	if got := w3.Revision(); got < written {
		t.Fatalf("resumed after %d with nothing written since: covers %d", written, got)
	}
	setConfig("http://b")
	recv(w3)
	if got := w3.Revision(); got <= written {
		t.Fatalf("the value after a later write covers %d, not after %d", got, written)
	}
}

// TestResumeAcrossLostHistory: on etcd, etcd's history compacted through
// etcd's own client (as an operator, etcd's auto-compaction or the
// compactor when etcd is out of space may) past records not yet archived.
// The records lost are not skipped: a watch resumed after a revision
// before them fails over the wire with code "watcher reset", history
// --since before them fails naming the oldest point kept, and
// show-controller's oldest revision is the compact revision C (etcd
// keeps C's versions and removes the older); a watch resumed after C-1
// opens.
func TestResumeAcrossLostHistory(t *testing.T) {
	srv := provisiondtest.Start(t, provisiondtest.WithStore(provisiondtest.StoreEtcd))
	model := srv.DefaultModel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := srv.Admin(t, "")
	ctrl := srv.ControllerAgent(t, model)
	old := watchedRevision(t, ctx, ctrl)
	addMachines(t, admin, model, 3)
	kept := srv.Revision()

	endpoints, _ := srv.Etcd()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Compact(ctx, int64(kept)); err != nil {
		t.Fatal(err)
	}

	_, err = client.NewProvisioner(ctrl).WatchModelMachinesFrom(ctx, old)
	if !errors.Is(err, client.ErrWatcherReset) || !client.IsCode(err, params.CodeWatcherReset) {
		t.Fatalf("resumed after %d, before the records compacted away (up to %d): %v, want code %q", old, kept-1, err, params.CodeWatcherReset)
	}
	ma := client.NewModelAdmin(admin)
	info, err := ma.ControllerInfo(ctx)
	if err != nil || info.History == nil || info.History.OldestRevision != kept {
		t.Fatalf("show-controller's history: %+v, %v; want the oldest revision %d", info.History, err, kept)
	}
	_, err = ma.History(ctx, params.HistoryArgs{Model: model, Since: strconv.FormatUint(old+1, 10)})
	if want := fmt.Sprintf("the oldest point kept is revision %d", kept); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("history --since %d: %v, want it to say %q", old+1, err, want)
	}
	w, err := client.NewProvisioner(ctrl).WatchModelMachinesFrom(ctx, kept-1)
	if err != nil {
		t.Fatalf("resumed after %d, the oldest point kept: %v", kept-1, err)
	}
	defer w.Stop()
	if got := nextValue(t, w); len(got) != 1 {
		t.Errorf("resumed after %d: initial event %v, want the machine added at %d", kept-1, got, kept)
	}
}

// TestResumesShareOneHistoryRead: many watches resumed at once, from two
// nearby revisions, on the other daemon of the controller (etcd) or the
// same (bbolt), each get exactly the machines added after their
// revision; the daemon reads the store's history for a few of them and
// serves the others from the recent history it holds
// (provisiond_history_resumes_shared_total, _reads_total).
func TestResumesShareOneHistoryRead(t *testing.T) {
	first, second := daemons(t)
	model := first.DefaultModel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := first.Admin(t, "")
	ctrl := first.ControllerAgent(t, model)
	rev1 := watchedRevision(t, ctx, ctrl)
	added1 := addMachines(t, admin, model, 2)
	rev2 := watchedRevision(t, ctx, ctrl)
	added2 := addMachines(t, admin, model, 3)
	want1 := slices.Sorted(slices.Values(append(slices.Clone(added1), added2...)))
	want2 := slices.Sorted(slices.Values(added2))

	conns := make([]*client.Conn, 4)
	for i := range conns {
		conns[i] = second.ControllerAgent(t, model)
	}
	d := testkit.Daemon(second)
	names := []string{"provisiond_history_resumes_total", "provisiond_history_resumes_shared_total", "provisiond_history_reads_total"}
	read := func() []float64 {
		out := make([]float64, len(names))
		for i, n := range names {
			out[i] = testkit.MetricValue(t, d, n)
		}
		return out
	}
	before := read()
	const n = 40
	errs := make(chan error, n)
	var retries atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from, want := rev1, want1
			if i%2 == 1 {
				from, want = rev2, want2
			}
			w, err := client.NewProvisioner(conns[i%len(conns)]).WatchModelMachinesFrom(ctx, from)
			for try := 0; client.IsCode(err, params.CodeTryAgain) && try < 5; try++ {
				// etcd slow on a loaded box: again, as an agent would
				retries.Add(1)
				time.Sleep(time.Duration(try+1) * 200 * time.Millisecond)
				w, err = client.NewProvisioner(conns[i%len(conns)]).WatchModelMachinesFrom(ctx, from)
			}
			if err != nil {
				errs <- fmt.Errorf("resume %d after %d: %w", i, from, err)
				return
			}
			defer w.Stop()
			select {
			case ids, ok := <-w.Changes():
				if got := slices.Sorted(slices.Values(ids)); !ok || !slices.Equal(got, want) {
					errs <- fmt.Errorf("resume %d after %d: initial event %v (%v), want %v", i, from, got, w.Err(), want)
				}
			case <-ctx.Done():
				errs <- fmt.Errorf("resume %d after %d: no initial event", i, from)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	after := read()
	resumes, shared, reads := after[0]-before[0], after[1]-before[1], after[2]-before[2]
	t.Logf("%v resumed watchers (%d tried again): %v served from the daemon's recent history, %v reads of the store's history", resumes, retries.Load(), shared, reads)
	if resumes < n || resumes > float64(n+retries.Load()) {
		t.Errorf("%v resumed watchers replayed the history, want %d (and up to %d tried again)", resumes, n, retries.Load())
	}
	// A read of the store is a range and then the oldest point kept: a
	// few of them, for the first resume and for one that reaches past an
	// end of what the daemon holds (the other revision, or a revision
	// committed meanwhile).
	if shared < n-4 || reads > float64(8+2*retries.Load()) {
		t.Errorf("%v of %d resumed watchers shared the history read, with %v reads of the store; want at most 4 reads of it (8 reads)", shared, n, reads)
	}
}
