package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An --env-file that does not parse is refused with the file, line and
// column of the mistake and its fix (before: godotenv's message alone,
// "unexpected character "\n" in variable name near ..."), and render
// writes nothing. Found by an outside tester.
func TestEnvFileErrorNamesLineColumnAndFix(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      []string
	}{
		{"no-equals.env", "MEMPALACE_REMOTE_URL=http://x/mcp\nMEMPALACE_EDGE 1\n",
			[]string{"no-equals.env:2:1: ", `"MEMPALACE_EDGE 1"`, "(fix: ", "NAME=value"}},
		{"unterminated.env", "MEMPALACE_REMOTE_URL=\"http://x/mcp\nMEMPALACE_EDGE=1\n",
			[]string{"unterminated.env:1:22: ", "never closed", "(fix: ", `closing "`}},
		{"bad-char.env", "# a comment\nA=1\nMEMPALACE-EDGE=1\n",
			[]string{"bad-char.env:3:10: ", `"-"`, "(fix: ", "letters, digits"}},
		{"export.env", "A=1\nexport C\nB=2\n",
			[]string{"export.env:2:1: ", `"export C"`, "(fix: ", "NAME=value"}},
		{"crlf.env", "A=1\r\n  B 2\r\nC=3\r\n",
			[]string{"crlf.env:2:3: ", `"B 2"`, "(fix: "}},
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
