package ladder

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A ~/.mempalace/config.json that does not parse names its line and column
// and the fix.
func TestMemPalaceConfigErrorNamesLineColumnAndFix(t *testing.T) {
	home := t.TempDir()
	file := filepath.Join(home, ".mempalace", "config.json")
	os.MkdirAll(filepath.Dir(file), 0o700)
	os.WriteFile(file, []byte("{\n  \"palace_path\": \"~/p\"\n  \"x\": 1\n}\n"), 0o600)
	_, err := PalacePath(func(k string) (string, bool) {
		if k == "HOME" {
			return home, true
		}
		return "", false
	})
	if err == nil || !strings.HasPrefix(err.Error(), file+":3:3: ") || !strings.Contains(err.Error(), "(fix: add the missing comma") {
		t.Errorf("got %v, want %s:3:3: ... (fix: add the missing comma...", err, file)
	}
}
