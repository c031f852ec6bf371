package memo

import (
	"bytes"
	"errors"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"slices"
	"syscall"
)

// What this package imports decides when atstart's init runs: nothing that
// imports strings (path/filepath, os/exec, crypto/*, fmt, encoding/json
// and filewrite all do), because strings, sorting after reflect, waits for
// reflect and everything ready before it. TestAtStartInitialisesEarly
// keeps it so. Hence the ports in paths.go, the line format in format.go,
// FNV-128a for sums, and Save taking its writer as an argument.

// MaxConfigSize is the largest config render reads (render.MaxConfigSize
// is defined as this), and so the largest file a check reads.
const MaxConfigSize = 256 << 20

// maxMemo bounds the memo file read at start.
const maxMemo = 1 << 20

// Memo is one no-change render: its command, every input it read with the
// answer it got, and what it printed.
type Memo struct {
	Binary Binary
	Args   []string
	Env    []EnvRead
	Paths  []PathRead
	Files  []FileRead
	// Dirs are the directories the run scanned for stale temp files and
	// found none in; a temp file there now means a full run.
	Dirs   []string
	Stderr string
	Exit   int
}

// Binary identifies the executable that recorded a memo; another build (a
// new release in the image, a rebuilt binary) plans again.
type Binary struct {
	Path    string
	Size    int64
	ModTime int64 // nanoseconds
	Inode   uint64
	// BuildID is the Go build ID the linker puts in an ELF note in the
	// executable's first pages (`go tool buildid`): a build with other
	// sources or flags has another, whatever its size and times.
	BuildID string
}

// EnvRead is one environment variable render looked up.
type EnvRead struct {
	Name string
	Set  bool
	// Sum is the FNV-128a of the value; a secret has none, only Blank.
	Sum   string
	Blank bool
}

// PathRead is one PATH look-up: the path found, and whether it was found
// without an error (render uses only that).
type PathRead struct {
	Name  string
	Path  string
	Found bool
}

// File operations render's System performs while planning.
const (
	OpRead  = "read"  // ReadFile: Sum of the bytes, or the error
	OpLstat = "lstat" // Lstat: Mode, or the error
	OpEval  = "eval"  // EvalSymlinks: Target, or the error
)

// FileRead is one read and what it saw.
type FileRead struct {
	Op     string
	Name   string
	Sum    string
	Mode   fs.FileMode
	Target string
	Err    string
}

// Secret reports whether render may use a variable only as blank or not
// (MEMPALACE_*TOKEN): its value is never written (harness configs name
// it) and so is not summed into the memo either.
func Secret(name string) bool {
	const pre, suf = "MEMPALACE_", "TOKEN"
	return len(name) >= len(pre)+len(suf) && name[:len(pre)] == pre && name[len(name)-len(suf):] == suf
}

// Sum is how the memo records bytes it read or a value it looked up:
// FNV-128a in hex. Not a cryptographic hash (crypto/sha256 imports
// strings): it tells a changed file from an unchanged one, which is all a
// memo needs; whoever can write a colliding config can write the config.
func Sum(b []byte) string {
	h := fnv.New128a()
	h.Write(b)
	var out [32]byte
	const digits = "0123456789abcdef"
	for i, c := range h.Sum(nil) {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&15]
	}
	return string(out[:])
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func envRead(name, value string, set bool) EnvRead {
	e := EnvRead{Name: name, Set: set}
	if Secret(name) {
		e.Blank = isBlank(value)
	} else {
		e.Sum = Sum([]byte(value))
	}
	return e
}

// isBlank is strings.TrimSpace(v) == "" (what the ladder tests a token
// with).
func isBlank(v string) bool {
	return len(bytes.TrimSpace([]byte(v))) == 0
}

// ReadRecord, LstatRecord and EvalRecord are what one of render's reads
// saw, as the memo keeps it.
func ReadRecord(name string, data []byte, err string) FileRead {
	r := FileRead{Op: OpRead, Name: name, Err: err}
	if err == "" {
		r.Sum = Sum(data)
	}
	return r
}

