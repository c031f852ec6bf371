package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// An --env-file that does not parse is refused with the file, line and
// column of the mistake and its fix (before: godotenv's message alone,
// "unexpected character "\n" in variable name near ..."), and render
// writes nothing. Found by an outside tester.
func TestEnvFileErrorNamesLineColumnAndFix(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, src string
		want      []string
	}{
		{"no-equals.env", "MEMPALACE_REMOTE_URL=http://x/mcp\nMEMPALACE_EDGE 1\n",
			[]string{"no-equals.env:2:1: ", "MEMPALACE_EDGE has no =", "(fix: ", "NAME=value"}},
		{"unterminated.env", "MEMPALACE_REMOTE_URL=\"http://x/mcp\nMEMPALACE_EDGE=1\n",
			[]string{"unterminated.env:1:22: ", "never closed", "(fix: ", `closing "`}},
		{"bad-char.env", "# a comment\nA=1\nMEMPALACE-EDGE=1\n",
			[]string{"bad-char.env:3:10: ", `"-"`, "(fix: ", "letters, digits"}},
		{"export.env", "A=1\nexport C\nB=2\n",
			[]string{"export.env:2:1: ", "no =", "(fix: ", "NAME=value"}},
		{"crlf.env", "A=1\r\n  B 2\r\nC=3\r\n",
			[]string{"crlf.env:2:3: ", "no =", "(fix: "}},
		// godotenv takes these without an error, under the name "": the
		// variable the user meant would be lost without a word
		{"last-line.env", "A=1\nMEMPALACE_EDGE", []string{"last-line.env:2:1: ", "MEMPALACE_EDGE has no = after it, so the line is not NAME=value", "(fix: "}},
		{"no-name.env", "A=1\n  =1\n", []string{"no-name.env:2:3: ", "no name", "(fix: "}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			home := filepath.Join(dir, "home")
			os.Mkdir(home, 0o755)
			env := filepath.Join(dir, c.name)
			os.WriteFile(env, []byte(c.src), 0o600)
			for _, cmd := range [][]string{
				{"render", "--home", home, "--env-file", env},
				{"doctor", "--home", home, "--env-file", env},
			} {
				code, out, errOut := runCLI(cmd...)
				if code != 2 {
					t.Errorf("%s: exit %d, want 2\n%s%s", cmd[0], code, out, errOut)
				}
				for _, w := range c.want {
					if !strings.Contains(errOut, w) {
						t.Errorf("%s: stderr does not say %q:\n%s", cmd[0], w, errOut)
					}
				}
				if !strings.HasPrefix(errOut, "devbox-config: "+env+":") {
					t.Errorf("%s: stderr does not start with the file's name:\n%s", cmd[0], errOut)
				}
				if got := tree(t, home); len(got) != 0 {
					t.Errorf("%s wrote %q", cmd[0], got)
				}
				if b, _ := os.ReadFile(env); string(b) != c.src {
					t.Errorf("%s changed the env file", cmd[0])
				}
			}
		})
	}
}

