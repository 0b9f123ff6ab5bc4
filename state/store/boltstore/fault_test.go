package boltstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/state/store"
)

// failures records what Options.Failed reports.
type failures struct {
	mu   sync.Mutex
	errs []error
	ch   chan struct{} // closed at the first
}

func newFailures() *failures { return &failures{ch: make(chan struct{})} }

func (f *failures) failed(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, err)
	if len(f.errs) == 1 {
		close(f.ch)
	}
}

// wait returns the one failure reported, within 20 s.
func (f *failures) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-f.ch:
	case <-time.After(20 * time.Second):
		t.Fatal("the store did not report a failure")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errs) != 1 {
		t.Errorf("Failed called %d times: %v", len(f.errs), f.errs)
	}
	return f.errs[0]
}

// openFailing opens a store at a new path that reports its failures to f,
// with n keys of about 1 KiB written (so its pages reach past the first
// few).
func openFailing(t *testing.T, f *failures, n int) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path, Options{Failed: f.failed, InitialMmapSize: MmapSize})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	for i := range n {
		if _, err := s.Update(bg, put(fmt.Sprint(i), strings.Repeat("v", 1000))); err != nil {
			t.Fatal(err)
		}
	}
	return s, path
}

// refusesEverything checks that a failed store refuses writes, reads and
// Health with an error that wraps ErrFailed and store.ErrUnavailable and
// says why.
func refusesEverything(t *testing.T, s *Store, why string) {
	t.Helper()
	rev := s.Revision()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrFailed) || !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: %v; want ErrFailed, store.ErrUnavailable, %q", what, err, why)
		}
	}
	_, err := s.Update(bg, put("after", "x"))
	check("Update", err)
	check("View", s.View(bg, func(store.Reader) error { return nil }))
	check("Health", s.Health(bg))
	if got := s.Revision(); got != rev {
		t.Errorf("revision %d -> %d after the failure", rev, got)
	}
}

// A file removed under the store: the next write is refused (its commit
// went to a file a restart would not find), the store refuses everything
// after, reports the failure once, and has copied what it holds (every
// write answered before) to RescuePath, which opens as a store.
func TestFileRemovedFailsTheStore(t *testing.T) {
	f := newFailures()
	s, path := openFailing(t, f, 50)
	rev := s.Revision()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(bg, put("lost", "x")); !errors.Is(err, ErrFailed) {
		t.Fatalf("write after the file was removed: %v; want refused", err)
	}
	why := f.wait(t)
	if !strings.Contains(why.Error(), "was removed while the daemon held it") || !strings.Contains(why.Error(), RescuePath(path)) {
		t.Errorf("Failed: %v", why)
	}
	refusesEverything(t, s, "was removed")
	if s.Rescued() != RescuePath(path) {
		t.Errorf("Rescued() = %q", s.Rescued())
	}
	r, err := OpenReadOnly(RescuePath(path), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Revision() < rev {
		t.Errorf("the copy is at revision %d; %d was answered", r.Revision(), rev)
	}
	if v, ok := get(t, r, "49"); !ok || len(v) != 1000 {
		t.Errorf("the copy lacks the last answered write")
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// A file replaced under the store (another file renamed onto its path):
// the same, and the new file is left as it is.
func TestFileReplacedFailsTheStore(t *testing.T) {
	f := newFailures()
	s, path := openFailing(t, f, 3)
	other := filepath.Join(filepath.Dir(path), "other")
	if err := os.WriteFile(other, []byte("another file"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	// Health notices it without a write.
	if err := s.Health(bg); !errors.Is(err, ErrFailed) {
		t.Fatalf("Health: %v", err)
	}
	if why := f.wait(t); !strings.Contains(why.Error(), "was replaced by another file") {
		t.Errorf("Failed: %v", why)
	}
	refusesEverything(t, s, "was replaced")
	if b, _ := os.ReadFile(path); string(b) != "another file" {
		t.Errorf("the new file was changed: %q", b)
	}
	if _, err := os.Stat(RescuePath(path)); err != nil {
		t.Errorf("no copy: %v", err)
	}
}

// An idle store notices on its own, within fileCheckEvery.
func TestIdleStoreNoticesItsFileGone(t *testing.T) {
	f := newFailures()
	_, path := openFailing(t, f, 1)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if why := f.wait(t); !strings.Contains(why.Error(), "was removed") {
		t.Errorf("Failed: %v", why)
	}
}

// A file truncated under the store: reading a page past its end is a
// memory fault, which fails the store instead of crashing the process;
// so is a write, and the size check catches a truncation before a
// commit reads past the end. No copy is made (the pages are gone).
func TestFileTruncatedFailsTheStore(t *testing.T) {
	for _, tt := range []struct {
		name  string
		first func(s *Store) error // the first call after the truncation
	}{
		{"read", func(s *Store) error {
			return s.View(bg, func(r store.Reader) error {
				_, _, err := r.Scan(testKind+"/", "", 0, func(string, []byte) error { return nil })
				return err
			})
		}},
		{"write that reads", func(s *Store) error {
			_, err := s.Update(bg, func(tx store.Txn) error {
				if _, _, err := tx.Get(key("150")); err != nil {
					return err
				}
				return put("x", "y")(tx)
			})
			return err
		}},
		{"blind write", func(s *Store) error {
			_, err := s.Update(bg, put("x", "y"))
			return err
		}},
		{"snapshot", func(s *Store) error {
			_, err := s.Snapshot(discard{}, nil)
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFailures()
			s, path := openFailing(t, f, 300)
			if err := os.Truncate(path, 16<<10); err != nil {
				t.Fatal(err)
			}
			if err := tt.first(s); !errors.Is(err, ErrFailed) {
				t.Fatalf("after the truncation: %v; want ErrFailed", err)
			}
			why := f.wait(t)
			t.Log(why)
			if !strings.Contains(why.Error(), "truncated") {
				t.Errorf("Failed: %v", why)
			}
			refusesEverything(t, s, "truncated")
			if _, err := os.Stat(RescuePath(path)); err == nil {
				t.Error("a copy was made of a truncated file")
			}
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
