package ladder_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// Every variable the pinned MemPalace reads (each quoted MEMPAL(ACE)_*
// name in its Python source) is a server variable: harnesses that start
// servers with a fixed environment (Codex, Auggie) or strip secret-looking
// names (Gemini) hand the whole list on, so a name the next release adds
// fails here, not as a local palace running another embedder.
func TestRealMempalaceReadsNoVariableTheLadderLacks(t *testing.T) {
	venv := realpalace.Venv(t)
	pkgs, _ := filepath.Glob(filepath.Join(venv, "lib", "python*", "site-packages", "mempalace"))
	if len(pkgs) != 1 {
		t.Fatalf("the mempalace package in %s: %q", venv, pkgs)
	}
	quoted := regexp.MustCompile(`["'](MEMPAL(?:ACE)?_[A-Z0-9_]+)["']`)
	read := map[string]bool{}
	err := filepath.WalkDir(pkgs[0], func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".py") {
			return err
		}
		src, err := os.ReadFile(path)
		for _, m := range quoted.FindAllSubmatch(src, -1) {
			read[string(m[1])] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(read) < 50 {
		t.Fatalf("only %d names found in %s: the scan is broken", len(read), pkgs[0])
	}
	known := ladder.ServerVars()
	for n := range read {
		if !slices.Contains(known, n) {
			t.Errorf("MemPalace %s reads %s, which ladder.ServerVars lacks (add it to mempalaceVars)", realpalace.Version, n)
		}
	}
}
