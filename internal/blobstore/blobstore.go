// Package blobstore keeps large named blobs (the agent binaries the
// controller serves) outside the database: Store is the narrow seam, FS
// its filesystem implementation under the daemon's data dir. A
// multi-daemon controller puts another Store behind the same seam.
//
// A blob is written whole or not at all: Put streams it, checks its size
// and SHA-256 against what the caller expects, and only then makes it
// visible under its name (replacing any blob of that name). Nothing is
// held in memory beyond a copy buffer.
//
// Concurrency: every method may be called from any goroutine. Concurrent
// Puts of one name each write their own temporary file; the last rename
// wins, and every blob visible under a name passed its check.
package blobstore

import (
	"context"
	"errors"
	"io"
)

// ErrNotFound is the error of Open and Remove for a name without a blob.
var ErrNotFound = errors.New("blob not found")

// ErrMismatch is the error of Put when the stream's size or SHA-256 is
// not the one expected (the error's text says which).
var ErrMismatch = errors.New("blob does not match")

// Store keeps blobs by name. Names are what ValidName accepts.
type Store interface {
	// Put reads exactly size bytes from r and stores them as name when
	// their SHA-256 is sha256 (lowercase hex); a longer or shorter stream
	// or another hash stores nothing and fails with ErrMismatch. It
	// returns once the blob is durable.
	Put(ctx context.Context, name string, r io.Reader, size int64, sha256 string) error
	// Open returns the blob and its size.
	Open(ctx context.Context, name string) (io.ReadCloser, int64, error)
	// Remove deletes the blob.
	Remove(ctx context.Context, name string) error
	// List returns the names of the blobs held.
	List(ctx context.Context) ([]string, error)
}

// ValidName reports whether name can name a blob: 1 to 128 characters of
// letters, digits, '.', '-', '_' and '+', not starting with '.'.
func ValidName(name string) bool {
	if name == "" || len(name) > 128 || name[0] == '.' {
		return false
	}
	for _, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-', c == '_', c == '+':
		default:
			return false
		}
	}
	return true
}
