package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/testbed"
)

// node is one entry of a snapshot of a home.
type node struct {
	mode  fs.FileMode
	data  string // file bytes or link target
	mtime time.Time
}

func snapshot(t *testing.T, root string) map[string]node {
	t.Helper()
	out := map[string]node{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		n := node{mode: fi.Mode(), mtime: fi.ModTime()}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			n.data, _ = os.Readlink(p)
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			n.data = string(b)
		}
		out[rel] = n
		return nil
	})
	return out
}

// restore makes root hold exactly snap.
func restore(t *testing.T, root string, snap map[string]node) {
	t.Helper()
	os.RemoveAll(root)
	os.MkdirAll(root, 0o755)
	var rels []string
	for r := range snap {
		rels = append(rels, r)
	}
	sort.Strings(rels) // parents first
	for _, r := range rels {
		n, p := snap[r], filepath.Join(root, r)
		switch {
		case n.mode.IsDir():
			os.Mkdir(p, n.mode.Perm())
		case n.mode&fs.ModeSymlink != 0:
			os.Symlink(n.data, p)
		case n.mode&fs.ModeNamedPipe != 0:
			syscall.Mkfifo(p, uint32(n.mode.Perm()))
		default:
			os.WriteFile(p, []byte(n.data), n.mode.Perm())
			os.Chmod(p, n.mode.Perm())
		}
		if n.mode&fs.ModeSymlink == 0 {
			os.Chtimes(p, n.mtime, n.mtime) // a stale temp file stays stale
		}
	}
}

type renderRun struct {
	stdout, stderr string
	code           int
	answered       bool // by the start memo: no package past atstart initialised
	inits          []string
	tree           map[string]node
}

// runRender runs the binary's render with GODEBUG=inittrace=1, which
// shows whether the start was answered before cobra initialised, and
// returns what a user sees (the trace's lines taken out).
func runRender(t *testing.T, bin, home string, env []string, args ...string) renderRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"render"}, args...)...)
	cmd.Env = append(env, "GODEBUG=inittrace=1")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("render %v hung", args)
	}
	r := renderRun{stdout: o.String(), answered: true}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, l := range strings.SplitAfter(e.String(), "\n") {
		if strings.HasPrefix(l, "init ") {
			name, _, _ := strings.Cut(strings.TrimPrefix(l, "init "), " ")
			r.inits = append(r.inits, name)
			if name == "github.com/spf13/cobra" {
				r.answered = false
			}
			continue
		}
		kept = append(kept, l)
	}
	r.stderr = strings.Join(kept, "")
	r.tree = snapshot(t, home)
	delete(r.tree, filepath.Join(".cache", "devbox-config", "render-memo"))
	return r
}

