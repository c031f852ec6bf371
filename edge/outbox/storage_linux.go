package outbox

import (
	"os"
	"path/filepath"
	"syscall"
)

// stRdOnly is statfs's ST_RDONLY flag.
const stRdOnly = 1

// DiskSpace is the StatFS of the running system: statfs(2), and the mount
// point found by walking up while the device number stays the same.
func DiskSpace(dir string) (Space, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return Space{}, err
	}
	return Space{Free: st.Bavail * uint64(st.Bsize), ReadOnly: st.Flags&stRdOnly != 0, Mount: mountPoint(dir)}, nil
}

// mountPoint is the top directory above dir on dir's device ("" if dir
// cannot be read).
func mountPoint(dir string) string {
	dev := func(p string) (uint64, bool) {
		fi, err := os.Stat(p)
		if err != nil {
			return 0, false
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		return uint64(st.Dev), ok
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	d, ok := dev(dir)
	if !ok {
		return ""
	}
	for dir != "/" {
		if up, ok := dev(filepath.Dir(dir)); !ok || up != d {
			return dir
		}
		dir = filepath.Dir(dir)
	}
	return dir
}
