package gateway

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// The config's owner can still run config commands after root ran one:
// the lock root made is theirs, and a lock root made with an older
// binary is refused naming its full path and the fix (attack90 F1).
func TestRootLeavesTheLockToTheConfigsOwner(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: root's command beside a config another user owns")
	}
	const nobody = 65534
	dir := t.TempDir()
	file := filepath.Join(dir, "gateway.jsonc")
	os.WriteFile(file, []byte(`{"secret_file": "s", "audit_log": "a", "devices": [{"id": "alice", "read": ["x"]}]}`+"\n"), 0o600)
	for d := filepath.Dir(dir); d != "/"; d = filepath.Dir(d) { // let nobody reach it
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			os.Chmod(d, fi.Mode().Perm()|0o001)
			t.Cleanup(func() { os.Chmod(d, fi.Mode().Perm()) })
		}
	}
	os.Chown(dir, nobody, nobody)
	os.Chown(file, nobody, nobody)
	if err := UpdateConfig(file, func(c *Config) error { c.Devices[0].Label = "by root"; return nil }); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(file + ".lock")
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != nobody || st.Gid != nobody {
		t.Errorf("root's lock is %d:%d, want the config's owner %d:%d", st.Uid, st.Gid, nobody, nobody)
	}
	t.Chdir(dir) // a relative --config, as the attack's
	change := func() error {
		return UpdateConfig("gateway.jsonc", func(c *Config) error { c.Devices[0].Label = "by owner"; return nil })
	}
	if err := asUser(nobody, change); err != nil {
		t.Errorf("the owner's command after root's: %v, want it done", err)
	}
	os.Chown(file+".lock", 0, 0) // as an older binary left it
	if err := asUser(nobody, change); err == nil || !strings.Contains(err.Error(), "lock file "+file+".lock") || !strings.Contains(err.Error(), "chown --reference=") {
		t.Errorf("the owner's command beside root's lock: %v, want the lock's full path and the chown fix", err)
	}
}

// asUser runs fn with uid as its file system user (and group), on a
// thread of its own that is dropped afterwards: setfsuid is per thread,
// and leaving uid 0 clears the thread's file capabilities as a real
// user's process has none. fn must not start goroutines that touch files.
func asUser(uid int, fn func() error) error {
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		syscall.Syscall(syscall.SYS_SETFSGID, uintptr(uid), 0, 0)
		syscall.Syscall(syscall.SYS_SETFSUID, uintptr(uid), 0, 0)
		done <- fn()
	}()
	return <-done
}