// TestStartMemoAnswersAsAFullRunWould is the memo's guarantee, tried
// against everything a user or another process can change between two
// container starts: after the change, a start that may use the memo prints
// and writes exactly what a full run (no memo) prints and writes from the
// same state; and the memo answers (no package past atstart initialises)
// only when nothing it depends on changed.
func TestStartMemoAnswersAsAFullRunWould(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := testbed.Build(t, "./cmd/devbox-config", "devbox-config")
	const token = "memo-test-token-8f3a"
	type scenario struct {
		name     string
		env      map[string]string
		setup    func(home string)
		useFlag  bool // --home, else HOME
		change   func(t *testing.T, home string, env map[string]string)
		answered bool
		// unmemoisable: the state after the change is one a check cannot
		// reproduce (a read failing other than by ENOENT), so the start
		// after it plans in full too
		unmemoisable bool
	}
	write := func(p, s string) { os.MkdirAll(filepath.Dir(p), 0o755); os.WriteFile(p, []byte(s), 0o644) }
	remote := map[string]string{"MEMPALACE_REMOTE_URL": "https://palace.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": token}
	fleet := func(home string) {
		write(filepath.Join(home, ".config/opencode/opencode.jsonc"), "{\n  // mine\n  \"model\": \"x/y\"\n}\n")
		write(filepath.Join(home, ".pi/agent/settings.json"), "{\"theme\": \"dark\"}\n")
		write(filepath.Join(home, ".pi/agent/mcp.json"), "{\"mcpServers\": {}}\n")
		write(filepath.Join(home, ".codex/config.toml"), "# my codex\nmodel = \"o4\"\n")
	}
	server := func(home string) {
		write(filepath.Join(home, "bin/mempalace-mcp"), "#!/bin/sh\n")
		os.Chmod(filepath.Join(home, "bin/mempalace-mcp"), 0o755)
	}
	oc := ".config/opencode/opencode.jsonc"
	cases := []scenario{
		{name: "nothing changed", env: remote, setup: fleet, useFlag: true, answered: true, change: func(*testing.T, string, map[string]string) {}},
		{name: "nothing changed, solitary (R1)", env: map[string]string{}, setup: func(h string) { fleet(h); server(h) }, answered: true, change: func(*testing.T, string, map[string]string) {}},
		{name: "the token rotated", env: remote, setup: fleet, useFlag: true, answered: true, change: func(_ *testing.T, _ string, env map[string]string) {
			env["MEMPALACE_REMOTE_TOKEN"] = "rotated-token-77"
		}},
		{name: "the URL changed", env: remote, setup: fleet, useFlag: true, change: func(_ *testing.T, _ string, env map[string]string) {
			env["MEMPALACE_REMOTE_URL"] = "https://other.example.org/mcp"
		}},
		{name: "edge mode switched on", env: remote, setup: fleet, useFlag: true, change: func(_ *testing.T, _ string, env map[string]string) { env["MEMPALACE_EDGE"] = "1" }},
		{name: "the token emptied", env: remote, setup: fleet, useFlag: true, change: func(_ *testing.T, _ string, env map[string]string) { env["MEMPALACE_REMOTE_TOKEN"] = " " }},
		{name: "the env reverts to solitary", env: remote, setup: func(h string) { fleet(h); server(h) }, useFlag: true, change: func(_ *testing.T, _ string, env map[string]string) {
			delete(env, "MEMPALACE_REMOTE_URL")
			delete(env, "MEMPALACE_REMOTE_TOKEN")
		}},
		{name: "the user edited the managed entry", env: remote, setup: fleet, useFlag: true, change: func(t *testing.T, home string, _ map[string]string) {
			p := filepath.Join(home, oc)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(b, []byte(`"enabled": true`), []byte(`"enabled": false`), 1), 0o644)
		}},
		{name: "the user edited a comment only", env: remote, setup: fleet, useFlag: true, change: func(t *testing.T, home string, _ map[string]string) {
			p := filepath.Join(home, oc)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(b, []byte("// mine"), []byte("// MINE"), 1), 0o644)
		}},
		{name: "the config became a FIFO", env: remote, setup: fleet, useFlag: true, unmemoisable: true, change: func(t *testing.T, home string, _ map[string]string) {
			p := filepath.Join(home, oc)
			os.Remove(p)
			syscall.Mkfifo(p, 0o644)
		}},
		{name: "the config became a link to a copy", env: remote, setup: fleet, useFlag: true, change: func(t *testing.T, home string, _ map[string]string) {
			p := filepath.Join(home, oc)
			b, _ := os.ReadFile(p)
			write(filepath.Join(home, "dotfiles/opencode.jsonc"), string(b))
			os.Remove(p)
			os.Symlink("../../dotfiles/opencode.jsonc", p)
		}},
		{name: "the config made read-only", env: remote, setup: fleet, useFlag: true, change: func(t *testing.T, home string, _ map[string]string) {
			os.Chmod(filepath.Join(home, oc), 0o444)
		}},
		{name: "an opencode.json appeared beside it", env: remote, setup: fleet, useFlag: true, change: func(t *testing.T, home string, _ map[string]string) {
			write(filepath.Join(home, ".config/opencode/opencode.json"), "{\"mcp\": {\"mempalace\": {\"type\": \"local\", \"command\": [\"x\"]}}}\n")
		}},
		{name: "render's record removed", env: remote, setup: fleet, useFlag: true, change: func(t *testing.T, home string, _ map[string]string) {
			os.Remove(filepath.Join(home, ".config/opencode/.devbox-config.json"))
		}},
		{name: "a killed write's temp file", env: remote, setup: fleet, useFlag: true, change: func(t *testing.T, home string, _ map[string]string) {
			p := filepath.Join(home, ".config/opencode/.opencode.jsonc.tmp-00000000000000ff")
			write(p, "half")
			old := time.Now().Add(-time.Hour)
			os.Chtimes(p, old, old)
		}},
		{name: "gemini installed", env: remote, setup: fleet, useFlag: true, change: func(t *testing.T, home string, _ map[string]string) {
			os.MkdirAll(filepath.Join(home, ".gemini"), 0o755)
		}},
		{name: "codex config deleted", env: remote, setup: fleet, useFlag: true, change: func(t *testing.T, home string, _ map[string]string) {
			os.Remove(filepath.Join(home, ".codex/config.toml"))
		}},
		{name: "mempalace-mcp installed", env: map[string]string{}, setup: fleet, change: func(t *testing.T, home string, _ map[string]string) { server(home) }},
		{name: "mempalace-mcp lost its exec bit", env: map[string]string{}, setup: func(h string) { fleet(h); server(h) }, change: func(t *testing.T, home string, _ map[string]string) {
			os.Chmod(filepath.Join(home, "bin/mempalace-mcp"), 0o644)
		}},
		{name: "XDG_CONFIG_HOME moved", env: remote, setup: fleet, change: func(t *testing.T, home string, env map[string]string) {
			env["XDG_CONFIG_HOME"] = filepath.Join(home, "xdg")
		}},
		{name: "pi settings merge turned off", env: remote, setup: fleet, change: func(t *testing.T, home string, env map[string]string) { env["PI_SETTINGS_MERGE"] = "0" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			os.MkdirAll(home, 0o755)
			c.setup(home)
			env := map[string]string{}
			for k, v := range c.env {
				env[k] = v
			}
			environ := func() []string {
				out := []string{"HOME=" + home, "PATH=" + filepath.Join(home, "bin") + ":/usr/bin:/bin"}
				for k, v := range env {
					out = append(out, k+"="+v)
				}
				return out
			}
			var args []string
			if c.useFlag {
				args = []string{"--home", home}
			}
			memoFile := filepath.Join(home, ".cache/devbox-config/render-memo")
			// likeFull runs a start that may use the memo, then the same
			// start from the same state without one, and requires the two
			// to print, exit and write alike; the home is left as the
			// first left it.
			likeFull := func(step string, wantAnswered bool) renderRun {
				t.Helper()
				before := snapshot(t, home)
				withMemo := runRender(t, bin, home, environ(), args...)
				after := snapshot(t, home)
				restore(t, home, before)
				os.Remove(memoFile)
				full := runRender(t, bin, home, environ(), args...)
				restore(t, home, after)
				if withMemo.answered != wantAnswered {
					t.Errorf("%s: answered from the memo: %v, want %v", step, withMemo.answered, wantAnswered)
				}
				if full.answered {
					t.Fatalf("%s: a start without a memo was answered", step)
				}
				if withMemo.stdout != full.stdout || withMemo.stderr != full.stderr || withMemo.code != full.code {
					t.Errorf("%s: the start with the memo printed\n%q (exit %d)\na full run\n%q (exit %d)", step, withMemo.stderr, withMemo.code, full.stderr, full.code)
				}
				for _, rel := range diffTrees(withMemo.tree, full.tree) {
					t.Errorf("%s: after the start with the memo %s differs from a full run's", step, rel)
				}
				return withMemo
			}
			// The first start writes the configs, then records the start
			// after it, which is answered: as a full run would have gone.
			if first := runRender(t, bin, home, environ(), args...); first.code != 0 || first.answered {
				t.Fatalf("the first start: exit %d, answered %v\n%s", first.code, first.answered, first.stderr)
			}
			if _, err := os.Stat(memoFile); err != nil {
				t.Fatalf("no memo after the first start: %v", err)
			}
			second := likeFull("the second start", true)
			// A steady start writes nothing, the memo included.
			memoInfo, _ := os.Stat(memoFile)
			third := runRender(t, bin, home, environ(), args...)
			if !third.answered || third.stderr != second.stderr {
				t.Fatalf("an unchanged third start was not answered from the memo (answered=%v)\n%s", third.answered, third.stderr)
			}
			if fi, _ := os.Stat(memoFile); !fi.ModTime().Equal(memoInfo.ModTime()) {
				t.Error("an answered start rewrote the memo")
			}
			// The answer comes before reflect and everything that needs it
			// initialise (package atstart's doc).
			if slices.Contains(third.inits, "reflect") || len(third.inits) > 30 {
				t.Errorf("a start answered from the memo ran %d package inits: %v", len(third.inits), third.inits)
			}
			c.change(t, home, env)
			likeFull("after the change", c.answered)
			// and the start after that one, from what the change's start
			// left (its memo included)
			likeFull("the start after the change", !c.unmemoisable)
			testbed.NoFileContains(t, home, token)
		})
	}
}

