package memo

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/ladder"
)

// recorded is a memo of a start that read one file, lstat'ed a missing
// one, resolved a link, looked up a command and scanned a directory, as
// render's recording does, with env as the process environment.
type fixture struct {
	dir, file, missing, link, memoPath string
	env                                map[string]string
}

func newFixture(t *testing.T) *fixture {
	d := t.TempDir()
	fx := &fixture{dir: d, file: filepath.Join(d, "opencode.jsonc"), missing: filepath.Join(d, "opencode.json"),
		link: filepath.Join(d, "settings.json"), memoPath: filepath.Join(d, "cache", "render-memo"),
		env: map[string]string{"HOME": d, "MEMPALACE_REMOTE_URL": "https://p.example/mcp", "MEMPALACE_REMOTE_TOKEN": "s3cret-token", "PATH": filepath.Join(d, "bin")}}
	os.WriteFile(fx.file, []byte(`{"mcp": {}}`), 0o644)
	os.WriteFile(filepath.Join(d, "real.json"), []byte(`{}`), 0o644)
	os.Symlink("real.json", fx.link)
	os.Mkdir(filepath.Join(d, "bin"), 0o755)
	os.WriteFile(filepath.Join(d, "bin", "mempalace-mcp"), []byte("#!/bin/sh\n"), 0o755)
	return fx
}

func (fx *fixture) getenv(k string) (string, bool) { v, ok := fx.env[k]; return v, ok }

var args = []string{"render", "--home", "/h"}

// record runs the reads render would and saves the memo.
func (fx *fixture) record(t *testing.T, stderr string, exit int) {
	t.Helper()
	r := NewRecorder(args)
	env := r.Env(fx.getenv)
	for _, k := range []string{"HOME", "MEMPALACE_REMOTE_URL", "MEMPALACE_REMOTE_TOKEN", "MEMPALACE_EDGE"} {
		env(k)
	}
	t.Setenv("PATH", fx.env["PATH"])
	r.LookPath(exec.LookPath)("mempalace-mcp")
	var reads []FileRead
	b, err := os.ReadFile(fx.file)
	reads = append(reads, ReadRecord(fx.file, b, errText(err)))
	_, err = os.Stat(fx.missing)
	reads = append(reads, ReadRecord(fx.missing, nil, errText(err)))
	fi, err := os.Lstat(fx.missing)
	var mode os.FileMode
	if err == nil {
		mode = fi.Mode()
	}
	reads = append(reads, LstatRecord(fx.missing, mode, errText(err)))
	target, err := filepath.EvalSymlinks(fx.link)
	reads = append(reads, EvalRecord(fx.link, target, errText(err)))
	r.Files(reads)
	r.Dir(fx.dir, false)
	if err := r.Save(fx.memoPath, nil, []byte(stderr), exit, writeFile); err != nil {
		t.Fatal(err)
	}
}

func writeFile(path string, data []byte) error {
	os.MkdirAll(filepath.Dir(path), 0o700)
	return os.WriteFile(path, data, 0o600)
}

func (fx *fixture) holds(t *testing.T) bool {
	t.Helper()
	t.Setenv("PATH", fx.env["PATH"])
	return Load(fx.memoPath).Check(args, fx.getenv)
}

