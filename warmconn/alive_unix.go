//go:build unix

package warmconn

import (
	"errors"
	"net"
	"syscall"
)

// alive peeks at an idle connection without reading from it: false when
// the server has closed or reset it, or (plain HTTP) sent something
// unasked, such as a 408. Under TLS, bytes may be the server's session
// tickets, so only a close counts.
func alive(c net.Conn, tlsConn bool) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	ok = true
	var buf [1]byte
	rc.Read(func(fd uintptr) bool { // the peek below decides; a failed call leaves ok true: the call fails and is retried
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EINTR):
		case err != nil || n == 0:
			ok = false
		case !tlsConn:
			ok = false
		}
		return true
	})
	return ok
}
