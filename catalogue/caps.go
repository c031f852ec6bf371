package catalogue

import (
	"fmt"
	"unicode/utf8"
)

// TextCap is one of MemPalace's fixed caps on a write's text argument:
// no grant or setting lets a longer one through, and MemPalace refuses
// it only after the whole request has reached the single-writer
// primary.
type TextCap struct {
	Arg   string // the argument
	Max   int    // in UTF-8 bytes, or in characters when Chars
	Chars bool   // counted as Python's len(str): code points
	What  string // whose cap, in a refusal's words
}

// TextCapOf is the cap on t's text, if it has one: an event's body and
// an artifact's content in UTF-8 bytes (logstream.py's
// DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_ARTIFACT_BYTES), a drawer's or a
// diary entry's text in characters (config.py's sanitize_content).
func TextCapOf(t Tool) (TextCap, bool) {
	switch t.Name {
	case "event_append":
		return TextCap{"body", 256 << 10, false, "MemPalace's event body cap"}, true
	case "artifact_put":
		return TextCap{"content", 4 << 20, false, "MemPalace's artifact cap"}, true
	case "add_drawer", "update_drawer":
		return TextCap{"content", 100000, true, "MemPalace's drawer content cap"}, true
	case "diary_write":
		return TextCap{"entry", 100000, true, "MemPalace's drawer content cap"}, true
	}
	return TextCap{}, false
}

// OverCap is MemPalace's own refusal of a call of t whose text is over
// its cap (TextCapOf), "" for none: "body is 262145 bytes; maximum is
// 262144 bytes", "content exceeds maximum length of 100000 characters"
// (sanitize_content names the argument content, an entry's too).
func OverCap(t Tool, args map[string]any) string {
	c, ok := TextCapOf(t)
	text, _ := args[c.Arg].(string)
	switch {
	case !ok:
		return ""
	case c.Chars && len(text) > c.Max && utf8.RuneCountInString(text) > c.Max:
		return fmt.Sprintf("content exceeds maximum length of %d characters", c.Max)
	case !c.Chars && len(text) > c.Max:
		return fmt.Sprintf("%s is %d bytes; maximum is %d bytes", c.Arg, len(text), c.Max)
	}
	return ""
}
