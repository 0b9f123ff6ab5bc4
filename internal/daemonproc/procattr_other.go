//go:build !linux

package daemonproc

import "syscall"

// procAttr: elsewhere the harness's cleanup must kill the daemon.
func procAttr() *syscall.SysProcAttr { return nil }
