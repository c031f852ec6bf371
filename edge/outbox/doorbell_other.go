//go:build !linux

package outbox

import "path/filepath"

// atSocketDir calls use with the address of each socket in dir by name,
// its path, if a socket's name fits sun_path there.
func atSocketDir(dir string, use func(addr func(name string) string) error) error {
	if len(dir)+len("/01234567.sock") > maxSocketPath {
		return errBellPathTooLong
	}
	return use(func(name string) string { return filepath.Join(dir, name) })
}
