package etcdtest

import "syscall"

// memberProcAttr makes a member process die with the process that started
// it (a test killed or crashing leaves no etcd behind).
func memberProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
