package edge

import (
	"encoding/json"
	"strings"
	"testing"
)

// The edge's own members that quote the primary's reason (an error's
// "error", an annotated answer's edge.primary) carry bidi and invisible
// characters as JSON escapes, as the controls are, and decode to the same
// text (attack61 F4: a raw U+202E reversed the text an agent UI showed).
func TestTheEdgesOwnMembersCarryNoRawBidiOrInvisibleCharacter(t *testing.T) {
	t.Parallel()
	reason := "refused \x1b]0;pwned\x07 \u202eevil\u202c \u200b NUL:\x00 END\r\n- evt_fake"
	for name, res := range map[string]string{
		"error":        resultText(errorResult("the primary refused this write: "+reason, map[string]any{"primary": reason})),
		"edge.primary": resultText(annotate(jsonResult(map[string]any{"results": []any{}}, false), map[string]any{"primary": reason}, true)),
	} {
		for _, raw := range []string{"\x1b", "\x00", "\u202e", "\u202c", "\u200b", "\r"} {
			if strings.Contains(res, raw) {
				t.Errorf("%s: the answer holds a raw %q: %q", name, raw, res)
			}
		}
		var m struct {
			Error string         `json:"error"`
			Edge  map[string]any `json:"edge"`
		}
		if err := json.Unmarshal([]byte(res), &m); err != nil || m.Edge["primary"] != reason {
			t.Errorf("%s: does not decode to the primary's reason (%v): %q", name, err, res)
		}
	}
}
