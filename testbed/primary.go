package testbed

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/joakimp/devbox-config/fakepalace"
)

// Primary starts the test double, a palace made with o, as an HTTP
// primary with h on a free loopback port, stopped when the test ends.
// A test may Stop it earlier (the primary goes down) and Start it again:
// Stop is idempotent. Tests inside package fakepalace, or a package it
// imports, cannot use it (an import cycle); their _test packages can.
func Primary(t testing.TB, o fakepalace.Options, h fakepalace.HTTPOptions) (*fakepalace.Palace, *fakepalace.HTTPServer) {
	t.Helper()
	pl, err := fakepalace.New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := pl.NewHTTP(h)
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return pl, srv
}

// HungPrimary is a primary's URL on a free loopback port where
// connections are accepted and never answered (serve stopped with kill
// -STOP behind its live socket: it hangs rather than refuses), closed
// when the test ends.
func HungPrimary(t testing.TB) string {
	t.Helper()
	return loopbackServer(t, func(net.Conn) bool { return true })
}

// loopbackServer accepts connections on a free loopback port until the
// test ends, giving each to handle on the accepting goroutine: a
// connection handle keeps (true) is closed when the test ends, any other
// at once. It returns the port's /mcp URL.
func loopbackServer(t testing.TB, handle func(net.Conn) (keep bool)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
			close(done)
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed at cleanup
			}
			if handle(c) {
				held = append(held, c)
			} else {
				c.Close()
			}
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return "http://" + ln.Addr().String() + "/mcp"
}

// Redirecting is a primary that answers every request with a 307 to
// another server's /mcp?k=v: it returns the redirecting server's base
// URL, the target's URL without its query (which a redacted message
// leaves out), and how many requests reached the target carrying an
// Authorization header (a token that went where a redirect pointed).
func Redirecting(t testing.TB) (primary, target string, carried func() int) {
	t.Helper()
	var n atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			n.Add(1)
		}
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	t.Cleanup(elsewhere.Close)
	redirecting := httptest.NewServer(http.RedirectHandler(elsewhere.URL+"/mcp?k=v", http.StatusTemporaryRedirect))
	t.Cleanup(redirecting.Close)
	return redirecting.URL, elsewhere.URL + "/mcp", func() int { return int(n.Load()) }
}

// UnreadableHeader is a primary's URL on a free loopback port that
// answers every request with a 302 whose Location net/http cannot read:
// a control character, terminal escapes and "token=s3cret" in it (what
// net/http's own server refuses to write). Its client's error quotes
// the line; a message built from it must not.
func UnreadableHeader(t testing.TB) string {
	t.Helper()
	return loopbackServer(t, func(c net.Conn) bool {
		r := bufio.NewReader(c)
		for line, err := r.ReadString('\n'); err == nil && line != "\r\n"; line, err = r.ReadString('\n') {
		} // the request's head; its body is left unread
		c.Write([]byte("HTTP/1.1 302 Found\r\nLocation: http://evil.example/\x01\x1b]0;x\x07?token=s3cret\r\nContent-Length: 0\r\n\r\n")) // the client's error is the point
		return false
	})
}
