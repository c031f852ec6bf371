package edge

import (
	"flag"
	"testing"

	"go.uber.org/goleak"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// TestMain: started as mempalace-mcp (testbed.Self), the test binary is
// the test double's program, so no test here builds one. Otherwise it runs
// the tests and then fails if any goroutine is left running: every
// goroutine has an owner that waits for it.
//
// Every test here is parallel, and four run at once unless -parallel says
// otherwise (or the race detector is on): the tests mostly wait (on a
// child palace, a grace, a primary's answer) rather than compute, so on
// two cores the package takes about 14 s instead of 22.
func TestMain(m *testing.M) {
	fakepalace.MainIfLinked()
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set && !raceEnabled {
		flag.Set("test.parallel", "4") // a registered flag and a number: it sets
	}
	goleak.VerifyTestMain(testbed.RemovingBuilds(m))
}
