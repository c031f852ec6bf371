package realpalace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/testbed"
)

// Version is the MemPalace release the tests run against, pinned by
// scripts/install-mempalace.
const Version = "3.11.0"

// marker is the file scripts/install-mempalace writes into the venv once
// mempalace==Version is installed in it; its content is the pin.
const marker = ".devbox-config-pin"

// VenvDir is where the pinned venv lives: $DEVBOX_MEMPALACE_VENV, else
// ~/.cache/devbox-config/mempalace/<Version>/venv.
func VenvDir() string {
	if d := os.Getenv("DEVBOX_MEMPALACE_VENV"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "devbox-config", "mempalace", Version, "venv")
}

// ErrNotInstalled: the pinned venv is missing or holds another version.
var ErrNotInstalled = errors.New("the pinned MemPalace venv is not installed")

// Find returns the venv directory when it holds mempalace==Version (by
// the install script's marker), else an error saying how to install it.
func Find() (string, error) {
	dir := VenvDir()
	pin, err := os.ReadFile(filepath.Join(dir, marker))
	if err != nil || strings.TrimSpace(string(pin)) != "mempalace=="+Version {
		return "", fmt.Errorf("%w in %s (run scripts/test, or: DEVBOX_MEMPALACE_VENV=%s scripts/install-mempalace)", ErrNotInstalled, dir, dir)
	}
	for _, b := range []string{"mempalace", "mempalace-mcp"} {
		if _, err := os.Stat(filepath.Join(dir, "bin", b)); err != nil {
			return "", fmt.Errorf("%w: %v", ErrNotInstalled, err)
		}
	}
	return dir, nil
}

// Venv returns the pinned venv for a test that runs real MemPalace. Such
// a test belongs to the integration tier: it skips under -short. Without
// the venv it skips on a developer machine and fails in CI (CI set), so
// CI can never pass by skipping.
func Venv(t testing.TB) string {
	t.Helper()
	testbed.Integration(t, "real MemPalace "+Version)
	dir, err := Find()
	if err != nil {
		testbed.Missing(t, err.Error())
	}
	return dir
}
