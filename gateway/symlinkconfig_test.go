package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// A1 (attack50): a config reached through a symlinked file, as an
// /etc-style link, is one file under both names: edits through the link
// and through the real path at once all land (their lock and .bak were
// beside the link, and five revocations of six came back), and its
// relative paths and default state file are the real file's directory's.
func TestSymlinkedConfigIsOneFileByBothNames(t *testing.T) {
	t.Parallel()
	real := filepath.Join(t.TempDir(), "gw", DefaultConfigFile)
	if err := WriteSample(real); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "etc")
	os.Mkdir(other, 0o700)
	link := filepath.Join(other, DefaultConfigFile)
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	for i := range n {
		for name, file := range map[string]string{"l": link, "r": real} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := UpdateConfig(file, func(c *Config) error {
					c.Devices = append(c.Devices, Device{ID: fmt.Sprintf("%s-%d", name, i), Read: []string{"shared"}})
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	c, err := LoadConfig(link)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Devices) != 2*n {
		t.Errorf("%d devices in the config after %d adds through both names at once, want all", len(c.Devices), 2*n)
	}
	for _, name := range []string{".lock", ".bak"} {
		if _, err := os.Lstat(link + name); err == nil {
			t.Errorf("%s made beside the link, not beside the real file", link+name)
		}
		if _, err := os.Stat(real + name); err != nil {
			t.Errorf("beside the real file: %v", err)
		}
	}
	if want := filepath.Join(filepath.Dir(real), "audit", "audit.jsonl"); c.AuditLog != want {
		t.Errorf("audit_log through the link resolves to %s, want %s (relative to the real file)", c.AuditLog, want)
	}
	if got, want := StateFile(link, c), real+".state.json"; got != want {
		t.Errorf("state file through the link: %s, want %s", got, want)
	}
}
