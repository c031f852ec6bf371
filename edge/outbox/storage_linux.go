package outbox

import (
	"os"
	"syscall"
)

// stRdOnly is statfs's ST_RDONLY flag.
const stRdOnly = 1

// DiskSpace is the StatFS of the running system: statfs(2), and the mount
// /proc/self/mountinfo lists for dir (mountOf).
func DiskSpace(dir string) (Space, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return Space{}, err
	}
	sp := Space{Free: st.Bavail * uint64(st.Bsize), ReadOnly: st.Flags&stRdOnly != 0}
	if f, err := os.Open("/proc/self/mountinfo"); err == nil {
		defer f.Close()            // read only
		sp.Mount = mountOf(dir, f) // not found: the fix says "the outbox's disk"
	}
	return sp, nil
}
