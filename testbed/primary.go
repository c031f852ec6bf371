package testbed

import (
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
