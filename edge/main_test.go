package edge

import (
	"testing"

	"github.com/joakimp/devbox-config/fakepalace"
)

// TestMain: started as mempalace-mcp (testbed.Self), the test binary is
// the test double's program, so no test here builds one.
func TestMain(m *testing.M) {
	fakepalace.MainIfLinked()
	m.Run()
}