var writtenAt = regexp.MustCompile(`"written_at": "[^"]*"`)

// diffTrees names the entries two snapshots disagree on in type, mode or
// bytes, with what carries the time of a run taken out: backups are
// compared by their bytes, the record's written_at not at all.
func diffTrees(a, b map[string]node) []string {
	norm := func(m map[string]node) map[string]node {
		out := map[string]node{}
		baks := map[string][]string{}
		for k, v := range m {
			v.mtime = time.Time{}
			v.data = writtenAt.ReplaceAllString(v.data, `"written_at": "<time>"`)
			if i := strings.Index(k, ".bak."); i >= 0 {
				baks[k[:i]] = append(baks[k[:i]], v.data)
				continue
			}
			out[k] = v
		}
		for k, list := range baks {
			sort.Strings(list)
			for i, d := range list {
				out[k+".bak."+strconv.Itoa(i)] = node{data: d}
			}
		}
		return out
	}
	a, b = norm(a), norm(b)
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// TestAtStartInitialisesEarly keeps package atstart's imports free of
// strings and reflect: with either, its init would run after reflect and
// every package that needs it (encoding/gob, crypto, encoding/json, ...),
// which is most of the start-up cost the memo exists to skip.
func TestAtStartInitialisesEarly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/joakimp/devbox-config/render/memo/atstart").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Fields(string(out)) {
		switch p {
		case "strings", "reflect", "fmt", "path/filepath", "os/exec":
			t.Errorf("render/memo/atstart imports %s (go list -deps)", p)
		}
	}
}

