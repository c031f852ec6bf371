package gateway

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/joakimp/devbox-config/fakepalace"
)

// TestMain: started as mempalace-mcp (testbed.Self), the test binary is
// the test double's program, so no test here builds one. Otherwise it runs
// the tests and then fails if any goroutine is left running: every
// goroutine has an owner that waits for it.
func TestMain(m *testing.M) {
	fakepalace.MainIfLinked()
	goleak.VerifyTestMain(m)
}
