package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serve refuses a data dir with an earlier controller's files but no
// database with exit status 3 (systemd: RestartPreventExitStatus=3);
// reset-admin-password needs a database and says so.
func TestDataDirVerbs(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "credentials.yaml"), []byte("admin-user: admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runBin(t, nil, "serve", "--data-dir", dir, "--addr", "127.0.0.1:0")
	if r.code != exitDataDir || !strings.Contains(r.stderr, "--reinitialise") {
		t.Fatalf("serve on an earlier controller without a database: exit %d\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "provisiond.db")); err == nil {
		t.Fatal("the refused serve made a database")
	}
	r = runBin(t, nil, "reset-admin-password", "--data-dir", dir)
	if r.code != exitError || !strings.Contains(r.stderr, "provisiond.db") {
		t.Fatalf("reset-admin-password without a database: exit %d\n%s", r.code, r.stderr)
	}
	r = runBin(t, nil, "reset-admin-password", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "credentials.yaml") {
		t.Fatalf("reset-admin-password --help: exit %d\n%s", r.code, r.stdout)
	}
}
