package edge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/palacefiles"
)

// An edge whose palace shares its parent directory with another palace
// (MemPalace keeps tunnels.json in the parent: the edge would list the
// other palace's tunnels as this device's own, trusted) says so on
// stderr at start, naming both; a palace with a directory of its own
// starts without it. (Found by an outside tester: only doctor said so.)
func TestAPalaceBesideAnotherIsNamedAtStart(t *testing.T) {
	t.Parallel()
	for _, beside := range []bool{true, false} {
		dir := t.TempDir()
		if beside {
			other := filepath.Join(dir, "primary")
			if err := os.MkdirAll(other, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(other, palacefiles.ChromaFile), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		h := start(t, harnessOpts{palace: filepath.Join(dir, "laptop")})
		h.call("list_wings", nil)
		logs := h.logs.String()
		if named := strings.Contains(logs, "shares its parent directory with another palace") && strings.Contains(logs, filepath.Join(dir, "primary")); named != beside {
			t.Errorf("beside another palace %v, the start named it %v:\n%s", beside, named, logs)
		}
	}
}