func LstatRecord(name string, mode fs.FileMode, err string) FileRead {
	return FileRead{Op: OpLstat, Name: name, Mode: mode, Err: err}
}

func EvalRecord(name, target, err string) FileRead {
	return FileRead{Op: OpEval, Name: name, Target: target, Err: err}
}

// holds asks the read once more and reports whether the answer is the one
// recorded. Only answers a check can reproduce exactly hold: a file read
// (its bytes), a missing file (its error), an lstat, a resolved link; a
// read or link error of another kind never holds, so such a start plans.
func (f FileRead) holds() bool {
	switch f.Op {
	case OpRead:
		if f.Err == "" {
			sum, ok := readSum(f.Name)
			return ok && sum == f.Sum
		}
		// filewrite.ReadRegular on a path with no entry: its Lstat's
		// error, or for ENOENT its Stat's.
		_, err := os.Lstat(f.Name)
		if errors.Is(err, fs.ErrNotExist) {
			_, err = os.Stat(f.Name)
		}
		return err != nil && errText(err) == f.Err
	case OpLstat:
		fi, err := os.Lstat(f.Name)
		var mode fs.FileMode
		if err == nil {
			mode = fi.Mode()
		}
		return errText(err) == f.Err && mode == f.Mode
	case OpEval:
		t, err := evalSymlinks(f.Name)
		return f.Err == "" && err == nil && t == f.Target
	}
	return false
}

// readSum reads a regular file as filewrite.ReadRegular does (stat before
// opening, O_NONBLOCK so a FIFO swapped in cannot block, the opened file
// checked again, the size bound) and returns its Sum.
func readSum(name string) (string, bool) {
	b, ok := readChecked(name, os.Stat, 0, MaxConfigSize, func(fi fs.FileInfo) bool { return fi.Mode().IsRegular() })
	if !ok {
		return "", false
	}
	return Sum(b), true
}

// readChecked reads the file at name, of at most max bytes, if ok accepts
// it both as stat (os.Stat or os.Lstat) sees it before opening and as the
// opened file is: a special file is never opened, and one swapped in
// meanwhile never blocks (O_NONBLOCK) nor is read. flags are added to the
// open's.
func readChecked(name string, stat func(string) (fs.FileInfo, error), flags int, max int64, ok func(fs.FileInfo) bool) ([]byte, bool) {
	fi, err := stat(name)
	if err != nil || !ok(fi) || fi.Size() > max {
		return nil, false
	}
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY|flags, 0)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil || !ok(fi) || fi.Size() > max {
		return nil, false
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil || int64(len(b)) > max {
		return nil, false
	}
	return b, true
}

// Command reports whether args (without the program name) are a start the
// memo may answer: "render" with only --home DIR (absolute), --target LIST,
// --strict and --reclaim, in cobra's spellings. home is --home's value
// ("" without one).
func Command(args []string) (home string, ok bool) {
	if len(args) == 0 || args[0] != "render" {
		return "", false
	}
	for i := 1; i < len(args); i++ {
		name, value, hasValue := cut(args[i], '=')
		switch name {
		case "--strict", "--reclaim":
			if hasValue {
				return "", false
			}
		case "--home", "--target":
			if !hasValue {
				if i+1 >= len(args) {
					return "", false
				}
				i++
				value = args[i]
			}
			if name == "--home" {
				if value == "" || value[0] != '/' {
					return "", false
				}
				home = value
			}
		default:
			return "", false
		}
	}
	return home, true
}

// cut is strings.Cut for one byte.
func cut(s string, sep byte) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// Path is where the memo for a start lives, and the directory it is kept
// under (the home, or $XDG_CACHE_HOME); ok is false when there is no home
// to put it in.
func Path(home string, env func(string) (string, bool)) (path, base string, ok bool) {
	if home != "" {
		return clean(home + "/.cache/devbox-config/render-memo"), clean(home), true
	}
	if c, _ := env("XDG_CACHE_HOME"); c != "" && c[0] == '/' {
		return clean(c + "/devbox-config/render-memo"), clean(c), true
	}
	if h, _ := env("HOME"); h != "" && h[0] == '/' {
		return clean(h + "/.cache/devbox-config/render-memo"), clean(h), true
	}
	return "", "", false
}

