package daemon_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/daemonproc"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/store/boltstore"
)

// A full disk: writes fail with a clear error, acknowledged data stays,
// the daemon keeps serving, and once there is room again writes succeed and
// the database passes its consistency check after a restart.
func TestDiskFull(t *testing.T) {
	dir := filepath.Join(daemonproc.MountTmpfs(t, "48m"), "data")
	cfg := daemon.Default(dir)
	cfg.Addr = "127.0.0.1:0"
	d, err := daemon.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			d.Shutdown(context.Background())
		}
	}()
	creds := d.Credentials()
	admin := loginAdmin(t, d, creds.DefaultModelUUID)
	set := func(key string, size int) error {
		return admin.Call(ctxT(t), "ModelAdmin", 1, "", "SetModelConfig",
			params.SetModelConfigArgs{Config: map[string]any{key: strings.Repeat("x", size)}}, nil)
	}
	if err := set("before", 1000); err != nil {
		t.Fatal(err)
	}
	filler := daemonproc.FillDisk(t, filepath.Dir(dir))

	// Keep adding models with 200 KiB of config (a config holds at most
	// 1 MiB) until the database needs space it cannot get.
	var werr error
	for i := 0; i < 300 && werr == nil; i++ {
		werr = admin.Call(ctxT(t), "ModelAdmin", 1, "", "AddModel",
			params.AddModelArgs{Name: fmt.Sprintf("fill-%d", i), Config: map[string]any{"big": strings.Repeat("x", 200<<10)}}, nil)
	}
	if werr == nil {
		t.Fatal("300 writes of 200 KiB on a full disk all succeeded")
	}
	if !strings.Contains(werr.Error(), "no space left on device") {
		t.Fatalf("write on a full disk: %v; want an error saying no space is left", werr)
	}
	t.Logf("write on a full disk: %v", werr)
	// The daemon still serves reads, and the acknowledged value is there.
	var cfgInfo params.ModelConfigInfo
	if err := admin.Call(ctxT(t), "ModelAdmin", 1, "", "ModelConfig", params.ModelArgs{}, &cfgInfo); err != nil {
		t.Fatalf("read after a failed write: %v", err)
	}
	if v, _ := cfgInfo.Config["before"].(string); len(v) != 1000 {
		t.Fatal("an acknowledged value is gone after a failed write")
	}
	// Room again: writes succeed.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := set("after", 10); err != nil {
		t.Fatalf("write after freeing space: %v", err)
	}
	if err := d.Shutdown(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	stopped = true
	rev := d.State().Revision() // after Shutdown: closing removes the daemon's API server record

	db, err := boltstore.Open(filepath.Join(dir, daemon.DBFile), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Open(db, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := db.Check(); err != nil {
		t.Fatalf("consistency check after a full disk: %v", err)
	}
	if st.Revision() != rev {
		t.Fatalf("revision after reopen = %d; want %d", st.Revision(), rev)
	}
	m, err := st.Model(t.Context(), creds.DefaultModelUUID)
	if err != nil {
		t.Fatal(err)
	}
	if m.Config["after"] != strings.Repeat("x", 10) || len(m.Config["before"].(string)) != 1000 {
		t.Fatal("acknowledged values missing after reopen")
	}
}

// A read-only data dir: the daemon refuses to start with a clear error and
// changes nothing; made writable again, it starts with everything intact.
func TestReadOnlyDataDir(t *testing.T) {
	mnt := daemonproc.MountTmpfs(t, "64m")
	dir := filepath.Join(mnt, "data")
	cfg := daemon.Default(dir)
	cfg.Addr = "127.0.0.1:0"
	d, err := daemon.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	creds := d.Credentials()
	if err := d.Shutdown(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(dir, daemon.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	remount := func(mode string) {
		t.Helper()
		if out, err := exec.Command("mount", "-o", "remount,"+mode, mnt).CombinedOutput(); err != nil {
			t.Fatalf("remount %s: %v: %s", mode, err, out)
		}
	}
	remount("ro")
	_, err = daemon.Start(cfg)
	if err == nil {
		t.Fatal("the daemon started on a read-only data dir")
	}
	if !strings.Contains(err.Error(), "read-only file system") {
		t.Fatalf("start on a read-only data dir: %v; want it to say the file system is read-only", err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, daemon.DBFile))
	if string(before) != string(after) {
		t.Fatal("a refused start changed the database")
	}
	remount("rw")
	d, err = daemon.Start(cfg)
	if err != nil {
		t.Fatalf("start after the data dir is writable again: %v", err)
	}
	defer d.Shutdown(context.Background())
	if d.Credentials().AdminPassword != creds.AdminPassword {
		t.Fatal("credentials changed")
	}
	loginAdmin(t, d, creds.DefaultModelUUID)
}