// A gateway config with a misspelt key ("kag" for "kg"), a syntax error
// or a value of the wrong type is refused with the file, line and column
// and the fix (before: `json: unknown field "kag"`), by the commands that
// read it and those that would save it, which leave it as it was. Found by
// an outside tester.
func TestGatewayConfigErrorNamesLineColumnAndFix(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gateway.jsonc")
	if code, out, errOut := runCLI("gateway", "--config", cfg, "init"); code != 0 {
		t.Fatalf("init: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCLI("gateway", "--config", cfg, "device", "add", "laptop-7f3a", "--label", "laptop", "--read", "shared", "--kg", "read"); code != 0 {
		t.Fatalf("device add: exit %d\n%s%s", code, out, errOut)
	}
	good, _ := os.ReadFile(cfg)
	at := func(b []byte, sub string) string { // line:col of sub's first byte
		i := strings.Index(string(b), sub)
		if i < 0 {
			t.Fatalf("%q not in the config:\n%s", sub, b)
		}
		line := 1 + strings.Count(string(b[:i]), "\n")
		return fmt.Sprintf("%d:%d", line, i-strings.LastIndex(string(b[:i]), "\n"))
	}
	for _, c := range []struct {
		name, from, to, mark string
		want                 []string
	}{
		{"unknown key", `"kg": "read"`, `"kag": "read"`, `"kag"`,
			[]string{`unknown key "kag" in devices[0]`, `(fix: did you mean "kg"?`}},
		{"unknown top-level key", `"audit_log"`, `"audit_logs"`, `"audit_logs"`,
			[]string{`unknown key "audit_logs" at the top level`, `(fix: did you mean "audit_log"?`}},
		{"missing comma", `"label": "laptop",`, `"label": "laptop"`, "", // placed below
			[]string{"(fix: add the missing comma"}},
		{"wrong type", `"read": [`, `"read": "shared", "x": [`, `"shared"`,
			[]string{"devices[0].read is a string", "(fix: make it an array"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := strings.Replace(string(good), c.from, c.to, 1)
			if bad == string(good) {
				t.Fatalf("%q not in the config:\n%s", c.from, good)
			}
			os.WriteFile(cfg, []byte(bad), 0o600)
			pos := ""
			if c.name == "missing comma" {
				// the key after "label": "laptop", which now has no comma before it
				i := strings.Index(bad, c.to) + len(c.to)
				i += strings.Index(bad[i:], `"`)
				pos = fmt.Sprintf("%d:%d", 1+strings.Count(bad[:i], "\n"), i-strings.LastIndex(bad[:i], "\n"))
			} else {
				pos = at([]byte(bad), c.mark)
			}
			for _, args := range [][]string{
				{"device", "list"},
				{"device", "add", "desk-1", "--label", "desk"},
				{"token", "issue", "laptop-7f3a"},
			} {
				code, out, errOut := runCLI(append([]string{"gateway", "--config", cfg}, args...)...)
				if code == 0 {
					t.Fatalf("%v: exit 0\n%s", args, out)
				}
				if !strings.Contains(errOut, cfg+":"+pos+": ") {
					t.Errorf("%v: stderr does not name %s:%s:\n%s", args, cfg, pos, errOut)
				}
				for _, w := range c.want {
					if !strings.Contains(errOut, w) {
						t.Errorf("%v: stderr does not say %q:\n%s", args, w, errOut)
					}
				}
				if b, _ := os.ReadFile(cfg); string(b) != bad {
					t.Errorf("%v changed the config", args)
				}
			}
		})
	}
}

// render, doctor and join refuse an --env-file line that is not NAME=value
// without repeating it: it may hold the token (a token line with text after
// its closing quote, an invisible character in its name, a token alone on
// a line). Found by an outside tester: each was repeated whole.
func TestEnvFileErrorRepeatsNoToken(t *testing.T) {
	const tok = "sEcReTtOkEn-0123456789abcdefXYZ"
	for _, src := range []string{
		"MEMPALACE_REMOTE_URL=http://127.0.0.1:1/mcp\nMEMPALACE_REMOTE_TOKEN=\"" + tok + "\"junk\n",
		"MEMPALACE_REMOTE_URL=http://127.0.0.1:1/mcp\nMEMPALACE_REMOTE_TOKEN\u200b=" + tok + "\n",
		"MEMPALACE_REMOTE_URL=http://127.0.0.1:1/mcp\n" + tok + "\n",
	} {
		dir := t.TempDir()
		home := filepath.Join(dir, "home")
		os.Mkdir(home, 0o755)
		t.Setenv("HOME", home)
		env := filepath.Join(dir, "t.env")
		os.WriteFile(env, []byte(src), 0o600)
		for _, cmd := range [][]string{
			{"render", "--dry-run", "--env-file", env},
			{"doctor", "--env-file", env},
			{"join", "--dry-run", "--env-file", env},
		} {
			code, out, errOut := runCLI(cmd...)
			if code != 2 || !strings.HasPrefix(errOut, "devbox-config: "+env+":2:") || strings.Contains(out+errOut, tok[:11]) || strings.Contains(out+errOut, tok[12:]) {
				t.Errorf("%s on %q: exit %d, want 2, the place and no token:\n%s%s", cmd[0], src, code, out, errOut)
			}
		}
	}
}

// render warns of an edge timeout without its unit when it writes the edge
// entry, with the fix and what the edge does instead (its default). Found
// by an outside tester: render said nothing and the edge refused to start.
func TestRenderWarnsOfAnEdgeTimeoutWithoutUnit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	os.Mkdir(home, 0o755)
	env := filepath.Join(dir, "t.env")
	os.WriteFile(env, []byte("MEMPALACE_REMOTE_URL=http://127.0.0.1:1/mcp\nMEMPALACE_REMOTE_TOKEN=tok-0123456789abcdef\nMEMPALACE_EDGE=1\nMEMPALACE_EDGE_TIMEOUT=10\n"), 0o600)
	code, out, errOut := runCLI("render", "--dry-run", "--home", home, "--env-file", env)
	if code != 0 || !strings.Contains(errOut, `MEMPALACE_EDGE_TIMEOUT: \"10\" is not a positive duration with its unit; the edge uses the default, 10s (fix: MEMPALACE_EDGE_TIMEOUT=10s`) {
		t.Errorf("exit %d, want 0 and the warning with its fix:\n%s%s", code, out, errOut)
	}
}