func TestMemoHoldsUntilAnInputChanges(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, fx *fixture)
		holds  bool
	}{
		{"nothing changed", func(t *testing.T, fx *fixture) {}, true},
		{"the token's value changed (render only uses blank or not)", func(t *testing.T, fx *fixture) { fx.env["MEMPALACE_REMOTE_TOKEN"] = "rotated" }, true},
		{"the file rewritten with the same bytes", func(t *testing.T, fx *fixture) { os.WriteFile(fx.file, []byte(`{"mcp": {}}`), 0o644) }, true},
		{"a variable changed", func(t *testing.T, fx *fixture) { fx.env["MEMPALACE_REMOTE_URL"] = "https://q.example/mcp" }, false},
		{"a variable set that was unset", func(t *testing.T, fx *fixture) { fx.env["MEMPALACE_EDGE"] = "" }, false},
		{"the token blank", func(t *testing.T, fx *fixture) { fx.env["MEMPALACE_REMOTE_TOKEN"] = "  " }, false},
		{"HOME changed", func(t *testing.T, fx *fixture) { fx.env["HOME"] = "/elsewhere" }, false},
		{"a byte of the file changed, same size", func(t *testing.T, fx *fixture) { os.WriteFile(fx.file, []byte(`{"mcp": []}`), 0o644) }, false},
		{"the file became a FIFO", func(t *testing.T, fx *fixture) { os.Remove(fx.file); syscall.Mkfifo(fx.file, 0o644) }, false},
		{"the file became a directory", func(t *testing.T, fx *fixture) { os.Remove(fx.file); os.Mkdir(fx.file, 0o755) }, false},
		{"the file became a link to the same bytes elsewhere", func(t *testing.T, fx *fixture) {
			os.WriteFile(filepath.Join(fx.dir, "copy"), []byte(`{"mcp": {}}`), 0o644)
			os.Remove(fx.file)
			os.Symlink("copy", fx.file)
		}, true},
		{"the file removed", func(t *testing.T, fx *fixture) { os.Remove(fx.file) }, false},
		{"the missing file appeared", func(t *testing.T, fx *fixture) { os.WriteFile(fx.missing, nil, 0o644) }, false},
		{"the missing file appeared as a dangling link", func(t *testing.T, fx *fixture) { os.Symlink("nowhere", fx.missing) }, false},
		{"the link retargeted", func(t *testing.T, fx *fixture) {
			os.WriteFile(filepath.Join(fx.dir, "other.json"), []byte(`{}`), 0o644)
			os.Remove(fx.link)
			os.Symlink("other.json", fx.link)
		}, false},
		{"the command no longer executable", func(t *testing.T, fx *fixture) { os.Chmod(filepath.Join(fx.dir, "bin", "mempalace-mcp"), 0o644) }, false},
		{"PATH changed", func(t *testing.T, fx *fixture) { fx.env["PATH"] = "/usr/bin:" + fx.env["PATH"] }, false},
		{"a temp file in a scanned directory", func(t *testing.T, fx *fixture) {
			os.WriteFile(filepath.Join(fx.dir, ".opencode.jsonc.tmp-0123456789abcdef"), nil, 0o600)
		}, false},
		{"a scanned directory unreadable", func(t *testing.T, fx *fixture) {
			if os.Getuid() == 0 {
				// root reads any directory; remove it instead
				os.RemoveAll(fx.dir + "/bin")
				return
			}
			os.Chmod(fx.dir, 0o300)
			t.Cleanup(func() { os.Chmod(fx.dir, 0o755) })
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fx := newFixture(t)
			fx.record(t, "level=WARN msg=x\n", 0)
			if !fx.holds(t) {
				t.Fatal("a fresh memo does not hold")
			}
			c.change(t, fx)
			done := make(chan bool, 1)
			go func() { done <- fx.holds(t) }()
			select {
			case got := <-done:
				if got != c.holds {
					t.Fatalf("after %s the memo holds=%v, want %v", c.name, got, c.holds)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the check blocked")
			}
		})
	}
}

func TestMemoOfAnotherCommandOrBinaryDoesNotHold(t *testing.T) {
	fx := newFixture(t)
	fx.record(t, "", 0)
	t.Setenv("PATH", fx.env["PATH"])
	m := Load(fx.memoPath)
	if m.Check([]string{"render", "--home", "/h", "--strict"}, fx.getenv) {
		t.Error("a memo of `render --home /h` answers `render --home /h --strict`")
	}
	m.Binary.ModTime++
	if m.Check(args, fx.getenv) {
		t.Error("a memo recorded by another build of the binary holds")
	}
}

