package e2e

import (
	"os"
	"testing"

	"github.com/joakimp/devbox-config/testbed"
)

// TestMain removes the binaries the tests built (testbed.Build) once they
// have run.
func TestMain(m *testing.M) { os.Exit(testbed.RemovingBuilds(m).Run()) }
