package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/joakimp/devbox-config/testbed"
)

// The config's owner can still run config commands after root ran one:
// the lock root made is theirs, and a lock root made with an older
// binary is refused naming its full path and the fix (attack90 F1).
func TestRootLeavesTheLockToTheConfigsOwner(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: root's command beside a config another user owns")
	}
	const nobody = 65534 // testbed.AsOtherUser's, keeping root's group
	dir := t.TempDir()
	file := filepath.Join(dir, "gateway.jsonc")
	os.WriteFile(file, []byte(`{"secret_file": "s", "audit_log": "a", "devices": [{"id": "alice", "read": ["x"]}]}`+"\n"), 0o600)
	os.Chown(dir, nobody, 0)
	os.Chown(file, nobody, 0)
	if _, err := UpdateConfig(file, func(c *Config) error { c.Devices[0].Label = "by root"; return nil }); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(file + ".lock")
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != nobody {
		t.Errorf("root's lock belongs to uid %d, want the config's owner %d", st.Uid, nobody)
	}
	t.Chdir(dir) // a relative --config, as the attack's
	change := func() error {
		_, err := UpdateConfig("gateway.jsonc", func(c *Config) error { c.Devices[0].Label = "by owner"; return nil })
		return err
	}
	if err := testbed.AsOtherUser(t, file, change); err != nil {
		t.Errorf("the owner's command after root's: %v, want it done", err)
	}
	os.Chown(file+".lock", 0, 0) // as an older binary left it
	if err := testbed.AsOtherUser(t, file, change); err == nil || !strings.Contains(err.Error(), "lock file "+file+".lock") || !strings.Contains(err.Error(), "chown --reference=") {
		t.Errorf("the owner's command beside root's lock: %v, want the lock's full path and the chown fix", err)
	}
}
