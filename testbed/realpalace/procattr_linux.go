package realpalace

import "syscall"

// procAttr puts the process in a group of its own (stopped as one) that
// the kernel kills if the test process dies first (a test binary killed
// by a signal runs no cleanup).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
