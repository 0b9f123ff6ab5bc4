package daemonproc

import "syscall"

// procAttr makes the daemon die with the process that started it (a test
// killed or timing out leaves no daemon behind).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
