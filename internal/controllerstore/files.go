package controllerstore

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFileSynced writes a new file at path (mode 0600; an existing one
// is an error) from r and syncs it: the files a restore or a migration
// puts into a data dir are durable before they are moved into place.
func WriteFileSynced(path string, r io.Reader) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", filepath.Base(path), err)
	}
	return f.Close()
}

// SyncDir makes dir's entries durable (files made in it or renamed into
// it).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
