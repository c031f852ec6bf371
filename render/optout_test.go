package render

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/filewrite"
	"github.com/joakimp/devbox-config/fingerprint"
	"github.com/joakimp/devbox-config/harness"
)

// Opting in and then out leaves every harness's file exactly as a render
// that never opted in leaves it (R1): for every harness with an entry,
// for a few representative files of its format, render inserts the entry
// (with MEMPALACE_* set, or with mempalace-mcp on PATH and --target) and
// the next start without the variables, with mempalace-mcp still there
// or not, gives the bytes a start with the same environment gives the
// same original file in a home render never wrote: the user's own bytes
// for an opt-in harness (the entry and the map render created for it go),
// the stdio entry the images wrote for opencode and pi-mcp-adapter while
// mempalace-mcp is there. (Outside tester attack49 F5: pi-mcp-adapter's
// entry went, where a never-opted-in start writes the stdio one.)
//
// The record keeps what that needs beyond the entry: the map render
// created ("created") and the text of the empty object or YAML line it
// inserted into ("was"), never the whole file. The one case that comes
// back as the same value but not the same bytes (semanticOnly): a blank
// file (white space only) comes back as render reads it, empty, or {} in
// JSON (which the harness would refuse blank).
func TestOptingOutIsNeverHavingOptedIn(t *testing.T) {
	for _, rec := range harness.All() {
		if rec.Settings != nil {
			continue // pi's settings merge has no entry to take back
		}
		t.Run(rec.Name, func(t *testing.T) {
			t.Parallel() // each case waits on fsyncs, not the CPU
			optInThenOut(t, rec)
		})
	}
}

// optInThenOut opts in to rec (with the variables, or with mempalace-mcp
// on PATH and --target) and out again at a start, for each original file:
// the variables removed, mempalace-mcp still there or gone too; and
// compares the file with never opting in.
func optInThenOut(t *testing.T, rec harness.Record) {
	remote := map[string]string{"MEMPALACE_REMOTE_URL": "https://p.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": "t"}
	for _, orig := range originals(rec) {
		for _, c := range []struct {
			in        map[string]string
			serverOut bool
		}{
			{remote, false},
			{remote, true},
			{nil, false},
		} {
			if c.in == nil && rec.Scope != harness.Always {
				continue // only --target adds one; the variables are the way in
			}
			name := fmt.Sprintf("%s %q, in with variables %v, out with mempalace-mcp still there %v", rec.Name, orig, c.in != nil, c.serverOut)
			file, home := originalIn(t, rec, orig)
			neverFile, neverHome := originalIn(t, rec, orig)
			in := opts(home, c.in)
			in.Sys, in.Targets = unsynced{}, []string{rec.Name}
			if _, _, err := Run(in, false); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(file); !bytes.Contains(got, []byte(harness.Server)) {
				t.Errorf("%s: opting in added no entry:\n%s", name, got)
				continue
			}
			got := startWithout(t, home, file, c.serverOut)
			never := startWithout(t, neverHome, neverFile, c.serverOut)
			if bytes.Equal(got, never) {
				continue
			}
			if reason, ok := semanticOnly(rec, orig); ok && sameValue(t, rec, got, never) {
				t.Logf("%s: %s: %q", name, reason, got)
				continue
			}
			t.Errorf("%s: opting out left\n%q\nnever opting in leaves\n%q", name, got, never)
		}
	}
}

