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

// WithParentEnv is env, falling back for MEMPALACE_* variables to the
// parent process's environment (/proc/<ppid>/environ) when env has
// EnvFromParent=1. environOf reads a process's environment (nil: from
// /proc); a parent that cannot be read adds nothing.
func WithParentEnv(env Lookup, ppid int, environOf func(pid int) []string) Lookup {
	if v, _ := env(EnvFromParent); strings.TrimSpace(v) != "1" {
		return env
	}
	if environOf == nil {
		environOf = procEnviron
	}
	parent := map[string]string{}
	for _, kv := range environOf(ppid) {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "MEMPALACE_") {
			parent[k] = v
		}
	}
	return func(k string) (string, bool) {
		if v, ok := env(k); ok {
			return v, ok
		}
		v, ok := parent[k]
		return v, ok
	}
}

// procEnviron is a process's environment as Linux shows it to the same
// user (nil when it cannot be read).
func procEnviron(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return nil // no parent to read: nothing to add
	}
	return strings.FieldsFunc(string(b), func(r rune) bool { return r == 0 })
}
