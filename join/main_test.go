package join

import (
	"os"
	"testing"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// TestMain: started as mempalace-mcp (testbed.Self), the test binary is
// the test double's program, so no test here builds one. Every test here
// is parallel and waits more than it computes (testbed.WaitingTests).
func TestMain(m *testing.M) {
	fakepalace.MainIfLinked()
	testbed.WaitingTests(8)
	os.Exit(testbed.OnTmpfs(m).Run())
}
