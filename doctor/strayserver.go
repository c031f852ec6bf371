package doctor

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/joakimp/devbox-config/ladder"
)

// proc is one process as /proc shows it: its argv, and its parent.
type proc struct {
	pid, ppid int
	argv      []string
}

// readProc reads pid's argv and parent from /proc (false: it is gone, or
// not readable).
func readProc(pid int) (proc, bool) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil || len(cmdline) == 0 {
		return proc{}, false // gone, or a kernel thread
	}
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return proc{}, false
	}
	// "pid (comm) state ppid ...": comm may hold anything, ")" too.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 2 {
		return proc{}, false
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return proc{}, false
	}
	return proc{pid: pid, ppid: ppid, argv: strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")}, true
}

// runs reports whether p runs the program name: its argv[0], or, for a
// script, the argv[1] its interpreter was given (mempalace-mcp is a
// Python script), with args the arguments after it.
func (p proc) runs(name string) (args []string, ok bool) {
	for i, a := range p.argv[:min(len(p.argv), 2)] {
		if filepath.Base(a) == name {
			return p.argv[i+1:], true
		}
	}
	return nil, false
}

// name is p's program as a person knows it: argv[0]'s file name, and
// argv[1]'s for an interpreter's script (node opencode).
func (p proc) name() string {
	var names []string
	for _, a := range p.argv[:min(len(p.argv), 2)] {
		names = append(names, filepath.Base(a))
	}
	return strings.Join(names, " ")
}

// palace is the palace a mempalace-mcp with args serves: its --palace,
// else its environment's by MemPalace's rules ("": not readable, a
// process of another user).
func (p proc) palace(args []string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--palace="); ok {
			return p.abs(v)
		}
		if a == "--palace" && i+1 < len(args) {
			return p.abs(args[i+1])
		}
	}
	environ := ladder.ProcEnviron(p.pid)
	if environ == nil {
		return ""
	}
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	palace, err := ladder.PalacePath(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		return "" // its palace cannot be told: nothing is said of it
	}
	return existingReal(palace)
}

// abs is path as p reads it (relative to its working directory).
func (p proc) abs(path string) string {
	if !filepath.IsAbs(path) {
		cwd, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(p.pid), "cwd"))
		if err != nil {
			return ""
		}
		path = filepath.Join(cwd, path)
	}
	return existingReal(path)
}

// CheckStrayServer is stray-server (§1.2): in edge mode, a mempalace-mcp
// serving this palace that no running `devbox-config edge` started (a
// harness session begun before edge mode was turned on, or one an earlier
// edge left running). MemPalace lets one server per palace write: while it
// holds that, every write through the edge is refused "Peer MCP writer
// active", and what it writes itself never reaches the outbox. An edge's
// own server is its child (and dies with it), so it is never named.
// Nothing is said off Linux (no /proc) or of another user's processes.
func CheckStrayServer(opts Options, st State) []Finding {
	if st.Settings.Mode != ladder.Edge || st.Palace == "" {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil // not Linux: nothing to say
	}
	palace := existingReal(st.Palace)
	var out []Finding
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, ok := readProc(pid)
		args, server := p.runs("mempalace-mcp")
		if !ok || !server || p.palace(args) != palace {
			continue
		}
		parent, alive := readProc(p.ppid)
		if edgeArgs, edge := parent.runs("devbox-config"); alive && edge && slices.Contains(edgeArgs, "edge") {
			continue // a running edge's own
		}
		out = append(out, strayServer(opts, st.Palace, p, parent, alive))
	}
	return out
}

// strayServer is the finding for p, whose parent is not an edge.
func strayServer(opts Options, palace string, p, parent proc, alive bool) Finding {
	by := "its parent is gone"
	if alive && p.ppid != 1 {
		by = fmt.Sprintf("its parent is pid %d, %s", parent.pid, opts.mask(parent.name()))
	}
	return Finding{ID: IDStrayServer, Severity: Warn, Section: "§1.2",
		Message: fmt.Sprintf("mempalace-mcp pid %d serves %s, and no devbox-config edge started it (%s): MemPalace lets one server per palace write, so while it does every write through the edge is refused \"Peer MCP writer active\", and what it writes reaches this palace only, never the outbox", p.pid, palace, by),
		Fix:     fmt.Sprintf("end the harness session that runs it, or `kill %d` if no session uses it (`kill -9 %d` if it is stuck); a harness started after render runs devbox-config edge instead", p.pid, p.pid)}
}
