package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
)

// stoppedDataDir makes a data dir with a daemon that has run and stopped:
// its database, credentials and TLS material, and its database's bytes.
func stoppedDataDir(t *testing.T) (string, []byte) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	cfg := daemon.Default(dir)
	cfg.Addr = "127.0.0.1:0"
	d, err := daemon.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(filepath.Join(dir, daemon.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	return dir, db
}

// flipped is db with 8 bytes at page*4096+off inverted.
func flipped(db []byte, page, off int) []byte {
	b := append([]byte(nil), db...)
	for i := range 8 {
		b[page*4096+off+i] ^= 0xff
	}
	return b
}

// damagedCopy copies the data dir's files into a new one whose database
// is db.
func damagedCopy(t *testing.T, dir string, db []byte) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(to, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"credentials.yaml", "ca.crt", "ca.key", "server.crt", "server.key"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(to, daemon.DBFile), db, 0o600); err != nil {
		t.Fatal(err)
	}
	return to
}

// crashed reports a Go crash's traces in a command's output.
func crashed(s string) bool {
	return strings.Contains(s, "goroutine ") || strings.Contains(s, ".go:") || strings.Contains(s, "panic:")
}

// Bytes flipped in any used page of the database make
// check report damage (exit 1, what bbolt found, no crash and no stack),
// never crash; serve refuses such a file before opening it. Before, 9 of
// 32 flips crashed check and serve with a panic or a fault.
func TestDamagedDatabaseIsReportedNotCrashedOn(t *testing.T) {
	buildDaemon(t) // skips with -short
	dir, db := stoppedDataDir(t)
	used := int(binary.LittleEndian.Uint64(db[16+40:])) // meta 0's high water mark
	if used < 4 || used*4096 > len(db) {
		t.Fatalf("high water mark %d pages", used)
	}
	var logged bytes.Buffer // serve's check's log of its refusal: what its child found
	log := slog.New(slog.NewTextHandler(&logged, nil))
	damaged, repairable := 0, 0 // flips found damaged; of them, meta pages
	for page := range used {
		for _, off := range []int{0, 20, 40} {
			to := damagedCopy(t, dir, flipped(db, page, off))
			r := runBin(t, nil, "check", "--data-dir", to, "--format", "json")
			var rep checkReport
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || crashed(r.stdout+r.stderr) || (r.code != 0 && r.code != 1) {
				t.Fatalf("page %d+%d: check exit %d, %v\nstdout %s\nstderr %s", page, off, r.code, err, r.stdout, r.stderr)
			}
			if rep.OK != (r.code == 0) || (!rep.OK && !strings.HasPrefix(r.stderr, "ERROR ")) {
				t.Errorf("page %d+%d: check exit %d, report %+v, stderr %q", page, off, r.code, rep, r.stderr)
			}
			if rep.Damaged {
				damaged++
				if !strings.HasPrefix(rep.Error, "the database is damaged: ") {
					t.Errorf("page %d+%d: error %q", page, off, rep.Error)
				}
			}
			if page < 2 && !rep.OK && (rep.DamagedMetaPage == nil || *rep.DamagedMetaPage != page) {
				t.Errorf("page %d+%d: a damaged meta page not named: %+v", page, off, rep)
			}
			// serve's check before it opens the database refuses what
			// check calls damaged, unless bbolt can open it safely (one
			// meta copy damaged, every other page checked).
			logged.Reset()
			err := checkBeforeOpen(daemon.Config{DataDir: to}, log)
			wantRefused := rep.Damaged && !(rep.DamagedMetaPage != nil && rep.PagesChecked)
			if (err != nil) != wantRefused {
				t.Errorf("page %d+%d: serve's check: %v (its log: %s); check said %+v", page, off, err, logged.String(), rep)
			}
			if rep.DamagedMetaPage != nil {
				repairable++
			}
		}
	}
	t.Logf("%d pages x 3 flips: %d damaged, %d of them a meta page", used, damaged, repairable)
	if repairable != 6 || damaged == repairable {
		t.Errorf("%d flips found damage, %d of them a meta page: want all 6 meta flips and some of the others", damaged, repairable)
	}
}

