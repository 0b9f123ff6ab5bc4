package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/etcdtest"
)

// The built binary migrates a stopped bbolt controller into etcd (refused
// while the daemon runs), serves it from there with the old logins, and
// migrates it back into a new data dir, served on bbolt again; stderr,
// not a terminal, gets plain progress lines.
func TestMigrateBinary(t *testing.T) {
	bin := buildDaemon(t)
	etcd := etcdtest.New(t)
	endpoints := strings.Join(etcd.Endpoints(), ",")
	dataDir := filepath.Join(t.TempDir(), "data")
	p := startDaemon(t, bin, dataDir)
	creds, err := daemon.ReadCredentials(filepath.Join(dataDir, daemon.CredentialsFile))
	if err != nil {
		t.Fatal(err)
	}
	toEtcd := []string{"migrate", "--from-data-dir", dataDir, "--to", "etcd", "--etcd-endpoints", endpoints, "--etcd-prefix", "/moved/"}
	r := runBin(t, nil, toEtcd...)
	if r.code != 1 || !strings.Contains(r.stderr, "a running provisiond holds its database's lock") {
		t.Fatalf("migrate of a live data dir: %+v", r)
	}
	p.stop(t)

	etcdDir := filepath.Join(t.TempDir(), "etcd-daemon")
	r = runBin(t, nil, append(toEtcd, "--to-data-dir", etcdDir)...)
	if r.code != 0 {
		t.Fatalf("migrate to etcd: %+v", r)
	}
	for _, want := range []string{"counting the source's records", "carrying the history of commits", "copied", "(100%)", "verifying", "migrated controller " + creds.ControllerUUID,
		"note: the history of commits (provisionctl history) is carried: ",
		"start it with: provisiond serve --store etcd --etcd-endpoints " + endpoints + " --etcd-prefix /moved/ --data-dir " + etcdDir} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("migrate's stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if r = runBin(t, nil, append(toEtcd, "--to-data-dir", etcdDir)...); r.code != 1 || !strings.Contains(r.stderr, "already holds controller") {
		t.Fatalf("second migrate into the prefix: %+v", r)
	}

	p = startDaemon(t, bin, etcdDir, "--store", "etcd", "--etcd-endpoints", endpoints, "--etcd-prefix", "/moved/")
	loginBoth(t, creds, p.addr)
	onEtcd, err := daemon.ReadCredentials(filepath.Join(etcdDir, daemon.CredentialsFile))
	if err != nil {
		t.Fatal(err)
	}
	if onEtcd.ControllerUUID != creds.ControllerUUID || onEtcd.CACert != creds.CACert || onEtcd.AdminPassword != creds.AdminPassword {
		t.Fatal("the daemon on etcd has other credentials")
	}
	// backup of the daemon on etcd, restored into another prefix.
	archive := filepath.Join(t.TempDir(), "etcd-backup.tar")
	if r := runBin(t, nil, "backup", "--data-dir", etcdDir, "--output", archive); r.code != 0 {
		t.Fatalf("backup on etcd: %+v", r)
	}
	r = runBin(t, []string{"TMPDIR=" + t.TempDir()}, "restore", archive, "--to", "etcd", "--etcd-endpoints", endpoints, "--etcd-prefix", "/restored/")
	if r.code != 0 || !strings.Contains(r.stderr, "restored "+archive+" (controller "+creds.ControllerUUID) {
		t.Fatalf("restore --to etcd: %+v", r)
	}
	if r := runBin(t, nil, "restore", archive, "--to", "etcd", "--etcd-endpoints", endpoints, "--etcd-prefix", "/restored/"); r.code != 1 || !strings.Contains(r.stderr, "not empty") {
		t.Fatalf("restore --to etcd into a full prefix: %+v", r)
	}
	p.stop(t)
	p = startDaemon(t, bin, filepath.Join(t.TempDir(), "restored"), "--store", "etcd", "--etcd-endpoints", endpoints, "--etcd-prefix", "/restored/")
	loginBoth(t, creds, p.addr)
	p.stop(t)

	back := filepath.Join(t.TempDir(), "back")
	r = runBin(t, nil, "migrate", "--from", "etcd", "--etcd-endpoints", endpoints, "--etcd-prefix", "/moved/", "--from-data-dir", etcdDir, "--to-data-dir", back)
	if r.code != 0 || !strings.Contains(r.stderr, "start it with: provisiond serve --data-dir "+back) {
		t.Fatalf("migrate back: %+v", r)
	}
	p = startDaemon(t, bin, back)
	loginBoth(t, creds, p.addr)
	p.stop(t)
	if _, err := os.Stat(filepath.Join(back, daemon.DBFile)); err != nil {
		t.Fatal(err)
	}

	// Usage errors: exit 2, nothing done.
	for _, args := range [][]string{
		{"migrate"},
		{"migrate", "--from-data-dir", dataDir, "--to-data-dir", back},
		{"migrate", "--from-data-dir", dataDir, "--to", "etcd"},
		{"migrate", "--from-data-dir", dataDir, "--to", "etcd", "--etcd-endpoints", endpoints, "--etcd-max-txn-ops", "2"},
		{"migrate", "--from-data-dir", dataDir, "--to-data-dir", back, "--etcd-endpoints", endpoints},
		{"restore", archive, "--to", "etcd"},
		{"restore", archive, "--to", "etcd", "--etcd-endpoints", endpoints, "--data-dir", back},
		{"restore", archive, "--to", "mongo"},
	} {
		if r := runBin(t, nil, args...); r.code != 2 {
			t.Errorf("%q: %+v, want exit 2", args, r)
		}
	}
}
