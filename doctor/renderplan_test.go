package doctor

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/render"
)

// attack88 F5: doctor said "nothing to fix" for a .env, then render, given
// it, left opencode (a typo), Gemini (a trailing comma), Cursor (read-only)
// and Qwen (a dangling link) alone and kept pi-mcp on the user's own entry,
// so those harnesses stayed solitary. doctor now names each, with render's
// own words and fix.
func TestDoctorNamesTheConfigsRenderWouldLeaveAlone(t *testing.T) {
	b := newBox(t)
	h := b.home
	write(t, filepath.Join(h, ".config/opencode/opencode.jsonc"), `{"mcp": {"a":1,,}}`+"\n", 0o644)
	write(t, filepath.Join(h, ".gemini/settings.json"), `{"mcpServers": {},}`+"\n", 0o644)
	write(t, filepath.Join(h, ".cursor/mcp.json"), `{"mcpServers": {"a": {"command": "a"}}}`, 0o444)
	must(t, os.MkdirAll(filepath.Join(h, ".qwen"), 0o755))
	must(t, os.Symlink("/nonexistent/qwen.json", filepath.Join(h, ".qwen/settings.json")))
	write(t, filepath.Join(h, ".pi/agent/mcp.json"), `{"mcpServers": {"mempalace": {"command": "mempalace-mcp", "args": ["--palace", "/x"]}}}`, 0o644)

	only(t, b.run(), "warn:render-refuses") // solitary: opencode only
	b.env["MEMPALACE_REMOTE_URL"] = "https://p.example.org/mcp"
	b.env["MEMPALACE_REMOTE_TOKEN"] = "tok-0123456789abcdef"
	fs := CheckRenderRefuses(b.opts.withDefaults(), PlanRender(b.opts.withDefaults()))

	res, _, err := render.Run(render.Options{Home: h, HomeFromFlag: true, Env: b.opts.Env, LookPath: b.opts.LookPath}, true)
	must(t, err)
	var want []string
	for _, r := range res {
		if r.Kept() {
			want = append(want, r.Target)
		}
	}
	slices.Sort(want)
	if strings.Join(want, ",") != "cursor,gemini,opencode,pi-mcp,qwen" {
		t.Fatalf("render's dry run keeps %v", want)
	}
	if len(fs) != len(want) {
		t.Fatalf("%d findings for %d targets render leaves alone: %+v", len(fs), len(want), fs)
	}
	for i, f := range fs {
		if f.ID != IDRenderRefuses || f.Severity != Warn || !strings.Contains(f.Message, h) || f.Fix == "" || strings.Contains(f.Fix, "(fix:") {
			t.Errorf("%d: %+v", i, f)
		}
		if strings.Contains(f.Message, "pi/agent/mcp.json") && !strings.Contains(f.Fix, "--target pi-mcp") {
			t.Errorf("pi-mcp's fix names no target: %s", f.Fix)
		}
	}
	// Checked read-only: nothing written (render's dry run).
	if _, err := os.Stat(filepath.Join(h, ".pi/agent/mcp.json.proposed")); err == nil {
		t.Errorf("a .proposed was written")
	}
}

