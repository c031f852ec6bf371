package gateway

import (
	"github.com/joakimp/devbox-config/shellword"
	"path/filepath"
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
	return "devbox-config gateway --config " + shellword.Quote(path) + " " + sub
}
