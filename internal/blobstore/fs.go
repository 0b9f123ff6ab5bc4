package blobstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// FS is a Store of files in one directory: a blob is the file of its
// name; Put writes a ".put-*" temporary file beside it, syncs it and
// renames it into place, then syncs the directory.
type FS struct {
	dir string
}

// tmpPrefix starts the names of Put's temporary files, which no blob
// name can start with (ValidName refuses a leading '.').
const tmpPrefix = ".put-"

// NewFS returns the store in dir, making the directory (mode 0700) if it
// is missing and removing temporary files a crash left behind.
func NewFS(dir string) (*FS, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	return &FS{dir: dir}, nil
}

func (s *FS) path(name string) (string, error) {
	if !ValidName(name) {
		return "", fmt.Errorf("blob name %q not valid", name)
	}
	return filepath.Join(s.dir, name), nil
}

// Put implements Store.
func (s *FS) Put(ctx context.Context, name string, r io.Reader, size int64, sum string) (err error) {
	path, err := s.path(name)
	if err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("%w: size %d", ErrMismatch, size)
	}
	f, err := os.CreateTemp(s.dir, tmpPrefix+"*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	h := sha256.New()
	// One byte more than expected shows a stream that is too long.
	n, err := io.Copy(io.MultiWriter(f, h), ctxReader{ctx, io.LimitReader(r, size+1)})
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("%w: %d bytes, want %d", ErrMismatch, min(n, size+1), size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != strings.ToLower(sum) {
		return fmt.Errorf("%w: sha256 %s, want %s", ErrMismatch, got, sum)
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	return syncDir(s.dir)
}

// Open implements Store.
func (s *FS) Open(_ context.Context, name string) (io.ReadCloser, int64, error) {
	path, err := s.path(name)
	if err != nil {
		return nil, 0, err
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, ErrNotFound
	}
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

// Remove implements Store.
func (s *FS) Remove(_ context.Context, name string) error {
	path, err := s.path(name)
	if err != nil {
		return err
	}
	if err := os.Remove(path); errors.Is(err, fs.ErrNotExist) {
		return ErrNotFound
	} else if err != nil {
		return err
	}
	return syncDir(s.dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ctxReader stops a copy once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// List returns the names of the blobs held (not Put's temporary files).
func (s *FS) List(context.Context) ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && ValidName(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}
