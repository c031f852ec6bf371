package outbox_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/joakimp/devbox-config/testbed"
)

// TestMain fails the package if any goroutine is left running after its
// tests: every goroutine has an owner that waits for it.
func TestMain(m *testing.M) {
	testbed.WaitingTests(8)
	goleak.VerifyTestMain(testbed.OnTmpfs(m))
}