// self identifies the running executable: the file this process runs
// (/proc/self/exe, opened: if an upgrade renamed another build over the
// path meanwhile, the path would name that one), under its path.
func self() (Binary, error) {
	p, err := os.Executable()
	if err != nil {
		return Binary{}, err
	}
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		return Binary{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Binary{}, err
	}
	b := Binary{Path: p, Size: fi.Size(), ModTime: fi.ModTime().UnixNano(), BuildID: buildID(f)}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		b.Inode = st.Ino
	}
	return b, nil
}

// buildID finds the Go build ID note (name "Go\x00\x00", type 4) in the
// first 32 KB of the executable, where cmd/link puts it and `go tool
// buildid` reads it; "" if there is none.
func buildID(f io.ReaderAt) string {
	b := make([]byte, 32<<10)
	n, _ := f.ReadAt(b, 0)
	b = b[:n]
	le := func(x []byte) int { return int(x[0]) | int(x[1])<<8 | int(x[2])<<16 | int(x[3])<<24 }
	for off := 0; ; {
		i := bytes.Index(b[off:], []byte("Go\x00\x00"))
		if i < 0 {
			return ""
		}
		i += off
		if i >= 12 && le(b[i-12:]) == 4 && le(b[i-4:]) == 4 {
			if d := le(b[i-8:]); d > 0 && i+4+d <= len(b) {
				return string(b[i+4 : i+4+d])
			}
		}
		off = i + 1
	}
}

// Load reads the memo at path: nil if there is none, it is not one, or it
// is not a regular file of the user running this (a memo another user
// could write would decide what this start prints). A link is not
// followed, and a special file is refused without being opened.
func Load(path string) *Memo {
	b, ok := readChecked(path, os.Lstat, syscall.O_NOFOLLOW, maxMemo, ownRegular)
	if !ok {
		return nil
	}
	m, err := parse(b)
	if err != nil {
		return nil
	}
	return m
}

// ownRegular: a regular file of the effective user.
func ownRegular(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fi.Mode().IsRegular() && int(st.Uid) == os.Geteuid()
}

// Check reports whether m answers this start: the same command from the
// same executable, and every input it recorded answering as it did.
// getenv is the process environment (os.LookupEnv).
func (m *Memo) Check(args []string, getenv func(string) (string, bool)) bool {
	if m == nil || !slices.Equal(m.Args, args) {
		return false
	}
	if b, err := self(); err != nil || b != m.Binary {
		return false
	}
	for _, e := range m.Env {
		v, set := getenv(e.Name)
		if envRead(e.Name, v, set) != e {
			return false
		}
	}
	pathEnv, _ := getenv("PATH")
	for _, p := range m.Paths {
		got, found, ok := lookPath(p.Name, pathEnv)
		if !ok || got != p.Path || found != p.Found {
			return false
		}
	}
	for _, f := range m.Files {
		if !f.holds() {
			return false
		}
	}
	for _, d := range m.Dirs {
		if hasTemp(d) {
			return false
		}
	}
	return true
}

// hasTemp reports whether dir holds a name that LooksTemp (or cannot be
// listed any more).
func hasTemp(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return true
	}
	for _, n := range names {
		if LooksTemp(n) {
			return true
		}
	}
	return false
}

// Recorder collects one render's inputs as it runs. A nil Recorder records
// nothing (every method may be called on it).
type Recorder struct {
	args    []string
	env     []EnvRead
	paths   []PathRead
	files   []FileRead
	dirs    []string
	spoiled bool
	wrote   bool
}

// NewRecorder records the render started with args.
func NewRecorder(args []string) *Recorder {
	return &Recorder{args: slices.Clone(args)}
}

// Env wraps an environment look-up so that each variable is recorded.
func (r *Recorder) Env(lookup func(string) (string, bool)) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, set := lookup(name)
		if r != nil && !slices.ContainsFunc(r.env, func(e EnvRead) bool { return e.Name == name }) {
			r.env = append(r.env, envRead(name, v, set))
			// A URL with a password in it is refused by the ladder; its sum
			// would let a reader of the memo test guesses offline.
			r.spoiled = r.spoiled || hasUserinfo(v)
		}
		return v, set
	}
}

