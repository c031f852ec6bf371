package confpos

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const envTok = "sEcReTtOkEn-0123456789abcdefXYZ"

// A .env line that is not NAME=value is placed and explained without
// repeating it: the line may hold the token (a token line missing its =,
// text after a quoted token, an invisible character in the name). The
// message names the variable only where it is a name (before the =).
// Found by an outside tester: every one of these printed the token.
func TestReadEnvRepeatsNoValue(t *testing.T) {
	for _, c := range []struct {
		name, src string
		want      []string
	}{
		{"no-equals", "A=1\nMEMPALACE_REMOTE_TOKEN " + envTok + "\n",
			[]string{"f.env:2:1: ", "MEMPALACE_REMOTE_TOKEN", "no =", "(fix: ", "NAME=value"}},
		{"token-alone", "A=1\n" + envTok + "\nB=2\n",
			[]string{"f.env:2:1: ", "no =", "(fix: "}},
		{"token-alone-last", "A=1\n" + envTok,
			[]string{"f.env:2:1: ", "no =", "(fix: "}},
		{"no-name", "A=1\n=" + envTok + "\n",
			[]string{"f.env:2:1: ", "no name", "(fix: "}},
		{"junk-after-quote", "A=1\nMEMPALACE_REMOTE_TOKEN=\"" + envTok + "\"junk\n",
			[]string{"f.env:2:57: ", "MEMPALACE_REMOTE_TOKEN", "closing quote", "(fix: "}},
		{"zero-width-space", "A=1\nMEMPALACE_REMOTE_TOKEN\u200b=" + envTok + "\n",
			[]string{"f.env:2:23: ", "MEMPALACE_REMOTE_TOKEN", "U+200B", "invisible", "(fix: ", "delete"}},
		{"quoted-name", "A=1\n\"MEMPALACE_REMOTE_TOKEN\"=" + envTok + "\n",
			[]string{"f.env:2:1: ", "quotes", "(fix: "}},
		{"space-in-name", "A=1\nMEMPALACE_REMOTE_TOKEN " + envTok + "==\n",
			[]string{"f.env:2:23: ", "MEMPALACE_REMOTE_TOKEN", "space", "(fix: "}},
		{"unterminated", "A=1\nMEMPALACE_REMOTE_TOKEN=\"" + envTok + "\n",
			[]string{"f.env:2:24: ", "never closed", "(fix: "}},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "f.env")
			os.WriteFile(file, []byte(c.src), 0o600)
			_, err := ReadEnv(file)
			if err == nil {
				t.Fatalf("%q read without an error", c.src)
			}
			msg := strings.TrimPrefix(err.Error(), filepath.Dir(file)+"/")
			if strings.Contains(msg, envTok) || strings.Contains(msg, envTok[:11]) || strings.Contains(msg, envTok[12:]) {
				t.Errorf("the error repeats the token: %s", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("the error does not say %q: %s", w, msg)
				}
			}
		})
	}
}

// A .env that Windows Notepad saved begins with a UTF-8 byte order mark:
// it is read as Docker Compose's env_file reads it (the mark dropped), so
// the first variable keeps its name, and a mistake on line 1 is placed at
// the column an editor shows (the mark is invisible there).
func TestReadEnvLeadingBOM(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.env")
	os.WriteFile(file, []byte("\ufeffMEMPALACE_REMOTE_TOKEN="+envTok+"\nMEMPALACE_REMOTE_URL=http://127.0.0.1:1/mcp\n"), 0o600)
	vars, err := ReadEnv(file)
	if err != nil || vars["MEMPALACE_REMOTE_TOKEN"] != envTok || len(vars) != 2 {
		t.Errorf("got %q, %v; want the token under its name", vars, err)
	}
	os.WriteFile(file, []byte("\ufeffMEMPALACE-EDGE=1\n"), 0o600)
	if _, err := ReadEnv(file); err == nil || !strings.Contains(err.Error(), "f.env:1:10: ") {
		t.Errorf("got %v, want the mistake at 1:10", err)
	}
}

// A name assigned twice is found on each of its lines, as godotenv reads
// the file, not inside a quoted value that spans lines (attack88 F3).
func TestEnvAssignmentsNamesEachLine(t *testing.T) {
	src := "\ufeff# c\r\nMEMPALACE_REMOTE_URL=http://a/mcp\r\nexport MEMPALACE_EDGE=1\nMEMPALACE_REMOTE_TOKEN=\"two\nMEMPALACE_EDGE=0\nlines\"\n  MEMPALACE_REMOTE_URL=\nX='a\\'\nMEMPALACE_EDGE=8' # c\nMEMPALACE_EDGE=9\n"
	file := filepath.Join(t.TempDir(), ".env")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if vars, err := ReadEnv(file); err != nil || vars["MEMPALACE_EDGE"] != "9" || vars["MEMPALACE_REMOTE_URL"] != "" {
		t.Fatalf("the file is not as godotenv reads it: %v %v", vars, err)
	}
	got := EnvAssignments([]byte(src))
	want := map[string][]int{"MEMPALACE_REMOTE_URL": {2, 7}, "MEMPALACE_EDGE": {3, 10}, "MEMPALACE_REMOTE_TOKEN": {4}, "X": {8}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
