//go:build !linux

package realpalace

import "syscall"

// procAttr puts the process in a group of its own (stopped as one).
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
