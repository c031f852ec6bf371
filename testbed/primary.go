package testbed

import (
	"net"
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
				return
			}
			held = append(held, c)
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return "http://" + ln.Addr().String() + "/mcp"
}
