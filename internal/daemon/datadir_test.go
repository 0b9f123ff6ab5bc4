package daemon_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/internal/controllerstore"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/daemonproc"
	"github.com/provisiond/provisiond/pki"
)

// startIn starts a daemon on dir and returns it and its log.
func startIn(t *testing.T, dir string, mod func(*daemon.Config)) (*daemon.Daemon, *syncBuffer, error) {
	t.Helper()
	logs := &syncBuffer{}
	cfg := daemon.Default(dir)
	cfg.Addr = "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if mod != nil {
		mod(&cfg)
	}
	d, err := daemon.Start(cfg)
	return d, logs, err
}

func stop(t *testing.T, d *daemon.Daemon) {
	t.Helper()
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A data dir whose database is missing or empty beside an earlier
// controller's credentials.yaml and CA is refused with
// ErrEarlierController, and nothing in it changes: no new database, the
// old credentials.yaml as it was. --reinitialise makes a new controller and
// keeps the old credentials.yaml aside.
func TestRefusesEarlierControllerWithoutDatabase(t *testing.T) {
	dir := t.TempDir()
	d, _, err := startIn(t, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	old := d.Credentials()
	stop(t, d)
	credsPath := filepath.Join(dir, daemon.CredentialsFile)
	dbPath := filepath.Join(dir, daemon.DBFile)
	before, _ := os.ReadFile(credsPath)

	for _, loss := range []string{"missing", "empty"} {
		if loss == "missing" {
			os.Remove(dbPath)
		} else if err := os.WriteFile(dbPath, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		d, _, err := startIn(t, dir, nil)
		if err == nil {
			stop(t, d)
			t.Fatalf("database %s: the daemon started a new controller", loss)
		}
		if !errors.Is(err, daemon.ErrEarlierController) || !strings.Contains(err.Error(), "--reinitialise") {
			t.Fatalf("database %s: %v", loss, err)
		}
		after, _ := os.ReadFile(credsPath)
		if !bytes.Equal(before, after) {
			t.Fatalf("database %s: credentials.yaml changed", loss)
		}
		if _, err := os.Stat(dbPath); loss == "missing" && err == nil {
			t.Fatal("a refused start made a database")
		}
	}
	d, logs, err := startIn(t, dir, func(c *daemon.Config) { c.Reinitialise = true })
	if err != nil {
		t.Fatalf("--reinitialise: %v", err)
	}
	defer stop(t, d)
	if d.Credentials().ControllerUUID == old.ControllerUUID || d.Credentials().AdminPassword == old.AdminPassword {
		t.Fatal("--reinitialise did not make a new controller")
	}
	aside, _ := filepath.Glob(credsPath + ".before-reinitialise-*")
	if len(aside) != 1 || !strings.Contains(logs.String(), "reinitialising") {
		t.Fatalf("the earlier credentials.yaml was not kept aside: %v", aside)
	}
	if kept, _ := os.ReadFile(aside[0]); !bytes.Equal(kept, before) {
		t.Fatal("the kept credentials.yaml is not the earlier one")
	}
}

// A data dir that exists with group or other permissions is tightened to
// 0700, its secret files to 0600, with a warning.
func TestDataDirModeTightened(t *testing.T) {
	dir := t.TempDir()
	d, _, err := startIn(t, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop(t, d)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{daemon.CredentialsFile, pki.CAKeyFile} {
		if err := os.Chmod(filepath.Join(dir, f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, logs, err := startIn(t, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, d)
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("data dir mode %04o; want 0700", fi.Mode().Perm())
	}
	for _, f := range []string{daemon.CredentialsFile, pki.CAKeyFile} {
		if fi, _ := os.Stat(filepath.Join(dir, f)); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %04o; want 0600", f, fi.Mode().Perm())
		}
	}
	if !strings.Contains(logs.String(), "tightened to 0700") || !strings.Contains(logs.String(), "was=0777") {
		t.Errorf("no warning about the data dir's mode:\n%s", grepLines(logs.String(), "tightened"))
	}
}

// A full disk at start: a data dir whose files need no
// change starts and serves; credentials.yaml is not rewritten when it is
// unchanged, and a refresh of its api-addresses (a new port) that cannot be
// written is a warning, not a failure, as is the daemon's registration
// among the live API servers, made once space is freed.
func TestStartOnAFullDisk(t *testing.T) {
	dir := filepath.Join(daemonproc.MountTmpfs(t, "16m"), "data")
	d, _, err := startIn(t, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := d.Addr()
	stop(t, d)
	credsPath := filepath.Join(dir, daemon.CredentialsFile)
	fi0, _ := os.Stat(credsPath)
	filler := daemonproc.FillDisk(t, filepath.Dir(dir))
	defer os.Remove(filler)

	// The same address: nothing to rewrite.
	d, logs, err := startIn(t, dir, func(c *daemon.Config) { c.Addr = addr })
	if err != nil {
		t.Fatalf("start on a full disk, same address: %v", err)
	}
	loginAdmin(t, d, d.Credentials().DefaultModelUUID)
	stop(t, d)
	if fi, _ := os.Stat(credsPath); !fi.ModTime().Equal(fi0.ModTime()) {
		t.Error("credentials.yaml was rewritten although nothing in it changed")
	}
	if strings.Contains(logs.String(), "cannot refresh") {
		t.Errorf("a warning about an unchanged file:\n%s", grepLines(logs.String(), "cannot"))
	}
	// A new port: the refresh fails, with a warning, and the daemon serves.
	d, logs, err = startIn(t, dir, nil)
	if err != nil {
		t.Fatalf("start on a full disk, new port: %v", err)
	}
	defer stop(t, d)
	loginAdmin(t, d, d.Credentials().DefaultModelUUID)
	if !strings.Contains(logs.String(), "cannot refresh the api-addresses of credentials.yaml") {
		t.Errorf("no warning about the failed refresh:\n%s", grepLines(logs.String(), "level=WARN"))
	}
	// Its registration among the live API servers (a commit, with its
	// history record) could not be written either: a warning, and it
	// registers once space is freed.
	if !strings.Contains(logs.String(), "cannot register this API server: the store is out of space") {
		t.Errorf("no warning about the registration:\n%s", grepLines(logs.String(), "level=WARN"))
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	waitFor(t, "the daemon to register once space is freed", func() bool {
		servers, err := d.State().APIServers(ctx)
		return err == nil && len(servers) == 1 && servers[0].ID == d.ServerID()
	})
}

// credentials.yaml deleted: the daemon rewrites it
// without passwords, and provisiond reset-admin-password (this function)
// puts a new admin password in the database and the file, and a new
// controller agent password since the file had none; both log in. A data
// dir a daemon runs on is refused.
func TestResetAdminPassword(t *testing.T) {
	dir := t.TempDir()
	d, _, err := startIn(t, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	old := d.Credentials()
	if _, err := daemon.ResetAdminPassword(dir); !errors.Is(err, controllerstore.ErrDataDirInUse) {
		t.Fatalf("on a running daemon: %v; want ErrDataDirInUse", err)
	}
	stop(t, d)
	credsPath := filepath.Join(dir, daemon.CredentialsFile)
	if err := os.Remove(credsPath); err != nil {
		t.Fatal(err)
	}
	d, _, err = startIn(t, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Credentials().AdminPassword != "" {
		t.Fatal("the rewritten credentials.yaml has a password")
	}
	stop(t, d)

	path, err := daemon.ResetAdminPassword(dir)
	if err != nil || path != credsPath {
		t.Fatalf("ResetAdminPassword = %q, %v", path, err)
	}
	creds, err := daemon.ReadCredentials(credsPath)
	if err != nil {
		t.Fatal(err)
	}
	if creds.AdminPassword == "" || creds.AdminPassword == old.AdminPassword || creds.ControllerAgent.Password == "" ||
		creds.ControllerUUID != old.ControllerUUID || creds.CACert != old.CACert {
		t.Fatalf("credentials after the reset: %+v", creds)
	}
	if fi, _ := os.Stat(credsPath); fi.Mode().Perm() != 0o600 {
		t.Errorf("credentials.yaml mode %04o", fi.Mode().Perm())
	}
	d, _, err = startIn(t, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, d)
	c := dial(t, d, creds.DefaultModelUUID)
	if _, err := c.LoginUser(ctxT(t), "admin", creds.AdminPassword); err != nil {
		t.Fatalf("admin with the new password: %v", err)
	}
	if _, err := dial(t, d, creds.DefaultModelUUID).LoginUser(ctxT(t), "admin", old.AdminPassword); err == nil {
		t.Fatal("admin with the old password logged in")
	}
	loginController(t, d, creds.DefaultModelUUID)
}
