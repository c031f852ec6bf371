package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/joakimp/devbox-config/doctor"
	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed"
)

// clearLadder empties the process's MEMPALACE_* variables for a test.
func clearLadder(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "MEMPALACE_") {
			t.Setenv(k, "")
		}
	}
}

// installed makes ~/.mempalace an install of MemPalace (its config.json),
// whose palace is ~/.mempalace/palace.
func installed(t *testing.T, home string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(home, ".mempalace"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".mempalace", "config.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func doctorCLI(t *testing.T, want int, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if got := run(append([]string{"doctor"}, args...), &out, &errb); got != want {
		t.Fatalf("doctor %v: exit %d, want %d\n%s%s", args, got, want, out.String(), errb.String())
	}
	return out.String() + errb.String()
}

func kgFile(t *testing.T, path string, rows int) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o700)
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE triples(id TEXT)`); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < rows; i++ {
		db.Exec(`INSERT INTO triples VALUES('x')`)
	}
}

func TestDoctorExitCodesAndJSON(t *testing.T) {
	clearLadder(t)
	home := t.TempDir()
	var clean struct {
		Findings []map[string]any `json:"findings"`
	}
	out := doctorCLI(t, 0, "--home", home, "--json")
	if err := json.Unmarshal([]byte(out), &clean); err != nil || clean.Findings == nil || len(clean.Findings) != 0 {
		t.Fatalf("clean --json should be {\"findings\": []}: %v %s", err, out)
	}
	if out := doctorCLI(t, 0, "--home", home); !strings.Contains(out, "nothing to fix") {
		t.Fatalf("%s", out)
	}

	installed(t, home)
	kgFile(t, filepath.Join(home, ".mempalace", "knowledge_graph.sqlite3"), 2)
	kgFile(t, filepath.Join(home, ".mempalace", "palace", "knowledge_graph.sqlite3"), 1)
	out = doctorCLI(t, 1, "--home", home, "--json")
	var doc map[string][]map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc) != 1 || len(doc["findings"]) != 1 {
		t.Fatalf("want exactly one finding under \"findings\": %v %s", err, out)
	}
	var keys []string
	for k := range doc["findings"][0] {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if strings.Join(keys, ",") != "fix,id,message,section,severity" || doc["findings"][0]["id"] != "kg-split" || doc["findings"][0]["severity"] != "error" {
		t.Fatalf("finding shape: %v", doc["findings"][0])
	}
	if out := doctorCLI(t, 1, "--home", home); !strings.Contains(out, "error kg-split (§7.1)") || !strings.Contains(out, "fix: ") {
		t.Fatalf("%s", out)
	}

	doctorCLI(t, 2, "--home", home, "--bogus")
	doctorCLI(t, 2, "--home", home, "extra")
	doctorCLI(t, 2, "--home", home, "--env-file", filepath.Join(home, "missing.env"))
}

func TestDoctorFix(t *testing.T) {
	clearLadder(t)
	home := t.TempDir()
	hk := filepath.Join(home, ".mempalace", "knowledge_graph.sqlite3")
	pk := filepath.Join(home, ".mempalace", "palace", "knowledge_graph.sqlite3")
	installed(t, home)
	kgFile(t, hk, 4)
	kgFile(t, pk, 0)
	doctorCLI(t, 1, "--home", home)
	out := doctorCLI(t, 0, "--home", home, "--fix")
	if !strings.Contains(out, "fix: kg-split: "+hk+" now links to palace/knowledge_graph.sqlite3") || !strings.Contains(out, "nothing to fix") {
		t.Fatalf("%s", out)
	}
	if l, err := os.Readlink(hk); err != nil || l != "palace/knowledge_graph.sqlite3" {
		t.Fatalf("%q %v", l, err)
	}

	// Both hold data: refused, exit 1, the JSON stays the findings object.
	home = t.TempDir()
	installed(t, home)
	kgFile(t, filepath.Join(home, ".mempalace", "knowledge_graph.sqlite3"), 1)
	kgFile(t, filepath.Join(home, ".mempalace", "palace", "knowledge_graph.sqlite3"), 1)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"doctor", "--home", home, "--fix", "--json"}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d", code)
	}
	var doc map[string][]map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil || doc["findings"][0]["id"] != "kg-split" {
		t.Fatalf("%v %s", err, stdout.String())
	}
	if !strings.Contains(stderr.String(), "refused") {
		t.Fatalf("stderr should say the fix was refused: %s", stderr.String())
	}
}

// Every path that could echo the token: a readable .env holding it, a
// config holding it literally, a primary refusing it, --json and --fix.
func TestDoctorNeverPrintsTheToken(t *testing.T) {
	clearLadder(t)
	const tok = "tok-NEVER-print-9f8e7d6c5b"
	_, srv := testbed.Primary(t, fakepalace.Options{Dir: t.TempDir()}, fakepalace.HTTPOptions{Token: "the-primarys-own-token"})
	home := t.TempDir()
	env := filepath.Join(home, ".env")
	os.WriteFile(env, []byte("MEMPALACE_REMOTE_URL="+srv.URL()+"\nMEMPALACE_REMOTE_TOKEN="+tok+"\n"), 0o644)
	os.Chmod(env, 0o644)
	cfg := filepath.Join(home, ".config", "opencode", "opencode.jsonc")
	os.MkdirAll(filepath.Dir(cfg), 0o700)
	os.WriteFile(cfg, []byte(`{"mcp": {"mempalace": {"headers": {"Authorization": "Bearer `+tok+`"}}}}`), 0o600)

	for _, args := range [][]string{{}, {"--json"}, {"--fix"}, {"--json", "--fix"}} {
		out := doctorCLI(t, 1, append([]string{"--home", home, "--env-file", env}, args...)...)
		if strings.Contains(out, tok) || strings.Contains(out, tok[4:20]) {
			t.Fatalf("doctor %v printed the token:\n%s", args, out)
		}
		for _, id := range []string{"env-permissions", "token-in-config", "primary-auth"} {
			if !strings.Contains(out, id) {
				t.Fatalf("doctor %v: no %s finding:\n%s", args, id, out)
			}
		}
	}
}

// brokenEnv is one of testdata/broken-env/*.env: a .env with one mistake,
// its name says which; its "# want:" and "# fix:" lines say the finding
// doctor must give and a piece of its fix.
type brokenEnv struct{ path, want, fix string }

func brokenEnvFiles(t *testing.T) []brokenEnv {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "broken-env", "*.env"))
	if err != nil || len(paths) < 10 {
		t.Fatalf("want at least ten broken .env files, found %d (%v)", len(paths), err)
	}
	var out []brokenEnv
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		e := brokenEnv{path: p}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "# want: "); ok {
				e.want = v
			}
			if v, ok := strings.CutPrefix(l, "# fix: "); ok {
				e.fix = v
			}
		}
		if e.want == "" || e.fix == "" {
			t.Fatalf("%s: no '# want:' or '# fix:' line", p)
		}
		out = append(out, e)
	}
	return out
}

// doctor on each broken .env: a finding that names the fix, and never exit
// 0 (before: a URL without a scheme, a misspelled variable and
// MEMPALACE_EDGE=yes all passed with "nothing to fix"). The files are
// copied 0600 first, so env-permissions is not what fails them, and no
// secret in them (a token, a URL's password) is printed.
func TestDoctorBrokenEnvFiles(t *testing.T) {
	clearLadder(t)
	for _, e := range brokenEnvFiles(t) {
		t.Run(filepath.Base(e.path), func(t *testing.T) {
			home := t.TempDir()
			b, _ := os.ReadFile(e.path)
			env := filepath.Join(home, ".env")
			if err := os.WriteFile(env, b, 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			code := run([]string{"doctor", "--home", home, "--env-file", env, "--timeout", "300ms", "--json"}, &out, &errb)
			if code == 0 {
				t.Fatalf("exit 0 on %s:\n%s", e.path, out.String())
			}
			var doc struct{ Findings []doctorFinding }
			if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
				t.Fatalf("exit %d, not JSON: %v\n%s%s", code, err, out.String(), errb.String())
			}
			found := false
			for _, f := range doc.Findings {
				found = found || f.ID == e.want && strings.Contains(f.Fix, e.fix)
			}
			if !found {
				t.Errorf("no %s finding whose fix says %q:\n%s", e.want, e.fix, out.String())
			}
			for _, secret := range []string{"Qm7vR2xK9pL4wT8nY3cF6hJ1", "Zr5tW8yB2nM6qK1xV4cJ7hL0"} {
				if strings.Contains(out.String()+errb.String(), secret) {
					t.Errorf("printed a secret from the file:\n%s", out.String())
				}
			}
		})
	}
}

type doctorFinding struct{ ID, Severity, Section, Message, Fix string }

// TestDoctorHelpListsEveryFindingID: `doctor --help` promises stable finding
// ids for scripts; every id doctor can emit is in it (the outbox's and pi's
// among them).
func TestDoctorHelpListsEveryFindingID(t *testing.T) {
	t.Parallel()
	code, out, _ := runCLI("doctor", "--help")
	if code != 0 {
		t.Fatalf("doctor --help: exit %d", code)
	}
	var ids []string
	for _, k := range doctor.Catalogue() {
		ids = append(ids, k.IDs...)
	}
	for _, id := range append(ids, "outbox-held", "outbox-in-doubt", "outbox-intents", "outbox-stayed-local", "stayed-local-record", "pi-extension-no-edge") {
		if !regexp.MustCompile(`(^|[\s,])` + regexp.QuoteMeta(id) + `(,|\s)`).MatchString(out) {
			t.Errorf("doctor --help does not list the finding id %s", id)
		}
	}
}
