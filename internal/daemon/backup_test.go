package daemon_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/backup"
	"github.com/provisiond/provisiond/internal/controllerstore"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/state"
)

func TestBackupRestore(t *testing.T) {
	d := start(t, nil)
	creds := d.Credentials()
	st := d.State()
	m, err := st.AddModel(t.Context(), "k8s", state.ModelTypeCAAS, map[string]any{"workload-storage": "fast"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddMachine(t.Context(), creds.DefaultModelUUID, state.MachineParams{Password: "machine-1-password-long", Nonce: "n", InstanceID: "i-1"}); err != nil {
		t.Fatal(err)
	}
	rev := st.Revision()

	var archive bytes.Buffer
	var lastDone, lastTotal int64
	if err := backup.Fetch(ctxT(t), &creds, &archive, func(done, total int64) { lastDone, lastTotal = done, total }); err != nil {
		t.Fatal(err)
	}
	if lastTotal <= 0 || lastDone != lastTotal || int64(archive.Len()) != lastTotal {
		t.Fatalf("progress %d/%d, archive %d bytes", lastDone, lastTotal, archive.Len())
	}

	dir := t.TempDir()
	if err := backup.Restore(bytes.NewReader(archive.Bytes()), dir, backup.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	// Again without --force: refused; with it: fine.
	if err := backup.Restore(bytes.NewReader(archive.Bytes()), dir, backup.RestoreOptions{}); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("second restore: %v", err)
	}
	if err := backup.Restore(bytes.NewReader(archive.Bytes()), dir, backup.RestoreOptions{Force: true}); err != nil {
		t.Fatal(err)
	}

	cfg := daemon.Default(dir)
	cfg.Addr = "127.0.0.1:0"
	d2, err := daemon.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		d2.Shutdown(ctx)
	}()
	// A restored daemon on its data dir refuses another restore.
	err = backup.Restore(bytes.NewReader(archive.Bytes()), dir, backup.RestoreOptions{Force: true})
	if !errors.Is(err, controllerstore.ErrDataDirInUse) {
		t.Fatalf("restore into a live data dir: %v", err)
	}
	c2 := d2.Credentials()
	if c2.AdminPassword != creds.AdminPassword || c2.ControllerUUID != creds.ControllerUUID || c2.CACert != creds.CACert {
		t.Fatal("restored credentials differ")
	}
	if got := d2.State().Revision(); got < rev {
		t.Fatalf("restored revision %d < %d", got, rev)
	}
	if got, err := d2.State().ModelByName(t.Context(), "k8s"); err != nil || got.UUID != m.UUID || got.Config["workload-storage"] != "fast" {
		t.Fatalf("restored model = %+v, %v", got, err)
	}
	if _, err := d2.State().Machine(t.Context(), creds.DefaultModelUUID, "0"); err != nil {
		t.Fatalf("restored machine: %v", err)
	}
	loginAdmin(t, d2, c2.DefaultModelUUID)
	loginController(t, d2, c2.ControllerModelUUID)
}

func TestBackupNeedsSuperuser(t *testing.T) {
	d := start(t, nil)
	creds := d.Credentials()
	if _, err := d.State().AddUser(t.Context(), "bob", "Bob", "bob-password", state.AccessLogin); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ user, pass, want string }{
		{"admin", "wrong", "401"},
		{"nobody", "x", "401"},
		{"bob", "bob-password", "403"},
	} {
		c := creds
		c.AdminUser, c.AdminPassword = tc.user, tc.pass
		err := backup.Fetch(ctxT(t), &c, &bytes.Buffer{}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("backup as %s: %v; want %s", tc.user, err, tc.want)
		}
	}
}

func TestRestoreRejectsBadArchives(t *testing.T) {
	for name, data := range map[string][]byte{
		"empty":       nil,
		"not a tar":   []byte("hello, this is not a tar archive at all............"),
		"no database": tarOf(t, map[string]string{"credentials.yaml": "x: 1\n"}),
		"stray file":  tarOf(t, map[string]string{"../etc/passwd": "root"}),
		"bad db":      tarOf(t, map[string]string{"provisiond.db": "not a bolt file"}),
	} {
		t.Run(name, func(t *testing.T) {
			// Without a manifest, each is refused as unverified; allowed
			// unverified, each is refused for what it is.
			dir := t.TempDir()
			err := backup.Restore(bytes.NewReader(data), dir, backup.RestoreOptions{})
			if err == nil || (name != "not a tar" && !errors.Is(err, backup.ErrUnverified)) {
				t.Errorf("restore: %v; want refused as unverified", err)
			}
			if err := backup.Restore(bytes.NewReader(data), dir, backup.RestoreOptions{AllowUnverified: true}); err == nil {
				t.Fatal("restore succeeded")
			}
		})
	}
}

func tarOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var entries []tarFile
	for name, body := range files {
		entries = append(entries, tarFile{name, []byte(body)})
	}
	return retar(t, entries)
}
