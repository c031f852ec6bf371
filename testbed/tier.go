package testbed

import (
	"flag"
	"strconv"
	"testing"
)

// The three tiers of scripts/test:
//
//  1. unit: go test -short ./... — no binary built, no npm client, no real
//     MemPalace, no wait of a second or more;
//  2. the race detector over the packages where goroutines meet;
//  3. integration: everything -short skips (go test ./...), then the
//     end-to-end journeys.

// Integration skips t in the unit tier (go test -short), saying why and
// which tier runs it: it builds a binary, drives an npm client or real
// MemPalace, or takes seconds by design.
func Integration(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("integration tier (scripts/test, tier 3): %s", why)
	}
}

// notInUnitTier fails a test that reaches for something the unit tier
// never uses (a build, the npm clients) without calling Integration first.
func notInUnitTier(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Fatalf("%s in the unit tier (go test -short): begin the test with testbed.Integration(t, why)", what)
	}
}

// WaitingTests lets n parallel tests run at once in a package whose tests
// mostly wait (on a child palace, a grace, a primary's answer) rather than
// compute: go test's default is one per core, which on two cores leaves
// the unit tier idle most of its minute. Only the unit tier (-short):
// -parallel on the command line wins, and the race detector's tier and the
// integration tier keep the default (their tests are slower and more
// timing-sensitive: real MemPalace, paced sends). Call it from TestMain
// before m.Run.
func WaitingTests(n int) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set && !raceDetector && testing.Short() {
		// A registered flag and a number: Set cannot fail.
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}
