package boltstore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/provisiond/provisiond/state/store"
)

func TestOpenReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "test.db")
	if _, err := OpenReadOnly(path, Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenReadOnly of a missing file: %v; want not exist", err)
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if _, err := s.Update(bg, put(k, "v")); err != nil {
			t.Fatal(err)
		}
	}
	// The read-write Open holds the lock: no shared lock for a reader.
	if _, err := OpenReadOnly(path, Options{LockTimeout: 50 * time.Millisecond}); !errors.Is(err, ErrLocked) {
		t.Fatalf("OpenReadOnly while open: %v; want ErrLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	ro, err := OpenReadOnly(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ro.Revision() != 3 {
		t.Errorf("Revision = %d; want 3", ro.Revision())
	}
	st, err := ro.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.SchemaVersion != SchemaVersion || st.Revision != 3 || st.Keys[testKind] != 3 || len(st.Keys) != 1 || st.ChangeSets != 3 || st.Size == 0 {
		t.Errorf("Stats = %+v", st)
	}
	if err := ro.Check(); err != nil {
		t.Error(err)
	}
	if v, ok := get(t, ro, "b"); !ok || v != "v" {
		t.Errorf("read-only Get = %q, %v", v, ok)
	}
	if _, err := ro.Update(bg, put("d", "v")); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Update on a read-only store: %v", err)
	}
	if _, err := ro.Ephemeral(bg, "d/x", nil); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Ephemeral on a read-only store: %v", err)
	}
	if err := ro.Health(bg); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Health of a read-only store: %v", err)
	}
	// Two readers share the lock.
	ro2, err := OpenReadOnly(path, Options{})
	if err != nil {
		t.Fatalf("second reader: %v", err)
	}
	if err := ro2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ro.View(bg, func(store.Reader) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Errorf("View after Close: %v", err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Error("a read-only open changed the file")
	}

	// A bbolt file without our meta bucket is not a data file.
	other := filepath.Join(t.TempDir(), "other.db")
	if err := os.WriteFile(other, before[:0], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenReadOnly(other, Options{}); err == nil {
		t.Error("OpenReadOnly of an empty file succeeded")
	}
}