// LookPath wraps a PATH look-up (exec.LookPath) so that each answer is
// recorded; the PATH it searched is recorded as a variable.
func (r *Recorder) LookPath(lookPath func(string) (string, error)) func(string) (string, error) {
	return func(name string) (string, error) {
		if r != nil {
			r.Env(os.LookupEnv)("PATH")
		}
		p, err := lookPath(name)
		if r != nil && !slices.ContainsFunc(r.paths, func(x PathRead) bool { return x.Name == name }) {
			r.paths = append(r.paths, PathRead{Name: name, Path: p, Found: err == nil})
		}
		return p, err
	}
}

// hasUserinfo reports whether v holds a URL with credentials
// ("scheme://user:pass@host"): an '@' after "://" before the next '/'.
func hasUserinfo(v string) bool {
	for i := 0; i+3 <= len(v); i++ {
		if v[i:i+3] != "://" {
			continue
		}
		for j := i + 3; j < len(v) && v[j] != '/'; j++ {
			if v[j] == '@' {
				return true
			}
		}
	}
	return false
}

// Files records the reads of a plan whose result the run used. A read
// asked again with the same answer (plans lstat a file before and after
// reading it) is kept once: a check asks it once.
func (r *Recorder) Files(reads []FileRead) {
	if r == nil {
		return
	}
	for _, f := range reads {
		if !slices.Contains(r.files, f) {
			r.files = append(r.files, f)
		}
	}
}

// Dir records a directory scanned for stale temp files; temp says it held
// a name that LooksTemp (or could not be listed), which leaves the run
// unmemoised: a later run may have a temp file to clean.
func (r *Recorder) Dir(dir string, temp bool) {
	if r == nil {
		return
	}
	r.spoiled = r.spoiled || temp
	if !slices.Contains(r.dirs, dir) {
		r.dirs = append(r.dirs, dir)
	}
}

// Spoil marks the run as one the memo must not answer (it wrote, or it is
// not a start).
func (r *Recorder) Spoil() {
	if r != nil {
		r.spoiled = true
	}
}

// Writing marks the run as one that writes a target: what it read is not
// what the next start finds, so it is not memoised (the caller may record
// a second, unchanged run instead; see Wrote).
func (r *Recorder) Writing() {
	if r != nil {
		r.spoiled, r.wrote = true, true
	}
}

// Wrote reports whether Writing was called.
func (r *Recorder) Wrote() bool { return r != nil && r.wrote }

// Spoiled reports whether the run may not be memoised.
func (r *Recorder) Spoiled() bool { return r == nil || r.spoiled }

// Save writes the memo of the finished run to path with write (filewrite's
// atomic replace, given by the caller), if the run may be answered from
// one: nothing spoiled it, nothing went to stdout, and it exited 0 or 1.
// The memo is written only when it differs from the one there, so a
// steady start writes nothing.
func (r *Recorder) Save(path string, stdout, stderr []byte, exit int, write func(path string, data []byte) error) error {
	if r.Spoiled() || len(stdout) > 0 || (exit != 0 && exit != 1) {
		return nil
	}
	b, err := self()
	if err != nil {
		return err
	}
	dirs := slices.Clone(r.dirs)
	// the memo's own directory too: a killed memo write's temp file there
	// makes the next start run in full, which cleans it
	if i := bytes.LastIndexByte([]byte(path), '/'); i > 0 && !slices.Contains(dirs, path[:i]) {
		dirs = append(dirs, path[:i])
	}
	slices.Sort(dirs) // scanned in map order
	m := Memo{Binary: b, Args: r.args, Env: r.env, Paths: r.paths, Files: r.files,
		Dirs: dirs, Stderr: string(stderr), Exit: exit}
	data := m.encode()
	if old := Load(path); old != nil && bytes.Equal(old.encode(), data) {
		return nil
	}
	return write(path, data)
}
