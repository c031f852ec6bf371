//go:build !linux

package outbox

import "errors"

// DiskSpace is the StatFS of the running system: not known here, so only
// the error's own errno or SQLite code tells a storage fault.
func DiskSpace(string) (Space, error) { return Space{}, errors.ErrUnsupported }
