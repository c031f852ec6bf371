//go:build unix

package outbox

import (
	"fmt"
	"os"
	"syscall"
)

// fileID names the file at path as the file system knows it: its inode,
// which a copy of the file does not share (the device number is left out:
// containers sharing one volume may see it differently).
func fileID(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("inode %d", st.Ino)
}
