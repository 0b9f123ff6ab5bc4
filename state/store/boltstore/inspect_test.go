package boltstore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestOpenReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "test.db")
	if _, err := OpenReadOnly(path, Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenReadOnly of a missing file: %v; want not exist", err)
	}
	d, err := Open(path, Options{Buckets: []string{testBucket}})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if _, _, err := d.Update(put(k, "v")); err != nil {
			t.Fatal(err)
		}
	}
	// The read-write Open holds the lock: no shared lock for a reader.
	if _, err := OpenReadOnly(path, Options{LockTimeout: 50 * time.Millisecond}); !errors.Is(err, ErrLocked) {
		t.Fatalf("OpenReadOnly while open: %v; want ErrLocked", err)
	}
	if err := d.Close(); err != nil {
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
	s, err := ro.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.SchemaVersion != SchemaVersion || s.Revision != 3 || s.Keys[testBucket] != 3 || len(s.Keys) != 1 || s.Size == 0 {
		t.Errorf("Stats = %+v", s)
	}
	if err := ro.Check(); err != nil {
		t.Error(err)
	}
	if _, _, err := ro.Update(put("d", "v")); err == nil {
		t.Error("Update on a read-only DB succeeded")
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
