package gateway

import (
	"path/filepath"
	"strings"
)

// DefaultConfigFile is where `devbox-config gateway` looks for its config
// when --config is not given: in the directory it runs in.
const DefaultConfigFile = "gateway.jsonc"

// Hint is the command line that runs `devbox-config gateway SUB` on the
// config at path, as a user pastes it: --config comes right after `gateway`
// (a flag of the gateway command, inherited by every subcommand) and names
// the absolute path, so the hint works from any directory; it is left out
// when path is the default, as the user typed it.
func Hint(path, sub string) string {
	if filepath.Clean(path) == DefaultConfigFile {
		return "devbox-config gateway " + sub
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return "devbox-config gateway --config " + shellWord(path) + " " + sub
}

// shellWord quotes s for a POSIX shell when it needs it.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+,:@=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
