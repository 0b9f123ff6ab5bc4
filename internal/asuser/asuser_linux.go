// Package asuser runs a function as another local user as far as the
// sockets it opens are concerned: on a thread of its own whose file
// system user is set to that user (setfsuid(2)), so a socket it makes
// belongs to that user, as one another program on the box opened would.
// Tests of what the daemon does with local clients of other users use it
// (internal/daemon, internal/e2e); it needs root, and says so otherwise.
package asuser

import (
	"errors"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// ErrNotRoot is Do's error when the process may not change its file
// system user.
var ErrNotRoot = errors.New("asuser: needs root to open sockets as another user")

// Supported reports whether Do can work here.
func Supported() bool { return os.Geteuid() == 0 }

// Do runs f on a locked thread whose file system user is uid; the
// sockets f makes on its own goroutine belong to uid. f must not start
// goroutines that make sockets. (The runtime starts no thread from a
// locked one, so no other goroutine ever runs as uid.)
func Do(uid uint32, f func() error) error {
	if !Supported() {
		return ErrNotRoot
	}
	runtime.LockOSThread()
	prev, _ := unix.SetfsuidRetUid(int(uid))
	if cur, _ := unix.SetfsuidRetUid(-1); cur != int(uid) {
		_, _ = unix.SetfsuidRetUid(prev)
		runtime.UnlockOSThread()
		return ErrNotRoot
	}
	defer func() {
		_, _ = unix.SetfsuidRetUid(prev)
		if cur, _ := unix.SetfsuidRetUid(-1); cur == prev {
			runtime.UnlockOSThread() // else the thread ends with its goroutine
		}
	}()
	return f()
}
