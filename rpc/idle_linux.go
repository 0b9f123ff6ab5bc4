package rpc

import (
	"syscall"
	"unsafe"
)

const canPeek = true

// peekReadable reports whether the socket fd has a byte to read, or its
// end or an error to report, without taking anything from it; false
// (EAGAIN) makes the poller wait for it to become readable.
func peekReadable(fd uintptr) bool {
	var b [1]byte
	_, _, errno := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
		syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	return errno != syscall.EAGAIN
}
