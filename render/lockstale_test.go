package render

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A crashed writer's old lock that cannot be removed (a directory with a
// file in it) is named with its fix, at once: before, render tried to
// remove it for ever, at full CPU, and the container start never ended
// (review35 R2). Nothing is removed and the file is left as it is.
func TestAnOldLockThatCannotBeRemovedIsNamed(t *testing.T) {
	home := t.TempDir()
	file := filepath.Join(home, ".claude.json")
	os.WriteFile(file, []byte("{}"), 0o644)
	lock := file + ".lock"
	os.Mkdir(lock, 0o755)
	os.WriteFile(filepath.Join(lock, "x"), nil, 0o644)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(lock, old, old)
	done := make(chan error, 1)
	go func() { _, err := (OS{}).LockOwner(file, "Claude Code"); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "a directory with files in it") || !strings.Contains(err.Error(), "rm -r "+lock) {
			t.Errorf("LockOwner on an old lock it cannot remove: %v, want it named with its fix", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("LockOwner still trying after 5 s on an old lock it cannot remove")
	}
	if _, err := os.Stat(filepath.Join(lock, "x")); err != nil {
		t.Errorf("the lock's contents: %v", err)
	}
}
