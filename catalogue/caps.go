package catalogue

import (
	"fmt"
	"iter"
	"strings"
	"unicode/utf8"
)

// TextCap is one of MemPalace's fixed caps on a write's text argument:
// no grant or setting lets a longer one through, and MemPalace refuses
// it only after the whole request has reached the single-writer
// primary.
type TextCap struct {
	Args  []string // the arguments holding it: "items[].content" each item's content, "diary.entry" the diary object's entry
	Max   int      // in UTF-8 bytes, or in characters when Chars
	Chars bool     // counted as Python's len(str): code points
	What  string   // whose cap, in a refusal's words
}

// TextCapOf is the cap on t's text, if it has one: an event's body and
// an artifact's content in UTF-8 bytes (logstream.py's
// DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_ARTIFACT_BYTES), a drawer's or a
// diary entry's text in characters (config.py's sanitize_content): a
// diary_write's entry or content (protocol.py's alias of entry), a
// checkpoint's items' content and its diary's entry or content.
func TextCapOf(t Tool) (TextCap, bool) {
	drawer := TextCap{nil, 100000, true, "MemPalace's drawer content cap"}
	switch t.Name {
	case "event_append":
		return TextCap{[]string{"body"}, 256 << 10, false, "MemPalace's event body cap"}, true
	case "artifact_put":
		return TextCap{[]string{"content"}, 4 << 20, false, "MemPalace's artifact cap"}, true
	case "add_drawer", "update_drawer":
		drawer.Args = []string{"content"}
	case "diary_write":
		drawer.Args = []string{"entry", "content"}
	case "checkpoint":
		drawer.Args = []string{"items[].content", "diary.entry", "diary.content"}
	default:
		return TextCap{}, false
	}
	return drawer, true
}

// OverCap is MemPalace's own refusal of a call of t whose text is over
// its cap (TextCapOf), "" for none: "body is 262145 bytes; maximum is
// 262144 bytes", "content exceeds maximum length of 100000 characters"
// (sanitize_content names the argument content, an entry's too); a
// checkpoint's text is named first ("items[1]: ", "diary: ").
func OverCap(t Tool, args map[string]any) string {
	c, _ := TextCapOf(t)
	for _, arg := range c.Args {
		for place, v := range textsAt(args, arg) {
			if over := c.over(v); over != "" {
				return place + over
			}
		}
	}
	return ""
}

// textsAt is each value at arg (a TextCap's) in args, with its place
// for a refusal: "" for an argument, "items[1]: " for an item's.
func textsAt(args map[string]any, arg string) iter.Seq2[string, any] {
	return func(yield func(string, any) bool) {
		outer, inner, nested := strings.Cut(arg, ".")
		name, list := strings.CutSuffix(outer, "[]")
		switch {
		case !nested:
			yield("", args[arg])
		case list:
			items, _ := args[name].([]any)
			for i, x := range items {
				item, _ := x.(map[string]any)
				if !yield(fmt.Sprintf("%s[%d]: ", name, i), item[inner]) {
					return
				}
			}
		default:
			obj, _ := args[name].(map[string]any)
			yield(name+": ", obj[inner])
		}
	}
}

// over is MemPalace's refusal of v, when it is a text over c, else "".
func (c TextCap) over(v any) string {
	text, _ := v.(string)
	switch {
	case c.Chars && len(text) > c.Max && utf8.RuneCountInString(text) > c.Max:
		return fmt.Sprintf("content exceeds maximum length of %d characters", c.Max)
	case !c.Chars && len(text) > c.Max:
		return fmt.Sprintf("%s is %d bytes; maximum is %d bytes", c.Args[0], len(text), c.Max)
	}
	return ""
}
