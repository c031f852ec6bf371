package mailbox

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// The bounds of the mempalace_mailbox tool's answer and the mailbox
// resource's (docs/devbox.md): any device may address asks to any agent,
// each with a body of up to 256 KB and 64 KB of metadata, so without them
// 50 asks made a 12 MB answer that no agent's context takes (attack111
// F3). The text (Text) cuts each body at bodyMax characters already.
const (
	// AnswerBodyMax is how many bytes of an item's body an answer gives;
	// a longer body is cut on a character's edge, ends in "…", and the
	// item says its whole size in "body_bytes".
	AnswerBodyMax = 1024
	// AnswerMetaMax is how many bytes of metadata (as JSON) an item keeps;
	// larger, it is left out and the item says its size in
	// "metadata_bytes".
	AnswerMetaMax = 1024
	// AnswerMax bounds the whole answer: the items that do not fit are
	// left out, counted in "left_out" (those from trusted senders are kept
	// first, as under a limit).
	AnswerMax = 64 << 10
)

// Bounded is r as the tool and the resource give it: each item cut
// (AnswerBodyMax, AnswerMetaMax) and at most AnswerMax bytes in all as
// ToolResult writes it, with "bound" saying what was cut and how to read
// one item whole (Only). An answer within the bounds is r as it is.
func Bounded(r Result) Result {
	items, cut := make([]Item, len(r.Owed)), 0
	for i, it := range r.Owed {
		var c bool
		if items[i], c = cutItem(it); c {
			cut++
		}
	}
	shell := r
	shell.Owed = []Item{}
	room := AnswerMax - answerSize(shell, "") - 1024 // the note, left_out and count's digits
	keep := make([]bool, len(items))
	for _, trusted := range []bool{true, false} {
		for i, it := range items {
			if n := answerSize(it, "    "); (it.Event.distrust() == "") == trusted && n <= room {
				keep[i], room = true, room-n
			}
		}
	}
	out, leftBytes := r, 0
	out.Owed = []Item{}
	for i, it := range items {
		if keep[i] {
			out.Owed = append(out.Owed, it)
		} else {
			out.LeftOut, leftBytes = out.LeftOut+1, leftBytes+len(r.Owed[i].Event.Raw)
		}
	}
	out.Count = len(out.Owed)
	if cut > 0 || out.LeftOut > 0 {
		out.Bound = fmt.Sprintf("bounded to %d bytes: %d %s cut (a body past %d bytes ends in \"…\" and says its size in body_bytes; metadata past %d bytes is left out, its size in metadata_bytes); %d %s (%d bytes) left out (left_out); mempalace_mailbox(event_id=<id>) gives one item whole, and a stream or a lower limit lists fewer",
			AnswerMax, cut, plural(cut, "item", "items"), AnswerBodyMax, AnswerMetaMax, out.LeftOut, plural(out.LeftOut, "item", "items"), leftBytes)
	}
	return out
}

// cutItem is it with its body cut to AnswerBodyMax bytes and metadata
// past AnswerMetaMax left out, each saying its size; cut says either was.
func cutItem(it Item) (_ Item, cut bool) {
	raw := it.Event.Raw
	// raw is an object (ParseEvent decoded it), so sjson cannot fail on it
	if b := gjson.GetBytes(raw, "body"); b.Type == gjson.String && len(b.Str) > AnswerBodyMax {
		end := AnswerBodyMax
		for end > AnswerBodyMax-utf8.UTFMax && !utf8.RuneStart(b.Str[end]) {
			end--
		}
		raw, _ = sjson.SetBytes(raw, "body", b.Str[:end]+"…")
		raw, _ = sjson.SetBytes(raw, "body_bytes", len(b.Str))
		cut = true
	}
	if m := gjson.GetBytes(raw, "metadata"); len(m.Raw) > AnswerMetaMax {
		raw, _ = sjson.DeleteBytes(raw, "metadata")
		raw, _ = sjson.SetBytes(raw, "metadata_bytes", len(m.Raw))
		cut = true
	}
	it.Event.Raw = raw
	return it, cut
}

// answerSize is how many bytes v takes in ToolResult's text at the
// indent given (an item's: "    "), with the ",\n" before it.
func answerSize(v any, indent string) int {
	b, err := json.MarshalIndent(v, indent, "  ")
	if err != nil {
		return AnswerMax + 1 // never fits; ToolResult names the error
	}
	return len(PrintableJSON(b)) + len(",\n") + len(indent)
}

// Only is r holding only the owed item id, whole (the tool's event_id),
// or an error naming id when it is not owed: among the reasons, that it
// may be one of the events withheld as from untrusted senders, and how
// to see them, when r withheld any (attack113 F7).
func (r Result) Only(id string) (Result, error) {
	for _, it := range r.Owed {
		if it.Event.ID == id {
			r.Owed, r.Count, r.More, r.OtherStreams = []Item{it}, 1, 0, 0
			return r, nil
		}
	}
	why := "answered, not addressed to it, on another stream than the one asked for, or no such event"
	if n := r.UntrustedWithheld; n > 0 {
		why = fmt.Sprintf("answered, not addressed to it, on another stream than the one asked for, no such event, or one of the %d %s withheld as from untrusted senders: %s", n, plural(n, "event", "events"), SeeWithheld)
	}
	return Result{}, fmt.Errorf("event_id: %s is not owed by %s (%s): mempalace_mailbox without event_id lists what is", Printable(id), Quoted(r.Agent), why)
}
