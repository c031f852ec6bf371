package outbox_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine is left running after its
// tests: every goroutine has an owner that waits for it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
