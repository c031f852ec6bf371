package catalogue

import (
	"strings"
	"unicode"
)

// WingsOf lists the wing(s) a call touches, by its record's Wings rule.
// drawerWing is the wing of the drawer a DrawerWing call names, looked up
// by the caller ("" when unknown). An empty string in the list means the
// call names no wing where one is needed. NoWing and KnowledgeGraph calls
// give nil; an ArgWing read without a wing gives nil too (palace-wide).
func (t Tool) WingsOf(args map[string]any, drawerWing string) []string {
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	switch t.Wings {
	case ArgWing:
		if w := str(args, "wing"); w != "" || !t.Reads {
			return []string{w}
		}
	case DiaryWing:
		return []string{DiaryWingFor(args)}
	case DrawerWing:
		wings := []string{drawerWing}
		if w := str(args, "wing"); w != "" && w != drawerWing {
			wings = append(wings, w) // a move touches both
		}
		return wings
	case TunnelWings:
		return []string{str(args, "source_wing"), str(args, "target_wing")}
	case CheckpointWings:
		var wings []string
		items, _ := args["items"].([]any)
		for _, it := range items {
			m, _ := it.(map[string]any)
			wings = append(wings, str(m, "wing"))
		}
		if d, ok := args["diary"].(map[string]any); ok {
			wings = append(wings, DiaryWingFor(d))
		}
		return wings
	}
	return nil
}

// DiaryWingFor is the wing a diary call (diary_write, diary_read, a
// checkpoint's diary) writes or reads: its "wing", else the agent's diary
// wing.
func DiaryWingFor(args map[string]any) string {
	if w, _ := args["wing"].(string); w != "" {
		return w
	}
	a, _ := args["agent_name"].(string)
	return DiaryWingOf(a)
}

// DiaryEntry is a diary_write's text: "entry", else its alias "content"
// ("entry" wins, as MemPalace's dispatch does).
func DiaryEntry(args map[string]any) string {
	if e, _ := args["entry"].(string); e != "" {
		return e
	}
	c, _ := args["content"].(string)
	return c
}

// PythonSpace is Python 3's str.isspace for one character (what
// str.strip() removes, as MemPalace's sanitize_name does to wing, room
// and agent names): Go's unicode.IsSpace, plus U+001C..U+001F (the
// information separators), which Python counts and Go does not.
// gateway's TestRealPythonWhitespace checks it against the real
// MemPalace's Python over every code point.
func PythonSpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

// SanitizedName is a name as MemPalace files it: stripped of whitespace
// at both ends (sanitize_name's strip).
func SanitizedName(s string) string { return strings.TrimFunc(s, PythonSpace) }
