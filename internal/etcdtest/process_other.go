//go:build !linux

package etcdtest

import "syscall"

// memberProcAttr: only Linux has a parent-death signal; elsewhere Close
// (or the test's cleanup) kills the members.
func memberProcAttr() *syscall.SysProcAttr { return nil }
