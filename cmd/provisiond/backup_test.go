package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
)

// startInProcess starts a daemon in this process on a fresh data dir.
func startInProcess(t *testing.T) (*daemon.Daemon, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	cfg := daemon.Default(dir)
	cfg.Addr = "127.0.0.1:0"
	d, err := daemon.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = d.Shutdown(ctx)
	})
	return d, dir
}

// backup --output - writes the archive to stdout, and finds the daemon
// through $PROVISIOND_DATA_DIR; check honours it too; the archive
// restores.
func TestBackupToStdoutAndDataDirEnv(t *testing.T) {
	bin := buildDaemon(t)
	d, dir := startInProcess(t)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "backup", "--output", "-")
	cmd.Env = []string{"HOME=" + t.TempDir(), "PROVISIOND_DATA_DIR=" + dir}
	work := t.TempDir()
	cmd.Dir = work
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("backup --output -: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "backup written to stdout") {
		t.Errorf("stderr = %q", stderr.String())
	}
	// A tar archive: "ustar" at offset 257 of the first header.
	if b := stdout.Bytes(); len(b) < 512 || string(b[257:262]) != "ustar" {
		t.Fatalf("stdout is not a tar archive (%d bytes)", len(b))
	}
	if entries, _ := os.ReadDir(work); len(entries) > 0 {
		t.Errorf("backup to stdout wrote files: %v", entries)
	}

	// check with $PROVISIOND_DATA_DIR looks at the daemon's data dir (and
	// refuses it: the daemon holds it).
	r := runBin(t, []string{"PROVISIOND_DATA_DIR=" + dir}, "check")
	if r.code != 1 || !strings.Contains(r.stderr, "in use") {
		t.Fatalf("check of the live data dir via $PROVISIOND_DATA_DIR: %+v", r)
	}

	archive := filepath.Join(t.TempDir(), "backup.tar")
	if err := os.WriteFile(archive, stdout.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	restored := filepath.Join(t.TempDir(), "restored")
	if r := runBin(t, nil, "restore", archive, "--data-dir", restored); r.code != 0 {
		t.Fatalf("restore: %+v", r)
	}
	r = runBin(t, []string{"PROVISIOND_DATA_DIR=" + restored}, "check")
	if r.code != 0 || !strings.Contains(r.stdout, "consistency check: ok") {
		t.Fatalf("check of the restored dir via $PROVISIOND_DATA_DIR: %+v", r)
	}
	creds, err := daemon.ReadCredentials(filepath.Join(restored, daemon.CredentialsFile))
	if err != nil {
		t.Fatal(err)
	}
	if creds.ControllerUUID != d.Credentials().ControllerUUID {
		t.Errorf("restored controller %s, want %s", creds.ControllerUUID, d.Credentials().ControllerUUID)
	}

	// --data-dir wins over $PROVISIOND_DATA_DIR.
	r = runBin(t, []string{"PROVISIOND_DATA_DIR=" + dir}, "check", "--data-dir", restored)
	if r.code != 0 {
		t.Fatalf("check --data-dir over the environment: %+v", r)
	}
	// A data dir without a database says so.
	r = runBin(t, nil, "check", "--data-dir", t.TempDir())
	if r.code != 1 || !strings.Contains(r.stderr, "no database at") {
		t.Fatalf("check of an empty dir: %+v", r)
	}
}

// A restore that fails leaves no data dir behind it did not find.
func TestFailedRestoreLeavesNoDataDir(t *testing.T) {
	garbage := filepath.Join(t.TempDir(), "garbage.tar")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a tar archive ", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	target := filepath.Join(parent, "new", "data")
	r := runBin(t, nil, "restore", garbage, "--data-dir", target)
	if r.code != 1 || !strings.Contains(r.stderr, "restore") {
		t.Fatalf("restore of garbage: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(parent, "new")); !os.IsNotExist(err) {
		t.Errorf("failed restore left %s behind (stat: %v)", filepath.Join(parent, "new"), err)
	}

	// A data dir that existed stays, as it was.
	existing := t.TempDir()
	if err := os.WriteFile(filepath.Join(existing, "keep"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runBin(t, nil, "restore", garbage, "--data-dir", existing); r.code != 1 {
		t.Fatalf("restore of garbage into an existing dir: %+v", r)
	}
	entries, err := os.ReadDir(existing)
	if err != nil || len(entries) != 1 || entries[0].Name() != "keep" {
		t.Errorf("existing data dir after a failed restore: %v %v", entries, err)
	}
}
