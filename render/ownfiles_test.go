package render

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/filewrite"
	"github.com/joakimp/devbox-config/fingerprint"
)

// render's own files (the .proposed sidecar, the record, the backups) are
// never written through a link: a symlink at one of their names is left as
// it is, the file it points to (outside the config directory) is not
// touched, the target is skipped with a warning naming the link, and
// nothing else is written for that target. The user's config may stay a
// link (file_symlink.txtar).
func TestOwnFileLinksAreNotWrittenThrough(t *testing.T) {
	remote := func(host string) map[string]string {
		return map[string]string{"MEMPALACE_REMOTE_URL": "https://" + host + "/mcp", "MEMPALACE_REMOTE_TOKEN": "t"}
	}
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		// prepare leaves the home one start away from writing the file
		// link names, and returns that file's path
		prepare func(t *testing.T, home, dir string) string
		env     map[string]string
	}{
		{"the .proposed of an edited entry", func(t *testing.T, home, dir string) string {
			mustRun(t, opts(home, remote("a.example.org")))
			cfg := filepath.Join(dir, "opencode.jsonc")
			b, _ := os.ReadFile(cfg)
			os.WriteFile(cfg, bytes.Replace(b, []byte(`"enabled": true`), []byte(`"enabled": false`), 1), 0o644)
			return cfg + ".proposed"
		}, remote("b.example.org")},
		{"the record of a first write", func(t *testing.T, home, dir string) string {
			return filepath.Join(dir, fingerprint.StateFile)
		}, remote("a.example.org")},
		{"the record of a rung change", func(t *testing.T, home, dir string) string {
			mustRun(t, opts(home, remote("a.example.org")))
			state := filepath.Join(dir, fingerprint.StateFile)
			b, _ := os.ReadFile(state)
			os.Remove(state)
			// the link's target holds the record render wrote: a start
			// that read through the link would find it right
			os.WriteFile(filepath.Join(home, "elsewhere-record"), b, 0o644)
			return state
		}, remote("b.example.org")},
		{"the backup of a rung change", func(t *testing.T, home, dir string) string {
			mustRun(t, opts(home, remote("a.example.org")))
			return backupName(filepath.Join(dir, "opencode.jsonc"), now)
		}, remote("b.example.org")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			dir := filepath.Join(home, ".config", "opencode")
			os.MkdirAll(dir, 0o755)
			cfg := filepath.Join(dir, "opencode.jsonc")
			os.WriteFile(cfg, []byte("{\n  // mine\n  \"theme\": \"x\"\n}\n"), 0o644)
			link := c.prepare(t, home, dir)
			victim := filepath.Join(t.TempDir(), "outside")
			const kept = "not render's to write\n"
			if b, err := os.ReadFile(filepath.Join(home, "elsewhere-record")); err == nil {
				os.WriteFile(victim, b, 0o644)
			} else {
				os.WriteFile(victim, []byte(kept), 0o644)
			}
			before, _ := os.ReadFile(victim)
			if err := os.Symlink(victim, link); err != nil {
				t.Fatal(err)
			}
			cfgBefore, _ := os.ReadFile(cfg)
			o := opts(home, c.env)
			o.Now = func() time.Time { return now }
			res := mustRun(t, o)
			if after, _ := os.ReadFile(victim); !bytes.Equal(after, before) {
				t.Errorf("the file %s links to was written through:\n%s", filepath.Base(link), after)
			}
			if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("the link %s is gone or replaced (%v)", link, err)
			}
			warn := strings.Join(res[0].Warnings, "\n")
			if res[0].Action != ActionSkipped || !strings.Contains(warn, link) || !strings.Contains(warn, "link") {
				t.Errorf("action %s, warnings %q: want skipped, naming %s as a link", res[0].Action, warn, link)
			}
			if got, _ := os.ReadFile(cfg); !bytes.Equal(got, cfgBefore) {
				t.Errorf("the config was written although its target was refused:\n%s", got)
			}
		})
	}
}

// A hard link at .proposed (another name for the same file) is replaced,
// not written in place: the other name keeps its bytes.
func TestOwnFileHardLinkIsReplacedNotWrittenInPlace(t *testing.T) {
	remote := func(host string) map[string]string {
		return map[string]string{"MEMPALACE_REMOTE_URL": "https://" + host + "/mcp", "MEMPALACE_REMOTE_TOKEN": "t"}
	}
	home := t.TempDir()
	dir := filepath.Join(home, ".config", "opencode")
	os.MkdirAll(dir, 0o755)
	cfg := filepath.Join(dir, "opencode.jsonc")
	os.WriteFile(cfg, []byte("{\n  \"theme\": \"x\"\n}\n"), 0o644)
	mustRun(t, opts(home, remote("a.example.org")))
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, bytes.Replace(b, []byte(`"enabled": true`), []byte(`"enabled": false`), 1), 0o644)
	other := filepath.Join(home, "other-name")
	os.WriteFile(other, []byte("mine\n"), 0o644)
	if err := os.Link(other, cfg+".proposed"); err != nil {
		t.Skipf("cannot hard-link here: %v", err)
	}
	res := mustRun(t, opts(home, remote("b.example.org")))
	if res[0].Action != "kept-user-edit" {
		t.Fatalf("action %s (%v)", res[0].Action, res[0].Warnings)
	}
	if got, _ := os.ReadFile(other); string(got) != "mine\n" {
		t.Errorf("the .proposed was written in place through its other name:\n%s", got)
	}
	if got, _ := os.ReadFile(cfg + ".proposed"); !bytes.Contains(got, []byte("b.example.org")) {
		t.Errorf(".proposed does not hold the environment's value:\n%s", got)
	}
}

func mustRun(t *testing.T, o Options) []Result {
	t.Helper()
	res, _, err := Run(o, false)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// plantingSys plants a link at plant right after the config is written:
// between the plan (which saw no link) and the record's write.
type plantingSys struct {
	OS
	config, plant, victim string
}

func (p plantingSys) WriteFile(name string, old, data []byte, perm os.FileMode) (filewrite.Result, error) {
	res, err := p.OS.WriteFile(name, old, data, perm)
	if name == p.config {
		os.Remove(p.plant)
		os.Symlink(p.victim, p.plant)
	}
	return res, err
}

// A link that appears after the plan, before render writes its record, is
// not written through either (the write itself refuses it).
func TestOwnFileLinkPlantedAfterThePlan(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, ".config", "opencode")
	os.MkdirAll(dir, 0o755)
	cfg := filepath.Join(dir, "opencode.jsonc")
	os.WriteFile(cfg, []byte("{\n  \"theme\": \"x\"\n}\n"), 0o644)
	victim := filepath.Join(t.TempDir(), "outside")
	os.WriteFile(victim, []byte("keep\n"), 0o644)
	state := filepath.Join(dir, fingerprint.StateFile)
	o := opts(home, map[string]string{"MEMPALACE_REMOTE_URL": "https://a.example.org/mcp"})
	o.Sys = plantingSys{config: cfg, plant: state, victim: victim}
	res := mustRun(t, o)
	if got, _ := os.ReadFile(victim); string(got) != "keep\n" {
		t.Errorf("the record was written through a link planted after the plan:\n%s", got)
	}
	if warn := strings.Join(res[0].Warnings, "\n"); res[0].Action != ActionSkipped || !strings.Contains(warn, state) {
		t.Errorf("action %s, warnings %q: want skipped, naming %s", res[0].Action, warn, state)
	}
}
