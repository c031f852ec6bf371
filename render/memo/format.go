package memo

import (
	"bytes"
	"errors"
	"io/fs"
	"strconv"
)

// The memo file is one record per line, a keyword and its fields; strings
// are Go-quoted (strconv.Quote), so any byte survives:
//
//	devbox-config render memo 3
//	binary "/usr/local/bin/devbox-config" 17981602 1796135841174619781 9978221 "OzsiSAU6…/96pQbTc7…"
//	arg "render"
//	env "MEMPALACE_REMOTE_URL" set sum 7f54…
//	env "MEMPALACE_REMOTE_TOKEN" set nonblank
//	lookpath "mempalace-mcp" "/usr/local/bin/mempalace-mcp" found
//	read "/home/u/.config/opencode/opencode.jsonc" 9a3c… ""
//	lstat "/home/u/.codex" 0 "lstat /home/u/.codex: no such file or directory"
//	eval "/home/u/.pi/agent/settings.json" "/dotfiles/pi/settings.json" ""
//	dir "/home/u/.config/opencode"
//	exit 0
//	stderr "level=WARN msg=…\n"
const header = "devbox-config render memo 3"

var errFormat = errors.New("not a start memo")

func (m *Memo) encode() []byte {
	var b []byte
	line := func(fields ...string) {
		for i, f := range fields {
			if i > 0 {
				b = append(b, ' ')
			}
			b = append(b, f...)
		}
		b = append(b, '\n')
	}
	q, n := strconv.Quote, func(i int64) string { return strconv.FormatInt(i, 10) }
	line(header)
	line("binary", q(m.Binary.Path), n(m.Binary.Size), n(m.Binary.ModTime), strconv.FormatUint(m.Binary.Inode, 10), q(m.Binary.BuildID))
	for _, a := range m.Args {
		line("arg", q(a))
	}
	for _, e := range m.Env {
		set := "unset"
		if e.Set {
			set = "set"
		}
		switch {
		case Secret(e.Name) && e.Blank:
			line("env", q(e.Name), set, "blank")
		case Secret(e.Name):
			line("env", q(e.Name), set, "nonblank")
		default:
			line("env", q(e.Name), set, "sum", e.Sum)
		}
	}
	for _, p := range m.Paths {
		found := "missing"
		if p.Found {
			found = "found"
		}
		line("lookpath", q(p.Name), q(p.Path), found)
	}
	for _, f := range m.Files {
		switch f.Op {
		case OpRead:
			sum := f.Sum
			if sum == "" {
				sum = "-"
			}
			line(OpRead, q(f.Name), sum, q(f.Err))
		case OpLstat:
			line(OpLstat, q(f.Name), strconv.FormatUint(uint64(f.Mode), 10), q(f.Err))
		case OpEval:
			line(OpEval, q(f.Name), q(f.Target), q(f.Err))
		}
	}
	for _, d := range m.Dirs {
		line("dir", q(d))
	}
	line("exit", strconv.Itoa(m.Exit))
	line("stderr", q(m.Stderr))
	return b
}

// fields splits a line at single spaces into its keyword and fields,
// unquoting the quoted ones.
func fields(l []byte) ([]string, error) {
	var out []string
	for {
		var f string
		if len(l) > 0 && l[0] == '"' {
			p, err := strconv.QuotedPrefix(string(l))
			if err != nil {
				return nil, errFormat
			}
			if f, err = strconv.Unquote(p); err != nil {
				return nil, errFormat
			}
			l = l[len(p):]
		} else {
			i := bytes.IndexByte(l, ' ')
			if i < 0 {
				i = len(l)
			}
			f, l = string(l[:i]), l[i:]
		}
		out = append(out, f)
		if len(l) == 0 {
			return out, nil
		}
		if l[0] != ' ' {
			return nil, errFormat
		}
		l = l[1:]
	}
}

func parse(data []byte) (*Memo, error) {
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return nil, errFormat
	}
	lines := bytes.Split(data[:len(data)-1], []byte{'\n'})
	if string(lines[0]) != header {
		return nil, errFormat
	}
	m := &Memo{}
	ok := true
	num := func(s string) int64 {
		i, err := strconv.ParseInt(s, 10, 64)
		ok = ok && err == nil
		return i
	}
	want := map[string]int{"binary": 5, "arg": 1, "lookpath": 3, OpRead: 3, OpLstat: 3, OpEval: 3, "dir": 1, "exit": 1, "stderr": 1}
	seen := map[string]bool{}
	for _, l := range lines[1:] {
		f, err := fields(l)
		if err != nil {
			return nil, err
		}
		k, f := f[0], f[1:]
		if c, known := want[k]; known && len(f) != c {
			return nil, errFormat
		}
		switch k {
		case "binary":
			ino, err := strconv.ParseUint(f[3], 10, 64)
			ok = ok && err == nil
			m.Binary = Binary{Path: f[0], Size: num(f[1]), ModTime: num(f[2]), Inode: ino, BuildID: f[4]}
		case "arg":
			m.Args = append(m.Args, f[0])
		case "env":
			if len(f) < 3 || (f[1] != "set" && f[1] != "unset") {
				return nil, errFormat
			}
			e := EnvRead{Name: f[0], Set: f[1] == "set"}
			switch {
			case len(f) == 3 && Secret(e.Name) && (f[2] == "blank" || f[2] == "nonblank"):
				e.Blank = f[2] == "blank"
			case len(f) == 4 && !Secret(e.Name) && f[2] == "sum":
				e.Sum = f[3]
			default:
				return nil, errFormat
			}
			m.Env = append(m.Env, e)
		case "lookpath":
			if f[2] != "found" && f[2] != "missing" {
				return nil, errFormat
			}
			m.Paths = append(m.Paths, PathRead{Name: f[0], Path: f[1], Found: f[2] == "found"})
		case OpRead:
			sum := f[1]
			if sum == "-" {
				sum = ""
			}
			m.Files = append(m.Files, FileRead{Op: OpRead, Name: f[0], Sum: sum, Err: f[2]})
		case OpLstat:
			mode, err := strconv.ParseUint(f[1], 10, 32)
			ok = ok && err == nil
			m.Files = append(m.Files, FileRead{Op: OpLstat, Name: f[0], Mode: fs.FileMode(mode), Err: f[2]})
		case OpEval:
			m.Files = append(m.Files, FileRead{Op: OpEval, Name: f[0], Target: f[1], Err: f[2]})
		case "dir":
			m.Dirs = append(m.Dirs, f[0])
		case "exit":
			// only what Save writes: a memo never fails a start
			if m.Exit = int(num(f[0])); m.Exit != 0 && m.Exit != 1 {
				return nil, errFormat
			}
		case "stderr":
			m.Stderr = f[0]
		default:
			return nil, errFormat
		}
		seen[k] = true
	}
	if !ok || !seen["binary"] || !seen["exit"] || !seen["stderr"] || len(m.Args) == 0 {
		return nil, errFormat
	}
	return m, nil
}
