package daemon

import (
	"sync"
)

// A bbolt store fails for good when its file is removed, replaced or
// truncated under the daemon, or reading it faults
// (state/store/boltstore/fault.go; docs/reliability.md, The database file
// under the daemon). From then on every write and read is refused (code
// `try again`) and /health fails with the reason; the store calls
// storeFailed, which logs the reason at error level and closes Failed, on
// which provisiond serve stops the daemon and exits with a message and
// status 3 (restarting will not help until the operator acts).

// storeFailure is the store's failure, once it has failed.
type storeFailure struct {
	once sync.Once
	ch   chan struct{} // closed at the failure
	err  error         // set before ch closes
}

func newStoreFailure() *storeFailure { return &storeFailure{ch: make(chan struct{})} }

// storeFailed is the store's Failed callback: it must not block.
func (d *Daemon) storeFailed(err error) {
	d.failure.once.Do(func() {
		d.failure.err = err
		d.log.Error("the database cannot be used any more: refusing every request; stopping", "err", err)
		close(d.failure.ch)
	})
}

// Failed is closed when the daemon's store has failed for good (a bbolt
// file removed, replaced or truncated under it); Failure then says why.
// The daemon refuses every request from then on: its owner stops it.
func (d *Daemon) Failed() <-chan struct{} { return d.failure.ch }

// Failure is why the store failed, or nil.
func (d *Daemon) Failure() error {
	select {
	case <-d.failure.ch:
		return d.failure.err
	default:
		return nil
	}
}
