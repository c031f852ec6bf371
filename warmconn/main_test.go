package warmconn

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine is left running: every
// background dial has an owner (the Transport) that waits for it in Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
