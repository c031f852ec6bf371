package ladder

import (
	"os"
	"strconv"
	"strings"
)

// EnvFromParent, set to 1 in a harness's entry, lets bridge and edge read
// the MEMPALACE_* variables their own environment lacks from the
// environment of the harness that started them: for harnesses that start
// MCP servers with a fixed handful of variables (Auggie: HOME, PATH, …),
// so the token still comes from the environment, never from a file.
const EnvFromParent = "MEMPALACE_ENV_FROM_PARENT"

// WithParentEnv is env, falling back for ServerVars to the parent
// process's environment (/proc/<ppid>/environ) when env has
// EnvFromParent=1. environOf reads a process's environment (nil: from
// /proc); a parent that cannot be read adds nothing.
func WithParentEnv(env Lookup, ppid int, environOf func(pid int) []string) Lookup {
	parent := parentVars(env, ppid, environOf)
	if parent == nil {
		return env
	}
	return func(k string) (string, bool) {
		if v, ok := env(k); ok {
			return v, ok
		}
		v, ok := parent[k]
		return v, ok
	}
}

// ParentEnviron is environ (os.Environ's form) plus, when it has
// EnvFromParent=1, the parent's ServerVars it lacks: the environment the
// edge hands its child mempalace-mcp, so MemPalace's own variables
// (MEMPALACE_EMBEDDING_MODEL, ...) reach it as the edge's do.
func ParentEnviron(environ []string, ppid int, environOf func(pid int) []string) []string {
	own := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		own[k] = v
	}
	parent := parentVars(func(k string) (string, bool) { v, ok := own[k]; return v, ok }, ppid, environOf)
	out := append([]string(nil), environ...)
	for _, k := range ServerVars() {
		if v, ok := parent[k]; ok {
			if _, mine := own[k]; !mine {
				out = append(out, k+"="+v)
			}
		}
	}
	return out
}

// parentVars are the parent's ServerVars when env has EnvFromParent=1
// (nil otherwise).
func parentVars(env Lookup, ppid int, environOf func(pid int) []string) map[string]string {
	if v, _ := env(EnvFromParent); strings.TrimSpace(v) != "1" {
		return nil
	}
	if environOf == nil {
		environOf = ProcEnviron
	}
	server := map[string]bool{}
	for _, n := range ServerVars() {
		server[n] = true
	}
	parent := map[string]string{}
	for _, kv := range environOf(ppid) {
		if k, v, ok := strings.Cut(kv, "="); ok && server[k] {
			parent[k] = v
		}
	}
	return parent
}

// ProcEnviron is a process's environment as Linux shows it to the same
// user (nil when it cannot be read).
func ProcEnviron(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return nil // no parent to read: nothing to add
	}
	return strings.FieldsFunc(string(b), func(r rune) bool { return r == 0 })
}