func TestMemoFileNeverHoldsTheTokenOrTheFilesBytes(t *testing.T) {
	fx := newFixture(t)
	os.WriteFile(fx.file, []byte(`{"apiKey": "user-own-key-123"}`), 0o644)
	fx.record(t, "", 0)
	b, err := os.ReadFile(fx.memoPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"s3cret-token", "user-own-key-123", "https://p.example"} {
		if bytes.Contains(b, []byte(s)) {
			t.Errorf("the memo holds %q:\n%s", s, b)
		}
	}
	if fi, _ := os.Stat(fx.memoPath); fi.Mode().Perm() != 0o600 {
		t.Errorf("memo mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestSaveWritesOnlyAnswerableRunsAndOnlyWhenChanged(t *testing.T) {
	fx := newFixture(t)
	var writes int
	count := func(p string, b []byte) error { writes++; return writeFile(p, b) }
	r := NewRecorder(args)
	r.Env(fx.getenv)("HOME")
	r.Save(fx.memoPath, []byte("out"), nil, 0, count)
	r.Save(fx.memoPath, nil, nil, 2, count)
	if writes != 0 {
		t.Fatalf("a run with stdout or exit 2 was memoised (%d writes)", writes)
	}
	r.Save(fx.memoPath, nil, []byte("warn\n"), 1, count)
	r.Save(fx.memoPath, nil, []byte("warn\n"), 1, count)
	if writes != 1 {
		t.Fatalf("two identical runs wrote the memo %d times, want once", writes)
	}
	r.Spoil()
	os.Remove(fx.memoPath)
	r.Save(fx.memoPath, nil, nil, 0, count)
	if writes != 1 {
		t.Fatal("a spoiled run was memoised")
	}
	r2 := NewRecorder(args)
	r2.Dir(fx.dir, true)
	r2.Save(fx.memoPath, nil, nil, 0, count)
	if writes != 1 {
		t.Fatal("a run that saw a temp file was memoised")
	}
	var nilRec *Recorder
	nilRec.Files(nil)
	nilRec.Dir("x", false)
	if !nilRec.Spoiled() || nilRec.Env(fx.getenv) == nil {
		t.Fatal("a nil Recorder is not a no-op")
	}
}

func TestAnswerPrintsTheRecordedOutput(t *testing.T) {
	fx := newFixture(t)
	fx.record(t, "level=WARN msg=\"kept your edit\" target=opencode\n", 1)
	// Answer finds the memo from --home: put it where Path says.
	home := t.TempDir()
	p, _, _ := Path(home, fx.getenv)
	b, _ := os.ReadFile(fx.memoPath)
	b = bytes.Replace(b, []byte("arg \"/h\""), []byte("arg \""+home+"\""), 1)
	writeFile(p, b)
	out, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", fx.env["PATH"])
	code, ok := Answer([]string{"devbox-config", "render", "--home", home}, fx.getenv, out)
	got, _ := os.ReadFile(out.Name())
	if !ok || code != 1 || string(got) != "level=WARN msg=\"kept your edit\" target=opencode\n" {
		t.Fatalf("Answer = %d, %v, printed %q", code, ok, got)
	}
	if _, ok := Answer([]string{"devbox-config", "render", "--home", home, "--dry-run"}, fx.getenv, out); ok {
		t.Fatal("a dry run was answered from the memo")
	}
}

func TestCommand(t *testing.T) {
	for _, c := range []struct {
		args []string
		home string
		ok   bool
	}{
		{[]string{"render"}, "", true},
		{[]string{"render", "--home", "/h", "--target", "opencode,pi", "--strict", "--reclaim"}, "/h", true},
		{[]string{"render", "--home=/h", "--target=pi"}, "/h", true},
		{[]string{"render", "--home", "rel"}, "", false},
		{[]string{"render", "--home"}, "", false},
		{[]string{"render", "--dry-run"}, "", false},
		{[]string{"render", "--diff"}, "", false},
		{[]string{"render", "--json"}, "", false},
		{[]string{"render", "--env-file", "/e"}, "", false},
		{[]string{"render", "--pi-template", "/t"}, "", false},
		{[]string{"render", "--strict=false"}, "", false},
		{[]string{"render", "-h"}, "", false},
		{[]string{"render", "extra"}, "", false},
		{[]string{"edge"}, "", false},
		{nil, "", false},
	} {
		home, ok := Command(c.args)
		if home != c.home || ok != c.ok {
			t.Errorf("Command(%q) = %q, %v; want %q, %v", c.args, home, ok, c.home, c.ok)
		}
	}
}

func TestFormatRoundTrip(t *testing.T) {
	m := &Memo{
		Binary: Binary{Path: "/usr/local/bin/devbox config\n", Size: 1, ModTime: -2, Inode: 3},
		Args:   []string{"render", "--home", "/h \"q\""},
		Env:    []EnvRead{envRead("A", "x", true), envRead("MEMPALACE_REMOTE_TOKEN", "", false), envRead("MEMPALACE_UPSTREAM_TOKEN", "t", true)},
		Paths:  []PathRead{{Name: "mempalace-mcp", Path: "/b/mempalace-mcp", Found: true}, {Name: "devbox-config"}},
		Files: []FileRead{ReadRecord("/a b", []byte("x"), ""), ReadRecord("/c", nil, "stat /c: no such file or directory"),
			LstatRecord("/d", os.ModeDir|0o755, ""), EvalRecord("/e", "/f", "")},
		Dirs:   []string{"/a", "/ä\t"},
		Stderr: "level=WARN msg=\"a\\b\"\n\x00",
		Exit:   1,
	}
	got, err := parse(m.encode())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.encode(), m.encode()) {
		t.Fatalf("round trip changed the memo:\n%s\n%s", m.encode(), got.encode())
	}
	for _, bad := range []string{"", "devbox-config render memo 1\n", header + "\nbinary \"x\" 1 2\nexit 0\nstderr \"\"\narg \"render\"\n", header + "\nnosuch\n"} {
		if _, err := parse([]byte(bad)); err == nil {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
}

func FuzzParse(f *testing.F) {
	m := &Memo{Binary: Binary{Path: "/b"}, Args: []string{"render"}, Env: []EnvRead{envRead("A", "x", true)}, Stderr: "x\n"}
	f.Add(m.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parse(b)
		if err != nil {
			return
		}
		if again, err := parse(m.encode()); err != nil || !bytes.Equal(again.encode(), m.encode()) {
			t.Fatalf("a parsed memo does not survive encode/parse: %v", err)
		}
	})
}

func TestSecretNames(t *testing.T) {
	for name, want := range map[string]bool{"MEMPALACE_REMOTE_TOKEN": true, "MEMPALACE_UPSTREAM_TOKEN": true, "MEMPALACE_REMOTE_URL": false, "TOKEN": false, "MEMPALACE_TOKENS": false} {
		if Secret(name) != want {
			t.Errorf("Secret(%q) = %v", name, !want)
		}
	}
	if !strings.HasPrefix(header, "devbox-config render memo") {
		t.Fatal(header)
	}
}

// The memo keeps only blank-or-not of exactly the variables the ladder
// keeps only that of (Settings.TokenSet; the token itself is never kept),
// and sums every other variable render reads.
func TestSecretsAreTheLaddersTokens(t *testing.T) {
	for _, v := range append(slices.Clone(ladder.Vars), ladder.EnvUpstreamToken, ladder.EnvPalacePath) {
		want := v == ladder.EnvRemoteToken || v == ladder.EnvUpstreamToken
		if Secret(v) != want {
			t.Errorf("Secret(%s) = %v, want %v", v, !want, want)
		}
	}
}

func TestBuildIDIsGoToolBuildid(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "tool", "buildid", exe).Output()
	if err != nil {
		t.Skipf("go tool buildid: %v", err)
	}
	b, err := self()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.BuildID, strings.TrimSpace(string(out)); got != want || got == "" {
		t.Fatalf("buildID = %q, go tool buildid = %q", got, want)
	}
	if buildID(strings.NewReader("not a Go binary, Go\x00\x00 without a note")) != "" {
		t.Fatal("a build ID found in a file that is not a Go binary")
	}
}

func TestURLCredentialsLeaveNoMemo(t *testing.T) {
	for v, want := range map[string]bool{"https://u:p@h/mcp": true, "https://u@h": true, "https://h/a@b": false, "https://h/mcp": false, "a@b": false, "x https://h:1@": true} {
		r := NewRecorder(args)
		r.Env(func(string) (string, bool) { return v, true })("MEMPALACE_REMOTE_URL")
		if r.Spoiled() != want {
			t.Errorf("recording %q: spoiled=%v, want %v", v, !want, want)
		}
	}
}

func TestRepeatedReadsAreCheckedOnce(t *testing.T) {
	r := NewRecorder(args)
	a, b := LstatRecord("/x", 0o644, ""), LstatRecord("/x", 0o600, "")
	r.Files([]FileRead{a, a, ReadRecord("/x", []byte("1"), "")})
	r.Files([]FileRead{a, b})
	if want := []FileRead{a, ReadRecord("/x", []byte("1"), ""), b}; !slices.Equal(r.files, want) {
		t.Fatalf("recorded %v, want %v (one of each answer, in order)", r.files, want)
	}
}
