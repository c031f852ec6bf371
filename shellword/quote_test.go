package shellword

import (
	"os/exec"
	"testing"
)

// What Quote gives is read back by a real shell as the one word it was.
func TestQuoteIsOneWordToTheShell(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, s := range []string{"plain/path-1.2", "", "a b", "it's", "$(id)", "`id`", "x;y", "new\nline", "*?[", "~home"} {
		out, err := exec.Command(sh, "-c", "printf %s "+Quote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("Quote(%q) = %s: the shell read %q (%v)", s, Quote(s), out, err)
		}
	}
}
