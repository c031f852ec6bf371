package warmconn

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// A connect that hangs (the server's SYNs dropped: a firewall's
// blackhole, a listener whose backlog is full) fails within DialTimeout,
// however long the request's own deadline: a long write's bound is for
// its exchange, not for reaching the server (review28b F3). Before, the
// dial ran on the request's deadline, up to the kernel's SYN retries
// (about two minutes).
func TestAHungConnectEndsAtTheDialTimeout(t *testing.T) {
	t.Parallel()
	addr := fullBacklog(t)
	tr, err := New("http://"+addr+"/mcp", http.DefaultTransport)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.DialTimeout = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/mcp", nil)
	began := time.Now()
	if _, err := tr.RoundTrip(req); err == nil {
		t.Fatal("a request to a server whose connects hang was answered")
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("a connect that hangs took %v, want about the dial timeout", took)
	}
}

// fullBacklog is the address of a listener with a backlog of 0 that never
// accepts, its one queued connection taken: the kernel drops further SYNs,
// so a connect to it hangs.
func fullBacklog(t *testing.T) string {
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
