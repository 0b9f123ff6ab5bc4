package blobstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/internal/blobstore"
)

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func TestFS(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "blobs")
	// A crash's leftover temporary file is removed at start.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".put-123"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	var s blobstore.Store
	fsStore, err := blobstore.NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	s = fsStore
	if _, err := os.Stat(filepath.Join(dir, ".put-123")); !os.IsNotExist(err) {
		t.Errorf("leftover temporary file kept: %v", err)
	}

	data := bytes.Repeat([]byte("agent binaries "), 10000)
	if err := s.Put(ctx, "3.3.0-ubuntu-amd64", bytes.NewReader(data), int64(len(data)), sum(data)); err != nil {
		t.Fatal(err)
	}
	r, n, err := s.Open(ctx, "3.3.0-ubuntu-amd64")
	if err != nil || n != int64(len(data)) {
		t.Fatalf("Open = %d, %v", n, err)
	}
	got, _ := io.ReadAll(r)
	r.Close()
	if !bytes.Equal(got, data) {
		t.Error("Open reads other bytes than Put wrote")
	}

	for _, c := range []struct {
		name string
		body []byte
		size int64
		sha  string
		want string
	}{
		{"short", data[:10], int64(len(data)), sum(data), "blob does not match: 10 bytes"},
		{"long", data, 10, sum(data[:10]), "blob does not match: 11 bytes, want 10"},
		{"hash", data, int64(len(data)), sum([]byte("x")), "blob does not match: sha256 "},
	} {
		err := s.Put(ctx, "3.3.0-ubuntu-amd64", bytes.NewReader(c.body), c.size, c.sha)
		if !errors.Is(err, blobstore.ErrMismatch) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: Put = %v; want %s...", c.name, err, c.want)
		}
	}
	// A failed Put leaves the blob as it was and no temporary file.
	if r, n, err := s.Open(ctx, "3.3.0-ubuntu-amd64"); err != nil || n != int64(len(data)) {
		t.Errorf("after failed Puts: Open = %d, %v", n, err)
	} else {
		r.Close()
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("dir holds %d entries; want the one blob", len(entries))
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Put(cctx, "x", bytes.NewReader(data), int64(len(data)), sum(data)); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a cancelled context = %v", err)
	}
	for _, bad := range []string{"", "../x", "a/b", ".hidden", strings.Repeat("a", 129)} {
		if err := s.Put(ctx, bad, bytes.NewReader(nil), 0, sum(nil)); err == nil {
			t.Errorf("Put(%q) accepted", bad)
		}
	}

	if err := s.Remove(ctx, "3.3.0-ubuntu-amd64"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Open(ctx, "3.3.0-ubuntu-amd64"); !errors.Is(err, blobstore.ErrNotFound) {
		t.Errorf("Open after Remove = %v", err)
	}
	if err := s.Remove(ctx, "3.3.0-ubuntu-amd64"); !errors.Is(err, blobstore.ErrNotFound) {
		t.Errorf("Remove twice = %v", err)
	}
}
