package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// R1: with no MEMPALACE_* variables a container start writes nothing but
// render's record beside the config it registers the local server in:
// nothing under ~/.cache (or $XDG_CACHE_HOME), no other file anywhere in
// the home, at the first start or at the next one.
func TestSolitaryStartWritesOnlyTheRecord(t *testing.T) {
	for _, xdgCache := range []bool{false, true} {
		root := t.TempDir()
		home := filepath.Join(root, "home")
		bin := filepath.Join(root, "bin")
		os.MkdirAll(bin, 0o755)
		os.WriteFile(filepath.Join(bin, "mempalace-mcp"), []byte("#!/bin/sh\n"), 0o755)
		// a user's own cache, which must stay exactly as it is
		os.MkdirAll(filepath.Join(home, ".cache", "other-app"), 0o755)
		os.WriteFile(filepath.Join(home, ".cache", "other-app", "x"), []byte("x"), 0o644)
		cache := ""
		if xdgCache {
			cache = filepath.Join(root, "xdg-cache")
			os.Mkdir(cache, 0o755)
		}
		t.Setenv("HOME", home)
		t.Setenv("PATH", bin)
		t.Setenv("XDG_CACHE_HOME", cache)
		for _, k := range []string{"XDG_CONFIG_HOME", "PI_CODING_AGENT_DIR", "MEMPALACE_REMOTE_URL", "MEMPALACE_REMOTE_TOKEN", "MEMPALACE_EDGE"} {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
		for start := 1; start <= 2; start++ {
			if code, out, errOut := runCLI("render"); code != 0 {
				t.Fatalf("start %d: exit %d\n%s%s", start, code, out, errOut)
			}
			want := []string{
				".cache/", ".cache/other-app/", ".cache/other-app/x",
				".config/", ".config/opencode/", ".config/opencode/.devbox-config.json", ".config/opencode/opencode.jsonc",
			}
			if got := tree(t, home); !slices.Equal(got, want) {
				t.Errorf("XDG_CACHE_HOME set: %v, start %d: the home holds\n%q\nwant\n%q", xdgCache, start, got, want)
			}
			if xdgCache {
				if got := tree(t, cache); len(got) != 0 {
					t.Errorf("start %d wrote into $XDG_CACHE_HOME: %q", start, got)
				}
			}
		}
	}
}

// tree lists every entry under root, relative, directories with a
// trailing slash, in lexical order.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
