package boltstore

import (
	"path/filepath"
	"testing"

	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/storetest"
)

// TestConformance runs the store conformance suite on bbolt files in
// t.TempDir(), reopening a closed store's file for the checks that need
// it (bbolt has one process per file: no peers).
func TestConformance(t *testing.T) {
	storetest.Suite{
		Open: func(t *testing.T, feed store.Feed) store.Store {
			s, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{Feed: feed})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		Reopen: func(t *testing.T, old store.Store, feed store.Feed) store.Store {
			s, err := Open(old.(*Store).Path(), Options{Feed: feed})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	}.Run(t)
}
