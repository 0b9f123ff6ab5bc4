package boltstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/provisiond/provisiond/state/store"
)

// A store whose file is taken from under it fails for good
// (docs/reliability.md, The database file under the daemon). bbolt keeps
// its file open and memory-mapped; it does not notice when the file at its
// path is removed or replaced (it goes on writing the old one, which the
// next start cannot find), and a read of a page past the end of a
// truncated file is a SIGBUS on the memory map, which Go turns into a
// fatal error with a stack dump of every goroutine. So:
//
//   - The store checks that the file at its path is the one it opened
//     (device and inode, as os.SameFile) and is at least as long as bbolt's
//     pages reach: before each commit and after it (a write is answered
//     only if its commit went to the file a restart opens), at every
//     Health, and every fileCheckEvery while idle (the committer's
//     timer). A stat is a few microseconds; a commit with its fsync
//     hundreds or thousands.
//   - Every goroutine that reads the memory map does it with
//     runtime/debug.SetPanicOnFault on (viewBolt: every read view,
//     Snapshot, Dump, Stats; commitBatch: the committer or a lone writer;
//     Open and Load), so a fault is a panic, recovered there into the
//     store's failure.
//   - A failed store refuses everything after (its error wraps
//     store.ErrUnavailable and ErrFailed), says so in Health, and calls
//     Options.Failed once. Writes answered before the failure are in the
//     file; none is answered after it. When the file was removed or
//     replaced, the store first copies what it holds, from the memory map,
//     to RescuePath, so the controller is not lost with the process.

// ErrFailed is wrapped by the errors of a store that failed for good: its
// file was removed, replaced or truncated under it, or reading it
// faulted.
var ErrFailed = errors.New("the database file cannot be used")

// fileCheckEvery is how often an idle store checks its file.
const fileCheckEvery = 5 * time.Second

// RescueSuffix ends the name of the copy a store makes of a file removed
// or replaced under it (RescuePath).
const RescueSuffix = ".rescued"

// RescuePath is where a store at path copies what it holds when its file
// is removed or replaced under it: path + RescueSuffix (the previous copy
// moved aside with the time it was replaced, so none is overwritten).
func RescuePath(path string) string { return path + RescueSuffix }

// failure is why a store failed, and whether what it holds can be copied
// (the memory map is still sound: the file was removed or replaced, not
// truncated).
type failure struct {
	err     error
	rescue  bool
	rescued string // the copy's path, once made
}

// usable returns the store's failure, if it failed.
func (s *Store) usable() error {
	if f := s.failed.Load(); f != nil {
		return f.err
	}
	return nil
}

// fail makes the store fail for good with why (the first failure wins)
// and returns the store's error. When the file was removed or replaced,
// what the store holds is copied to RescuePath first; then
// Options.Failed is called, once.
func (s *Store) fail(why error, rescue bool) error {
	f := &failure{err: fmt.Errorf("boltstore: %w: %w: %w", store.ErrUnavailable, ErrFailed, why), rescue: rescue}
	if !s.failed.CompareAndSwap(nil, f) {
		return s.failed.Load().err
	}
	report := f.err
	if rescue {
		if p, err := s.rescue(); err != nil {
			report = fmt.Errorf("%w (copying what it holds failed: %w)", f.err, err)
		} else {
			f.rescued = p
			report = fmt.Errorf("%w; what it held up to revision %d is copied to %s", f.err, s.rev.Load(), p)
		}
	}
	if s.opts.Failed != nil {
		s.opts.Failed(report)
	}
	return f.err
}

// Rescued returns the path of the copy the store made of its file when the
// file was removed or replaced under it, or "".
func (s *Store) Rescued() string {
	if f := s.failed.Load(); f != nil {
		return f.rescued
	}
	return ""
}

