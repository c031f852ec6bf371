package outbox

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// atSocketDir calls use with the address of each socket in dir by name
// that fits sun_path: its path, or, when dir is too long for that, its
// name under /proc/self/fd/<N>, N dir opened once for the call (the
// kernel follows the magic link to the real directory).
func atSocketDir(dir string, use func(addr func(name string) string) error) error {
	if len(dir)+len("/01234567.sock") <= maxSocketPath {
		return use(func(name string) string { return filepath.Join(dir, name) })
	}
	d, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return fmt.Errorf("open the doorbell directory: %w", err)
	}
	defer d.Close() // read only
	return use(func(name string) string { return fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), name) })
}
