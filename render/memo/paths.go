package memo

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// Ports of path/filepath.Clean, path/filepath.EvalSymlinks and
// os/exec.LookPath for Linux, written without package strings: those three
// packages import it, and strings initialises after reflect and everything
// that needs it (see package atstart). Check asks these where render asked
// the standard library; FuzzEvalSymlinks and FuzzLookPath run both on
// random trees of files, directories and links and require the same
// answers.

// clean is filepath.Clean on Linux.
func clean(path string) string {
	if path == "" {
		return "."
	}
	rooted := path[0] == '/'
	n := len(path)
	out := make([]byte, 0, n)
	r, dotdot := 0, 0
	if rooted {
		out = append(out, '/')
		r, dotdot = 1, 1
	}
	for r < n {
		switch {
		case path[r] == '/':
			r++
		case path[r] == '.' && (r+1 == n || path[r+1] == '/'):
			r++
		case path[r] == '.' && path[r+1] == '.' && (r+2 == n || path[r+2] == '/'):
			r += 2
			switch {
			case len(out) > dotdot:
				w := len(out) - 1
				for w > dotdot && out[w] != '/' {
					w--
				}
				out = out[:w]
			case !rooted:
				if len(out) > 0 {
					out = append(out, '/')
				}
				out = append(out, '.', '.')
				dotdot = len(out)
			}
		default:
			if rooted && len(out) != 1 || !rooted && len(out) != 0 {
				out = append(out, '/')
			}
			for ; r < n && path[r] != '/'; r++ {
				out = append(out, path[r])
			}
		}
	}
	if len(out) == 0 {
		return "."
	}
	return string(out)
}

var errTooManyLinks = errors.New("EvalSymlinks: too many links")

// evalSymlinks is filepath.EvalSymlinks on Linux (its walkSymlinks).
func evalSymlinks(path string) (string, error) {
	volLen := 0
	if volLen < len(path) && path[volLen] == '/' {
		volLen++
	}
	vol := path[:volLen]
	dest := vol
	linksWalked := 0
	for start, end := volLen, volLen; start < len(path); start = end {
		for start < len(path) && path[start] == '/' {
			start++
		}
		end = start
		for end < len(path) && path[end] != '/' {
			end++
		}
		if end == start {
			break
		} else if path[start:end] == "." {
			continue
		} else if path[start:end] == ".." {
			var r int
			for r = len(dest) - 1; r >= volLen; r-- {
				if dest[r] == '/' {
					break
				}
			}
			if r < volLen || dest[r+1:] == ".." {
				if len(dest) > volLen {
					dest += "/"
				}
				dest += ".."
			} else {
				dest = dest[:r]
			}
			continue
		}
		if len(dest) > 0 && dest[len(dest)-1] != '/' {
			dest += "/"
		}
		dest += path[start:end]
		fi, err := os.Lstat(dest)
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if !fi.Mode().IsDir() && end < len(path) {
				return "", syscall.ENOTDIR
			}
			continue
		}
		linksWalked++
		if linksWalked > 255 {
			return "", errTooManyLinks
		}
		link, err := os.Readlink(dest)
		if err != nil {
			return "", err
		}
		path = link + path[end:]
		if len(link) > 0 && link[0] == '/' {
			dest = link[:1]
			end = 1
			vol = link[:1]
			volLen = 1
		} else {
			var r int
			for r = len(dest) - 1; r >= volLen; r-- {
				if dest[r] == '/' {
					break
				}
			}
			if r < volLen {
				dest = vol
			} else {
				dest = dest[:r]
			}
			end = 0
		}
	}
	return clean(dest), nil
}

// Linux's faccessat constants (internal/syscall/unix has them; syscall
// does not export AT_EACCESS).
const (
	atFDCWD   = -0x64
	atEAccess = 0x200
	xOK       = 1
)

// findExecutable is os/exec's.
func findExecutable(file string) error {
	d, err := os.Stat(file)
	if err != nil {
		return err
	}
	m := d.Mode()
	if m.IsDir() {
		return syscall.EISDIR
	}
	err = syscall.Faccessat(atFDCWD, file, xOK, atEAccess)
	if err == nil || (err != syscall.ENOSYS && err != syscall.EPERM) {
		return err
	}
	if m&0o111 != 0 {
		return nil
	}
	return fs.ErrPermission
}

// lookPath is exec.LookPath for a name without a slash, reduced to what
// render uses: the path found and whether exec.LookPath would return it
// without an error (a path relative to the current directory comes with
// exec.ErrDot). ok is false for a name this port does not handle.
func lookPath(file string, pathEnv string) (path string, found, ok bool) {
	switch file {
	case "", ".", "..":
		return "", false, false
	}
	for i := 0; i < len(file); i++ {
		if file[i] == '/' || file[i] == 0 {
			return "", false, false
		}
	}
	if pathEnv == "" {
		return "", false, true // filepath.SplitList("") is no directory at all
	}
	for start := 0; start <= len(pathEnv); {
		end := start
		for end < len(pathEnv) && pathEnv[end] != ':' {
			end++
		}
		dir := pathEnv[start:end]
		start = end + 1
		if dir == "" {
			dir = "."
		}
		p := clean(dir + "/" + file)
		if findExecutable(p) == nil {
			return p, p[0] == '/', true
		}
	}
	return "", false, true
}

// LooksTemp reports whether a directory entry is a temp file name of
// filewrite's: filewrite.TempTarget, written without package strings
// (".<base>.tmp-<16 lowercase hex>" or ".<base>.tmp<1 to 10 digits>"; a
// fuzz test holds the two equal).
func LooksTemp(name string) bool {
	if len(name) < 2 || name[0] != '.' {
		return false
	}
	i := -1
	for j := len(name) - 4; j >= 0; j-- {
		if name[j:j+4] == ".tmp" {
			i = j
			break
		}
	}
	if i < 2 {
		return false
	}
	suffix := name[i+4:]
	switch {
	case len(suffix) == 17 && suffix[0] == '-' && allOf(suffix[1:], "0123456789abcdef"):
		return true
	case len(suffix) >= 1 && len(suffix) <= 10 && allOf(suffix, "0123456789"):
		return true
	}
	return false
}

func allOf(s, chars string) bool {
	for i := 0; i < len(s); i++ {
		found := false
		for j := 0; j < len(chars); j++ {
			found = found || s[i] == chars[j]
		}
		if !found {
			return false
		}
	}
	return true
}
