package gateway

import (
	"crypto/ed25519"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// TestMain: started as mempalace-mcp (testbed.Self), the test binary is
// the test double's program, so no test here builds one. Otherwise it runs
// the tests and then fails if any goroutine is left running: every
// goroutine has an owner that waits for it.
func TestMain(m *testing.M) {
	fakepalace.MainIfLinked()
	testbed.WaitingTests(8)
	goleak.VerifyTestMain(testbed.OnTmpfs(m))
}

// Verify checks a log's chain (VerifyLog without anchors) and returns
// its line count.
func Verify(file string, pub ed25519.PublicKey) (lines int, err error) {
	r, err := VerifyLog([]string{file}, pub, nil)
	return r.Lines, err
}

// Authenticate is AuthenticateWith by the config alone.
func Authenticate(c *Config, key []byte, presented string, now time.Time) (*Device, *Token, bool, error) {
	return AuthenticateWith(c, nil, key, presented, now)
}
