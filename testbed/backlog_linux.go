package testbed

import (
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"
)

// FullBacklog is the address of a listener with a backlog of 0 that never
// accepts, its one queued connection taken: the kernel drops further SYNs,
// so a connect to it hangs (a server stopped with SIGSTOP whose queue
// filled, a firewall's blackhole).
func FullBacklog(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	for range 3 { // the queue's place (backlog+1 on Linux), and one more to be sure it is full
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return addr // full: the connect hung
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Fatal("connects to a listener with a full backlog went through")
	return ""
}