// A link or a FIFO planted where the memo goes is neither followed nor
// opened: the start plans in full and says nothing about it.
func TestStartMemoLeavesAPlantedFileAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := testbed.Build(t, "./cmd/devbox-config", "devbox-config")
	for _, kind := range []string{"link", "fifo"} {
		t.Run(kind, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			os.MkdirAll(filepath.Join(home, ".cache/devbox-config"), 0o700)
			os.MkdirAll(filepath.Join(home, ".config/opencode"), 0o755)
			victim := filepath.Join(t.TempDir(), "victim")
			os.WriteFile(victim, []byte("keep me\n"), 0o644)
			memoFile := filepath.Join(home, ".cache/devbox-config/render-memo")
			if kind == "link" {
				os.Symlink(victim, memoFile)
			} else {
				syscall.Mkfifo(memoFile, 0o600)
			}
			env := []string{"HOME=" + home, "PATH=/usr/bin:/bin", "MEMPALACE_REMOTE_URL=https://p.example/mcp", "MEMPALACE_REMOTE_TOKEN=x"}
			for i := 0; i < 3; i++ {
				r := runRender(t, bin, home, env, "--home", home)
				if r.code != 0 || r.answered {
					t.Fatalf("start %d: exit %d, answered %v: %s", i, r.code, r.answered, r.stderr)
				}
			}
			if b, _ := os.ReadFile(victim); string(b) != "keep me\n" {
				t.Fatalf("the memo was written through a planted link: %q", b)
			}
			fi, _ := os.Lstat(memoFile)
			if kind == "fifo" && fi.Mode()&fs.ModeNamedPipe == 0 || kind == "link" && fi.Mode()&fs.ModeSymlink == 0 {
				t.Fatalf("the planted %s was replaced: %v", kind, fi.Mode())
			}
		})
	}
}

// The memo goes only where nobody else can move things: under a
// world-writable $XDG_CACHE_HOME none is kept, under a sticky one (as
// /tmp) it is.
func TestStartMemoNotKeptUnderAWorldWritableCache(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := testbed.Build(t, "./cmd/devbox-config", "devbox-config")
	for mode, kept := range map[os.FileMode]bool{0o777: false, 0o777 | os.ModeSticky: true, 0o755: true} {
		home := filepath.Join(t.TempDir(), "home")
		os.MkdirAll(filepath.Join(home, ".config/opencode"), 0o755)
		cache := filepath.Join(t.TempDir(), "cache")
		os.Mkdir(cache, 0o755)
		os.Chmod(cache, mode)
		env := []string{"HOME=" + home, "XDG_CACHE_HOME=" + cache, "PATH=/usr/bin:/bin", "MEMPALACE_REMOTE_URL=https://p.example/mcp", "MEMPALACE_REMOTE_TOKEN=x"}
		runRender(t, bin, home, env)
		runRender(t, bin, home, env)
		_, err := os.Stat(filepath.Join(cache, "devbox-config", "render-memo"))
		if (err == nil) != kept {
			t.Errorf("XDG_CACHE_HOME mode %v: memo kept=%v, want %v", mode, err == nil, kept)
		}
	}
}
