package edge

import (
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
// Every test here is parallel, and eight run at once (testbed.WaitingTests):
// on two cores the package takes about 19 s instead of 55 at go test's
// default of two.
func TestMain(m *testing.M) {
	fakepalace.MainIfLinked()
	testbed.WaitingTests(8)
	goleak.VerifyTestMain(testbed.OnTmpfs(testbed.RemovingBuilds(m)))
}
