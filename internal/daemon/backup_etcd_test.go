package daemon_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/backup"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/internal/migrate"
	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/state"
)

// tarNames lists an archive's entries, sorted.
func tarNames(t *testing.T, archive []byte) []string {
	t.Helper()
	var names []string
	for _, f := range untar(t, archive) {
		names = append(names, f.name)
	}
	slices.Sort(names)
	return names
}

func fetchBackup(t *testing.T, s *provisiondtest.Server) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var buf bytes.Buffer
	if err := backup.Fetch(ctx, s.Credentials(), &buf, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestBackupRestoreOnEtcd: a daemon on etcd answers /backup with the
// archive a bbolt daemon gives (the database and the identity's files),
// taken at one revision while machines are being added; it restores into
// an empty etcd prefix (refused into a full one) and into a bbolt data
// dir, and daemons started on either are the same controller, with the
// old logins and every machine the snapshot held, no more, no fewer.
func TestBackupRestoreOnEtcd(t *testing.T) {
	etcd := etcdtest.New(t)
	a := provisiondtest.Start(t, provisiondtest.WithEtcd(etcd.Endpoints(), "/backed-up/"))
	login := fillController(t, a)
	creds := *a.Credentials()
	model := a.DefaultModel()

	// Machines go on being added while the backup is taken.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := testkit.Daemon(a).State().AddMachine(t.Context(), model, state.MachineParams{}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	archive := fetchBackup(t, a)
	close(stop)
	wg.Wait()
	t.Logf("archive of %d bytes", len(archive))
	want := []string{daemon.CredentialsFile, "ca.crt", "ca.key", daemon.DBFile, "server.crt", "server.key", backup.ManifestFile, backup.ManifestDigestFile}
	slices.Sort(want)
	if got := tarNames(t, archive); !slices.Equal(got, want) {
		t.Fatalf("archive holds %v, want %v", got, want)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ecfg := migrateEtcd(etcd.Endpoints(), "/restored/")
	res, err := backup.RestoreToEtcd(ctx, bytes.NewReader(archive), ecfg, t.TempDir(), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Controller != creds.ControllerUUID {
		t.Fatalf("restored %+v", res)
	}
	if _, err := backup.RestoreToEtcd(ctx, bytes.NewReader(archive), ecfg, t.TempDir(), false, nil); !errors.Is(err, migrate.ErrNotEmpty) {
		t.Fatalf("restore into a full prefix: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	onEtcd := provisiondtest.Start(t, provisiondtest.WithEtcd(etcd.Endpoints(), "/restored/"))
	sameController(t, onEtcd, creds)
	loginsWork(t, onEtcd, creds, login)
	restored := modelEntities(t, testkit.Daemon(onEtcd).State(), model)
	consistentMachines(t, testkit.Daemon(onEtcd).State(), model)

	dir := filepath.Join(t.TempDir(), "data")
	if err := backup.Restore(bytes.NewReader(archive), dir, backup.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	onBolt := provisiondtest.Start(t, provisiondtest.WithDataDir(dir))
	sameController(t, onBolt, creds)
	loginsWork(t, onBolt, creds, login)
	if got := modelEntities(t, testkit.Daemon(onBolt).State(), model); !slices.Equal(got, restored) {
		t.Fatalf("the archive restored on bbolt holds\n%v\nand on etcd\n%v", got, restored)
	}
}

// consistentMachines checks that a restored model's machines are those of
// one revision: the machine sequence, bumped in each AddMachine's
// transaction, gives the next machine the id after the highest, with no
// machine missing below it.
func consistentMachines(t *testing.T, st *state.State, model string) {
	t.Helper()
	ms, err := st.Machines(t.Context(), model)
	if err != nil {
		t.Fatal(err)
	}
	var top int
	ids := map[string]bool{}
	for _, m := range ms {
		if strings.Contains(m.ID, "/") {
			continue
		}
		ids[m.ID] = true
		top = max(top, atoi(t, m.ID))
	}
	for i := 0; i <= top; i++ {
		if !ids[itoa(i)] {
			t.Fatalf("machine %d of %d is missing: the snapshot is not of one revision", i, top)
		}
	}
	m, err := st.AddMachine(t.Context(), model, state.MachineParams{})
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != itoa(top+1) {
		t.Fatalf("the next machine is %s after %d: the sequence and the machines are of different revisions", m.ID, top)
	}
}

// TestBoltBackupRestoresIntoEtcd: a bbolt daemon's archive loads into
// etcd as well.
func TestBoltBackupRestoresIntoEtcd(t *testing.T) {
	etcd := etcdtest.New(t)
	b := provisiondtest.Start(t)
	login := fillController(t, b)
	creds := *b.Credentials()
	archive := fetchBackup(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := backup.RestoreToEtcd(ctx, bytes.NewReader(archive), migrateEtcd(etcd.Endpoints(), "/from-bolt/"), t.TempDir(), false, nil); err != nil {
		t.Fatal(err)
	}
	want := modelEntities(t, testkit.Daemon(b).State(), b.DefaultModel())
	onEtcd := provisiondtest.Start(t, provisiondtest.WithEtcd(etcd.Endpoints(), "/from-bolt/"))
	sameController(t, onEtcd, creds)
	loginsWork(t, onEtcd, creds, login)
	if got := modelEntities(t, testkit.Daemon(onEtcd).State(), b.DefaultModel()); !slices.Equal(got, want) {
		t.Fatalf("entities on etcd\n%v\nwant\n%v", got, want)
	}
	// A garbage archive is refused, and leaves the prefix empty.
	if _, err := backup.RestoreToEtcd(ctx, strings.NewReader("not a tar archive"), migrateEtcd(etcd.Endpoints(), "/garbage/"), t.TempDir(), false, nil); err == nil || !strings.Contains(err.Error(), "restore") {
		t.Fatalf("restore of garbage: %v", err)
	}
	if _, err := backup.RestoreToEtcd(ctx, bytes.NewReader(archive), migrateEtcd(etcd.Endpoints(), "/garbage/"), t.TempDir(), false, nil); err != nil {
		t.Fatalf("restore after a refused one: %v", err)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("machine id %q: %v", s, err)
	}
	return n
}

func itoa(n int) string { return strconv.Itoa(n) }