// originalIn is a home holding orig as rec's file, its harness set up.
func originalIn(t *testing.T, rec harness.Record, orig string) (file, home string) {
	home = t.TempDir()
	env := harness.Env{Home: home, HomeFromFlag: true}
	file = filepath.Join(rec.Location.DirPath(env), rec.Location.Write[0])
	os.MkdirAll(filepath.Dir(file), 0o755)
	os.MkdirAll(rec.Location.MarkerPath(env), 0o755)
	if err := os.WriteFile(file, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	return file, home
}

// startWithout is a start with no MEMPALACE_* variables (serverOut:
// mempalace-mcp still on PATH) in home, and the file it leaves.
func startWithout(t *testing.T, home, file string, serverOut bool) []byte {
	out := opts(home, nil)
	out.Sys = unsynced{}
	if !serverOut {
		out.LookPath = func(string) (string, error) { return "", errors.New("not found") }
	}
	if _, _, err := Run(out, false); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(file)
	return got
}

// originals are representative files of rec's format, its map (empty, or
// holding the user's own server) in some, absent in others.
func originals(rec harness.Record) []string {
	k := rec.Key[0]
	switch rec.Format {
	case harness.TOML:
		return []string{
			"", "\n", "model = \"x\"\n", "model = \"x\"", "model = \"x\"\r\n",
			"# mine\nmodel = \"x\"\n\n[" + k + ".other]\ncommand = \"y\"\n",
			"[" + k + "]\n",
		}
	case harness.YAML:
		if rec.ListKey != "" {
			return []string{
				"name: x\n", "name: x", "name: x\r\n",
				k + ":\n  - name: other\n    command: y\n",
				k + ": []\n", k + ":\n",
			}
		}
		return []string{
			"", "\n", "a: 1\n", "a: 1", "a: 1\r\n", "# mine\na: 1\n\n",
			"# mine\n" + k + ":\n  other:\n    cmd: y\n", k + ": {}\n", k + ": { }\n", k + ":\n", "a: 1\n" + k + ": ~\n",
		}
	}
	q := `"` + k + `"`
	out := []string{"{}", "{\"theme\":\"dark\"}", "{\n  \"theme\": \"dark\"\n}\n", "{" + q + ":{}}\n"}
	if rec.Name != "opencode" && rec.Name != "claude-code" && rec.Name != "gemini" {
		return out // the same splice as theirs, under another key
	}
	out = append(out, "", "\n", "{}\n", "{ }", "{\n}\n", "{\n\n}\n", "{\r\n  \"theme\": \"dark\"\r\n}\r\n",
		"{\n  "+q+": {\n    \"other\": {\"command\": \"y\"}\n  }\n}\n", "{\n  \"a\": 1,\n  "+q+": { }\n}\n")
	if rec.Format != harness.JSON {
		out = append(out, "// mine\n{\n  \"theme\": \"dark\" // c\n}\n", "{\n  // nothing yet\n}\n")
	}
	if rec.Format == harness.JSONC {
		out = append(out, "// mine\n{\n  \"theme\": \"dark\", // c\n}\n")
	}
	return out
}

// semanticOnly says why a file is given back as the same value rather
// than the same bytes (see the test's comment), if it is.
func semanticOnly(rec harness.Record, orig string) (string, bool) {
	if strings.TrimSpace(orig) == "" {
		return "a blank file comes back as render reads it: empty, or {} in JSON", true
	}
	return "", false
}

// sameValue reports whether two files of rec's format hold the same value.
func sameValue(t *testing.T, rec harness.Record, a, b []byte) bool {
	t.Helper()
	val := func(data []byte) []byte {
		doc, err := parse(rec, data)
		if err != nil {
			t.Fatalf("%q does not parse: %v", data, err)
		}
		v, err := doc.Get()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	same, err := fingerprint.Equal(val(a), val(b))
	return err == nil && same
}

// unsynced writes without fsync: these tests are about bytes, and several
// hundred renders would otherwise wait on the disk for seconds.
type unsynced struct{ OS }

func (unsynced) WriteFile(name string, _, data []byte, perm fs.FileMode) (filewrite.Result, error) {
	return filewrite.Result{}, os.WriteFile(name, data, perm)
}

func (unsynced) WriteOwn(name string, data []byte, perm fs.FileMode) error {
	return os.WriteFile(name, data, perm)
}

// An unreadable record keeps the entry render wrote after the variables
// are gone (render cannot tell it from your edit) and writes nothing (R1);
// its warning names the way out, and following it removes the entry
// (before, the warning had no fix).
func TestUnreadableRecordWarningNamesTheWayOut(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, ".codex")
	os.MkdirAll(dir, 0o755)
	file, record := filepath.Join(dir, "config.toml"), filepath.Join(dir, fingerprint.StateFile)
	os.WriteFile(file, []byte("# mine\nmodel = \"o3\"\n"), 0o644)
	gone := func(string) (string, error) { return "", errors.New("not found") }
	in := opts(home, map[string]string{"MEMPALACE_REMOTE_URL": "https://p.example.org/mcp", "MEMPALACE_REMOTE_TOKEN": "t"})
	in.Targets = []string{"codex"}
	if _, _, err := Run(in, false); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(record, []byte(`{"broken`), 0o600)
	cfg0, _ := os.ReadFile(file)
	out := opts(home, nil)
	out.LookPath, out.Targets = gone, []string{"codex"}
	res, _, err := Run(out, false)
	if err != nil {
		t.Fatal(err)
	}
	warn := strings.Join(res[0].Warnings, "\n")
	if !strings.Contains(warn, "`devbox-config render --reclaim --target codex`") || !strings.Contains(warn, "`rm "+record+"`") {
		t.Errorf("the warning names no way out:\n%s", warn)
	}
	if cfg, _ := os.ReadFile(file); !bytes.Equal(cfg, cfg0) {
		t.Errorf("render changed the config with no variables and no record:\n%s", cfg)
	}
	if rec, _ := os.ReadFile(record); string(rec) != `{"broken` {
		t.Errorf("render rewrote the record with no variables: %s", rec)
	}
	out.Reclaim = true
	res, _, err = Run(out, false)
	if err != nil {
		t.Fatal(err)
	}
	// The run that reclaims does not tell to run --reclaim (attack41 N9).
	if warn := strings.Join(res[0].Warnings, "\n"); strings.Contains(warn, "`devbox-config render --reclaim") || !strings.Contains(warn, "--reclaim sets the mempalace entry") {
		t.Errorf("the reclaiming run's warning:\n%s", warn)
	}
	if cfg, _ := os.ReadFile(file); string(cfg) != "# mine\nmodel = \"o3\"\n" {
		t.Errorf("the fix left:\n%s", cfg)
	}
}