// checkFile reports whether the file at the store's path is still the one
// it opened and at least minSize bytes long.
func (s *Store) checkFile() (err error, rescue bool) {
	fi, err := os.Stat(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("the database file %s was removed while the daemon held it", s.path), true
	case err != nil:
		return fmt.Errorf("the database file cannot be checked: %w", err), true
	case !os.SameFile(fi, s.file):
		return fmt.Errorf("the database file %s was replaced by another file while the daemon held it", s.path), true
	case fi.Size() < s.minSize.Load():
		return fmt.Errorf("the database file %s was truncated while the daemon held it: %d bytes, its pages reach %d",
			s.path, fi.Size(), s.minSize.Load()), false
	}
	return nil, false
}

// verifyFile fails the store if its file is not sound (checkFile), and
// returns the store's error.
func (s *Store) verifyFile() error {
	if err := s.usable(); err != nil {
		return err
	}
	if why, rescue := s.checkFile(); why != nil {
		return s.fail(why, rescue)
	}
	return nil
}

// faultError describes a memory fault recovered from reading the file
// at path ("": not known).
func faultError(path string, addr uintptr) error {
	if path != "" {
		path = " " + path
	}
	return fmt.Errorf("reading the database file%s faulted (address %#x): it was truncated or its disk failed", path, addr)
}

// memoryFault returns the address of a memory fault that r, a recovered
// panic value, reports (runtime/debug.SetPanicOnFault), if it is one.
func memoryFault(r any) (uintptr, bool) {
	f, ok := r.(interface{ Addr() uintptr })
	if !ok {
		return 0, false
	}
	return f.Addr(), true
}

// faultAddr returns the address of the memory fault r reports, or panics
// again with r when it is not one.
func faultAddr(r any) uintptr {
	addr, ok := memoryFault(r)
	if !ok {
		panic(r)
	}
	return addr
}

// faulted fails the store for a memory fault at addr and returns its
// error (s nil: Open, before the store exists, or the rescue copy, while
// it fails already: only the error).
func (s *Store) faulted(addr uintptr) error {
	if s == nil {
		return fmt.Errorf("boltstore: %w: %w", ErrFailed, faultError("", addr))
	}
	return s.fail(faultError(s.path, addr), false)
}

// recoverFault is deferred, as
//
//	defer s.recoverFault(&err, debug.SetPanicOnFault(true))
//
// by a function that reads the memory map on its own goroutine: it puts
// the goroutine's fault mode back and turns a memory fault into the
// store's failure in *err (see faulted). Any other panic goes on.
func (s *Store) recoverFault(err *error, old bool) {
	debug.SetPanicOnFault(old)
	if r := recover(); r != nil {
		*err = s.faulted(faultAddr(r))
	}
}

// rescue copies what the store holds (its last committed revision, read
// from the memory map) into a new file at RescuePath, moving an earlier
// copy there aside.
func (s *Store) rescue() (string, error) {
	path := RescuePath(s.path)
	if _, err := os.Lstat(path); err == nil {
		if err := os.Rename(path, path+"-"+time.Now().UTC().Format("20060102T150405Z")); err != nil {
			return "", err
		}
	}
	tmp := path + ".partial"
	_ = os.Remove(tmp)
	dst, err := bolt.Open(tmp, 0o600, BoltOptions(0, 0))
	if err != nil {
		return "", err
	}
	err = func() (err error) {
		defer (*Store)(nil).recoverFault(&err, debug.SetPanicOnFault(true))
		return bolt.Compact(dst, s.bolt, 64<<20)
	}()
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return "", err
	}
	return path, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// recoverCommitFault is commitBatch's recoverFault: on a fault it fails
// the store and answers every caller of the batch with its error. The
// batch's transaction *tx, if open, is left so (its rollback would walk
// the faulting pages again: bbolt rebuilds its free list so): bbolt's
// writer lock stays taken (txLeaked), which nothing needs any more.
func (s *Store) recoverCommitFault(batch []*request, tx **bolt.Tx, n *int, old bool) {
	debug.SetPanicOnFault(old)
	r := recover()
	if r == nil {
		return
	}
	err := s.faulted(faultAddr(r))
	if *tx != nil {
		s.txLeaked.Store(true)
	}
	s.lastErr.Store(&err)
	for _, req := range batch {
		req.answer(result{err: err})
	}
	*n = 0
}
