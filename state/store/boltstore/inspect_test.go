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
	in, err := s.Inspect(bg)
	if err != nil {
		t.Fatal(err)
	}
	if in.Revision != 3 || in.SizeBytes <= 0 || in.InUseBytes <= 0 || in.InUseBytes > in.SizeBytes {
		t.Errorf("Inspect of the open store = %+v", in)
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
	in, err = ro.Inspect(bg)
	if err != nil {
		t.Fatal(err)
	}
	// Read-only, bbolt loads no free list: the part in use is unknown.
	if in.Engine != "bbolt" || in.Location != path || in.SchemaVersion != SchemaVersion || in.Revision != 3 ||
		in.CompactRevision != 0 || in.SizeBytes <= 0 || in.InUseBytes != 0 || in.QuotaBytes != 0 || in.Members != nil {
		t.Errorf("Inspect = %+v", in)
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
