package ladder

import (
	"fmt"

	"github.com/joakimp/devbox-config/redact"
)

// shown is a bad value as a warning or an error says it: quoted when
// showable (tok is the token), else "its value (not shown: why)", like the
// URL's query ("not repeated here: it may hold a secret").
func shown(v, tok string) string {
	if why := redact.NotShown(v, tok); why != "" {
		return "its value (not shown: " + why + ")"
	}
	return fmt.Sprintf("%q", v)
}
