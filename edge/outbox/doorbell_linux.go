package outbox

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// atSocketPath calls use with an address of the socket at path that fits
// sun_path: path itself, or, when it is too long, the socket's name under
// /proc/self/fd/<N>, N its directory opened for the call alone (the kernel
// follows the magic link to the real directory).
func atSocketPath(path string, use func(addr string) error) error {
	if len(path) <= maxSocketPath {
		return use(path)
	}
	dir, err := os.OpenFile(filepath.Dir(path), os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return fmt.Errorf("open the doorbell directory: %w", err)
	}
	defer dir.Close() // read only
	short := fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), filepath.Base(path))
	if len(short) > maxSocketPath { // a name too long: not one of ours
		return errBellPathTooLong
	}
	return use(short)
}