// mailbox takes its timeout from MEMPALACE_EDGE_TIMEOUT: one without its
// unit is the default, and mailbox says so with the fix (before, it was a
// usage error; now the edge's default, which it would use silently).
func TestMailboxWarnsOfAnEdgeTimeoutWithoutUnit(t *testing.T) {
	for _, k := range []string{"MEMPALACE_AGENT_NAME", "MEMPALACE_EDGE", "MEMPALACE_ORIGIN_LABEL"} {
		t.Setenv(k, "")
	}
	t.Setenv("MEMPALACE_REMOTE_URL", "http://127.0.0.1:1/mcp")
	t.Setenv("MEMPALACE_REMOTE_TOKEN", "tok-0123456789abcdef")
	t.Setenv("MEMPALACE_EDGE_HARNESS", "opencode")
	t.Setenv("MEMPALACE_EDGE_TIMEOUT", "10")
	_, out, errOut := runCLI("mailbox")
	if !strings.Contains(errOut, "MEMPALACE_EDGE_TIMEOUT") || !strings.Contains(errOut, "(fix: MEMPALACE_EDGE_TIMEOUT=10s") {
		t.Errorf("no warning with the fix:\n%s%s", out, errOut)
	}
}

// render warns, one line on stderr, of a misspelt MEMPALACE_* name, with
// the name it may mean and doctor (attack73 F7: MEMPALACE_EGDE=1 left the
// devbox in remote mode and render said nothing); a name that is not
// MEMPALACE_*, or one MemPalace itself reads, changes nothing it prints
// (R1).
func TestRenderWarnsOfAMisspeltName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	os.Mkdir(home, 0o755)
	render := func(vars string) (string, string) {
		t.Helper()
		env := filepath.Join(dir, "t.env")
		os.WriteFile(env, []byte(vars), 0o600)
		code, out, errOut := runCLI("render", "--dry-run", "--home", home, "--env-file", env, "--target", "opencode")
		if code != 0 {
			t.Fatalf("%q: exit %d\n%s%s", vars, code, out, errOut)
		}
		return regexp.MustCompile(`"written_at": "[^"]*"`).ReplaceAllString(out, ""), errOut // the time of the dry run
	}
	const remote = "MEMPALACE_REMOTE_URL=http://127.0.0.1:1/mcp\nMEMPALACE_REMOTE_TOKEN=tok-0123456789abcdef\n"
	out0, err0 := render(remote)
	out, errOut := render(remote + "MEMPALACE_EGDE=1\n")
	if out != out0 || strings.Count(errOut, "\n") != strings.Count(err0, "\n")+1 ||
		!strings.Contains(errOut, "MEMPALACE_EGDE: is not a variable devbox-config or MemPalace reads; did you mean MEMPALACE_EDGE? (fix: rename MEMPALACE_EGDE to MEMPALACE_EDGE; `devbox-config doctor`") {
		t.Errorf("MEMPALACE_EGDE: want one more line, the warning, and the same stdout:\n%s\nbefore:\n%s\nstdout:\n%s\nbefore:\n%s", errOut, err0, out, out0)
	}
	blank0, blankErr0 := render("")
	for _, vars := range []string{"OTHER_VAR=1\n", "MEMPALACE_EMBEDDING_MODEL=minilm\nMEMPALACE_MCP_HTTP_TOKEN=x\n"} {
		if out, errOut := render(vars); out != blank0 || errOut != blankErr0 {
			t.Errorf("%q changed what render prints:\n%s%s\nwant\n%s%s", vars, out, errOut, blank0, blankErr0)
		}
	}
	// a MEMPALACE_* name in the wrong case is read by nothing: render stays
	// solitary (R1) and says so, as doctor's env-unknown does (attack114 F6)
	out, errOut = render("mempalace_remote_url=https://primary.example/mcp\n")
	if out != blank0 || strings.Count(errOut, "\n") != strings.Count(blankErr0, "\n")+1 ||
		!strings.Contains(errOut, "mempalace_remote_url: is not a variable devbox-config or MemPalace reads; did you mean MEMPALACE_REMOTE_URL? (fix: rename mempalace_remote_url to MEMPALACE_REMOTE_URL") {
		t.Errorf("mempalace_remote_url: want the same stdout (solitary) and one more line, the warning:\n%s\nbefore:\n%s\nstdout:\n%s", errOut, blankErr0, out)
	}
}

// render, doctor and join say of an --env-file that is a dangling link
// (a secrets volume not mounted) what it links to and the fix, not a bare
// "no such file" while ls shows the file (attack90 F3).
func TestEnvFileDanglingLinkNamesItsTarget(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	os.Mkdir(home, 0o755)
	t.Setenv("HOME", home)
	env := filepath.Join(dir, "dang.env")
	os.Symlink("/nonexistent/x.env", env)
	for _, cmd := range [][]string{
		{"render", "--dry-run", "--env-file", env},
		{"doctor", "--env-file", env},
		{"join", "--dry-run", "--env-file", env},
	} {
		code, out, errOut := runCLI(cmd...)
		if code != 2 || !strings.Contains(errOut, "a link to /nonexistent/x.env, which does not exist") || !strings.Contains(errOut, "fix: mount the volume") {
			t.Errorf("%s: exit %d, want 2 naming the link's target and the fix:\n%s%s", cmd[0], code, out, errOut)
		}
	}
}
