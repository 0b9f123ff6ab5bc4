package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/provisiond/provisiond/pki"
	"github.com/provisiond/provisiond/state/store/boltstore"
)

// Checks of the data dir at start: an earlier controller's files without
// its database, a full disk, loose permissions.

// ErrEarlierController is returned by Start when the data dir shows an
// earlier controller (its credentials.yaml or its CA key) but its database
// is missing or was never initialised: starting would make a new
// controller over the old one's files and lose its passwords. Restore a
// backup, or start with Config.Reinitialise (--reinitialise) to mean it.
var ErrEarlierController = errors.New("the data dir holds an earlier controller's files but no database")

// secretFiles are the data dir's files that must be readable by the
// daemon's user only.
var secretFiles = []string{DBFile, CredentialsFile, pki.CAKeyFile, pki.ServerKeyFile}

// prepareDataDir makes the data dir (mode 0700) or, when it exists with
// group or other permissions (say 0777), tightens it to 0700 and its
// secret files to 0600, with a warning. Tightening rather than refusing:
// the daemon makes the dir 0700 itself, so a looser mode was set by
// someone else (a loose umask, a package script, a copy), and the fix is
// the daemon's to make; refusing would only stop a controller over it. A
// mode it cannot change (the dir belongs to another user) is an error.
func prepareDataDir(dir string, log *slog.Logger) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create data dir: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("data dir %s is not a directory", dir)
	}
	if mode := fi.Mode().Perm(); mode&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("data dir %s has mode %04o (others may read its secrets) and cannot be tightened to 0700: %w", dir, mode, err)
		}
		log.Warn("data dir had group or other permissions; tightened to 0700 (what others could read before may have leaked)",
			"path", dir, "was", fmt.Sprintf("%04o", mode))
	}
	for _, name := range secretFiles {
		p := filepath.Join(dir, name)
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if mode := fi.Mode().Perm(); mode&0o077 != 0 {
			if err := os.Chmod(p, 0o600); err != nil {
				return fmt.Errorf("%s has mode %04o and cannot be tightened to 0600: %w", p, mode, err)
			}
			log.Warn("secret file had group or other permissions; tightened to 0600", "path", p, "was", fmt.Sprintf("%04o", mode))
		}
	}
	return nil
}

// earlierController reports whether dir holds the files an initialised
// controller leaves: credentials.yaml or the CA's key.
func earlierController(dir string) bool {
	for _, name := range []string{CredentialsFile, pki.CAKeyFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}

// dbMissing reports whether the database file is absent or empty.
func dbMissing(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, DBFile))
	return err != nil || fi.Size() == 0
}

// refuseNewController is the error of a start that would make a new
// controller over an earlier one's files, unless reinitialise is set, in
// which case the earlier credentials.yaml is kept aside and nil returned.
func refuseNewController(dir, why string, reinitialise bool, log *slog.Logger) error {
	if !reinitialise {
		rescued := ""
		if _, err := os.Stat(boltstore.RescuePath(filepath.Join(dir, DBFile))); err == nil {
			rescued = fmt.Sprintf(" %s%s is the copy a daemon made of its database when the file was removed "+
				"or replaced under it: move it to %s to start from it.", DBFile, boltstore.RescueSuffix, DBFile)
		}
		return fmt.Errorf("%w: %s in %s, beside its credentials.yaml or CA; refusing to make a new controller "+
			"over them (its passwords would be lost).%s Restore a backup (provisiond restore), reset the admin "+
			"password of a database that is there (provisiond reset-admin-password), or pass --reinitialise "+
			"to start a new controller", ErrEarlierController, why, dir, rescued)
	}
	old := filepath.Join(dir, CredentialsFile)
	if _, err := os.Stat(old); err == nil {
		aside := fmt.Sprintf("%s.before-reinitialise-%d", old, time.Now().Unix())
		if err := os.Rename(old, aside); err != nil {
			return fmt.Errorf("reinitialise: keep the earlier credentials.yaml aside: %w", err)
		}
		log.Warn("reinitialising: a new controller replaces the earlier one; its credentials.yaml is kept aside",
			"path", aside)
	}
	return nil
}

// credentialsUnchanged reports whether the credentials file at path holds
// exactly c: then it is not rewritten (a start on a full disk must not
// fail for a file it would write unchanged).
func credentialsUnchanged(path string, c *Credentials) bool {
	old, err := ReadCredentials(path)
	return err == nil && reflect.DeepEqual(*old, *c)
}