// A dangling symlink at ~/.claude.json.lock keeps render off Claude Code
// at every start; doctor said "nothing to fix". render-refuses now names
// it, with render's own words and fix (attack114 F4). It is render's
// start-up dry run: with no MEMPALACE_* variables, Claude Code (opt-in)
// is named only once render has managed its entry, as harnesses.md says
// (attack117 F3).
func TestDoctorNamesAClaudeLockThatIsNoLock(t *testing.T) {
	b := newBox(t)
	h := b.home
	write(t, filepath.Join(h, ".claude.json"), "{}\n", 0o644)
	must(t, os.MkdirAll(filepath.Join(h, ".claude"), 0o755))
	lock := filepath.Join(h, ".claude.json.lock")
	claude := func() (got []Finding) {
		for _, f := range CheckRenderRefuses(b.opts.withDefaults(), PlanRender(b.opts.withDefaults())) {
			if strings.Contains(f.Message, "claude-code") {
				got = append(got, f)
			}
		}
		return got
	}
	must(t, os.Symlink("/nonexistent/x", lock))
	if got := claude(); len(got) != 0 {
		t.Fatalf("solitary, Claude Code never managed: render leaves ~/.claude.json alone, yet doctor says %+v", got)
	}
	b.env["MEMPALACE_REMOTE_URL"] = "https://p.example.org/mcp"
	b.env["MEMPALACE_REMOTE_TOKEN"] = "tok-0123456789abcdef"
	got := claude()
	if len(got) != 1 || !strings.Contains(got[0].Message, lock+": it is a dangling symlink (to /nonexistent/x)") ||
		got[0].Fix != "rm "+lock+" if no Claude Code is running" {
		t.Fatalf("want claude-code's lock named with the fix, got %+v", got)
	}
	if _, err := os.Lstat(lock); err != nil {
		t.Errorf("the link was removed: %v", err)
	}
	// Managed once (render wrote its entry), then solitary again: render
	// would take the entry back out, so the lock is named again.
	must(t, os.Remove(lock))
	_, _, err := render.Run(render.Options{Home: h, HomeFromFlag: true, Env: b.opts.Env, LookPath: b.opts.LookPath}, false)
	must(t, err)
	must(t, os.Symlink("/nonexistent/x", lock))
	delete(b.env, "MEMPALACE_REMOTE_URL")
	delete(b.env, "MEMPALACE_REMOTE_TOKEN")
	if got := claude(); len(got) != 1 || !strings.Contains(got[0].Message, lock+": it is a dangling symlink") {
		t.Fatalf("solitary after render managed Claude Code: want its lock named, got %+v", got)
	}
}

// A parse error's own words reach doctor's render-refuses as render wrote
// them, with a token set: "basic strings" is TOML's English, not a Basic
// credential (attack116 F2: "basic [redacted] cannot have new lines").
// And an old lock directory with a file in it, which render's run
// refuses, is named by its dry run, so doctor says so (attack116 F1).
func TestDoctorKeepsAParseErrorsWordsAndNamesALockDirectoryInUse(t *testing.T) {
	b := newBox(t)
	h := b.home
	must(t, os.MkdirAll(filepath.Join(h, ".codex"), 0o755))
	write(t, filepath.Join(h, ".codex", "config.toml"), "k = \"a\nb\"\n", 0o644)
	write(t, filepath.Join(h, ".claude.json"), "{}\n", 0o644)
	must(t, os.MkdirAll(filepath.Join(h, ".claude"), 0o755))
	lock := filepath.Join(h, ".claude.json.lock")
	must(t, os.Mkdir(lock, 0o755))
	write(t, filepath.Join(lock, "x"), "", 0o644)
	b.env["MEMPALACE_REMOTE_URL"] = "https://p.example.org/mcp"
	b.env["MEMPALACE_REMOTE_TOKEN"] = "tok-0123456789abcdef"
	said := map[string]string{}
	for _, f := range CheckRenderRefuses(b.opts.withDefaults(), PlanRender(b.opts.withDefaults())) {
		for _, target := range []string{"codex", "claude-code"} {
			if strings.Contains(f.Message, "("+target+")") || strings.Contains(f.Message, target) {
				said[target] += f.Message + " | " + f.Fix
			}
		}
	}
	if !strings.Contains(said["codex"], "basic strings") || strings.Contains(said["codex"], "[redacted]") {
		t.Errorf("codex's parse error: %q, want TOML's own words", said["codex"])
	}
	if !strings.Contains(said["claude-code"], "a directory with files in it") || !strings.Contains(said["claude-code"], "rm -r "+lock) {
		t.Errorf("claude-code's lock directory in use: %q, want it named with its fix", said["claude-code"])
	}
}
