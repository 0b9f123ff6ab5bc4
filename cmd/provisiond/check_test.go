package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, daemon.DBFile)
	st, err := statetest.OpenBolt(path, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Initialize(t.Context(), state.InitArgs{AdminPassword: "pw", AgentPassword: strings.Repeat("x", 24), AgentNonce: "n"}); err != nil {
		t.Fatal(err)
	}
	rev := st.Revision()

	// While the database is open (a running daemon holds the lock) check
	// refuses it.
	var out, errOut bytesBuffer
	if code := run([]string{"check", "--data-dir", dir}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "in use") {
		t.Fatalf("check of a live data dir: exit %d, stderr %q", code, errOut.String())
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	out, errOut = bytesBuffer{}, bytesBuffer{}
	if code := run([]string{"check", "--data-dir", dir}, &out, &errOut); code != 0 {
		t.Fatalf("check: exit %d, stderr %q", code, errOut.String())
	}
	for _, want := range []string{"schema version 4", "machine 1", "model 2", "user 1", "consistency check: ok"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("check output lacks %q:\n%s", want, out.String())
		}
	}

	out, errOut = bytesBuffer{}, bytesBuffer{}
	if code := run([]string{"check", "--data-dir", dir, "--format", "json"}, &out, &errOut); code != 0 {
		t.Fatalf("check --format json: exit %d, stderr %q", code, errOut.String())
	}
	var rep checkReport
	if err := json.Unmarshal(out.b, &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if !rep.OK || rep.Revision != rev || rep.Records["model"] != 2 {
		t.Fatalf("report = %+v; want ok at revision %d with 2 models", rep, rev)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Error("check changed the database file")
	}

	// A file that is not a bbolt database fails the check with exit 1.
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, daemon.DBFile), []byte(strings.Repeat("garbage", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"check", "--data-dir", bad}, &out, &errOut); code != 1 {
		t.Fatalf("check of garbage: exit %d", code)
	}
	if code := run([]string{"check", "--data-dir", t.TempDir()}, &out, &errOut); code != 1 {
		t.Fatalf("check of an empty dir: exit %d", code)
	}
	if code := run([]string{"check", "--format", "xml"}, &out, &errOut); code != 2 {
		t.Fatalf("check --format xml: exit %d", code)
	}
}
