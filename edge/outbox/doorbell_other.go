//go:build !linux

package outbox

// atSocketPath calls use with path, the address of a socket, if it fits
// sun_path.
func atSocketPath(path string, use func(addr string) error) error {
	if len(path) > maxSocketPath {
		return errBellPathTooLong
	}
	return use(path)
}