// serve refuses a damaged database with a clear message and exit 3, and
// starts on one whose only damage is a meta page copy (rewriting it).
func TestServeRefusesADamagedDatabase(t *testing.T) {
	bin := buildDaemon(t)
	dir, db := stoppedDataDir(t)
	bad := -1
	for page := 2; page*4096 < len(db) && bad < 0; page++ {
		to := damagedCopy(t, dir, flipped(db, page, 0))
		if r := runBin(t, nil, "check", "--data-dir", to); r.code == 1 && strings.Contains(r.stderr, "bbolt crashed") {
			bad = page
		}
	}
	if bad < 0 {
		t.Fatal("no page whose damage crashes bbolt")
	}
	to := damagedCopy(t, dir, flipped(db, bad, 0))
	r := runBin(t, nil, "serve", "--data-dir", to, "--addr", "127.0.0.1:0")
	if r.code != exitDataDir || !strings.Contains(r.stderr, "cannot start: the database is damaged; it was not opened") ||
		!strings.Contains(r.stderr, "provisiond repair --data-dir") || crashed(r.stderr) {
		t.Fatalf("serve of a damaged database: %+v", r)
	}

	// Meta page 0's version flipped: bbolt opens with page 1, and the
	// open's commit writes page 0 again.
	to = damagedCopy(t, dir, flipped(db, 0, 20))
	p := startDaemon(t, bin, to)
	_ = p.cmd.Process.Signal(os.Interrupt)
	if err := <-p.exit; err != nil {
		t.Fatalf("daemon on a damaged meta page: %v", err)
	}
	if r := runBin(t, nil, "check", "--data-dir", to); r.code != 0 {
		t.Errorf("check after serve rewrote the meta page: %+v", r)
	}
}

// repair rewrites a damaged meta page copy and keeps the file as it was;
// other damage it refuses, saying to restore a backup; a sound file it
// leaves alone.
func TestRepair(t *testing.T) {
	dir, db := stoppedDataDir(t)
	if r := runBin(t, nil, "repair", "--data-dir", dir); r.code != 0 || !strings.Contains(r.stdout, "nothing to repair") {
		t.Errorf("repair of a sound database: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(dir, daemon.DBFile+".damaged")); !os.IsNotExist(err) {
		t.Errorf("repair of a sound database kept a copy: %v", err)
	}
	if r := runBin(t, nil, "repair", "--data-dir", t.TempDir()); r.code != 1 || !strings.Contains(r.stderr, "no database at") {
		t.Errorf("repair of an empty dir: %+v", r)
	}

	// Each meta page, its header (bbolt's check asserts it, so the rest
	// is checked after) or its body.
	for _, c := range []struct{ page, off int }{{0, 0}, {1, 0}, {0, 20}, {1, 40}} {
		damagedDB := flipped(db, c.page, c.off)
		to := damagedCopy(t, dir, damagedDB)
		r := runBin(t, nil, "repair", "--data-dir", to)
		if r.code != 0 || !strings.Contains(r.stdout, "rewritten; consistency check: ok") {
			t.Errorf("repair of meta page %d+%d: %+v", c.page, c.off, r)
			continue
		}
		if r := runBin(t, nil, "check", "--data-dir", to); r.code != 0 {
			t.Errorf("check after repairing meta page %d+%d: %+v", c.page, c.off, r)
		}
		kept, err := os.ReadFile(filepath.Join(to, daemon.DBFile+".damaged"))
		if err != nil || string(kept) != string(damagedDB) {
			t.Errorf("the damaged file was not kept as it was: %v", err)
		}
	}

	// Damage in a page bbolt cannot repair: refused, nothing changed.
	for page := 2; page*4096 < len(db); page++ {
		damagedDB := flipped(db, page, 0)
		to := damagedCopy(t, dir, damagedDB)
		if r := runBin(t, nil, "check", "--data-dir", to); r.code == 0 {
			continue // an unused page
		}
		r := runBin(t, nil, "repair", "--data-dir", to)
		if r.code != 1 || !strings.Contains(r.stderr, "bbolt cannot repair this in place: restore the last backup") || crashed(r.stderr) {
			t.Errorf("repair of page %d: %+v", page, r)
		}
		if now, _ := os.ReadFile(filepath.Join(to, daemon.DBFile)); string(now) != string(damagedDB) {
			t.Errorf("a refused repair changed the file")
		}
		return
	}
	t.Fatal("no used page found")
}
