package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/catalogue"
)

// newFiling is add_drawer's answer for a drawer it filed, in MemPalace
// 3.11's order of members.
type newFiling struct {
	Success  bool     `json:"success"`
	DrawerID string   `json:"drawer_id"`
	Wing     string   `json:"wing"`
	Room     string   `json:"room"`
	Chunks   int      `json:"chunks"`
	ChunkIDs []string `json:"chunk_ids,omitempty"`
}

// unreadAsNew answers a write that found its drawer filed already
// (MemPalace's already_exists) in a wing the device writes but does not
// read as a new filing: add_drawer's answer, and a checkpoint's item
// among its added. already_exists would confirm to the device that this
// exact content is there (attack44 F6). It runs after the provenance
// index read the answer (the drawer stays its first filer's).
func unreadAsNew(d *Device, t catalogue.Tool, args map[string]any, resp []byte) []byte {
	if t.Name != "add_drawer" && t.Name != "checkpoint" {
		return resp // no other write files a drawer: its answer is not read again
	}
	res := resultOf(resp)
	switch {
	case res == nil:
		return resp
	case t.Name == "add_drawer" && res["recovered"] == nil:
		if nf, ok := filedAnew(d, res, args); ok {
			return withText(resp, nf, true)
		}
	case t.Name == "add_drawer":
		// A lost answer the gateway made itself (filedLookUp): its shape.
		if nf, ok := filedAnew(d, res, args); ok {
			return withText(resp, map[string]any{"success": true, "drawer_id": nf.DrawerID, "wing": nf.Wing, "room": nf.Room, "recovered": res["recovered"]}, false)
		}
	case t.Name == "checkpoint":
		added, _ := res["added"].([]any)
		items, _ := args["items"].([]any)
		changed := false
		for i, x := range added {
			a, _ := x.(map[string]any)
			for _, y := range items {
				item, _ := y.(map[string]any)
				if nf, ok := filedAnew(d, a, item); ok {
					added[i], changed = nf, true
					break
				}
			}
		}
		if changed {
			return withText(resp, res, false)
		}
	}
	return resp
}

// filedAnew is res, an already_exists answer for the drawer args (wing,
// room, content) files, as a new filing of it, when the device does not
// read its wing (false otherwise).
func filedAnew(d *Device, res, args map[string]any) (newFiling, bool) {
	if res["reason"] != "already_exists" {
		return newFiling{}, false // the common answer: nothing to clean or hash
	}
	wing, room, content := catalogue.SanitizedName(str(args["wing"])), catalogue.SanitizedName(str(args["room"])), str(args["content"])
	id := catalogue.DrawerID(wing, room, content)
	if str(res["drawer_id"]) != id || d.reads(wing) {
		return newFiling{}, false
	}
	nf := newFiling{Success: true, DrawerID: id, Wing: wing, Room: room, Chunks: (utf8.RuneCountInString(content) + diaryChunk - 1) / diaryChunk}
	for i := 0; nf.Chunks > 1 && i < nf.Chunks; i++ {
		nf.ChunkIDs = append(nf.ChunkIDs, fmt.Sprintf("%s_chunk_%06d", id, i))
	}
	return nf, true
}

// withText is resp with its result's text replaced by v, indented as
// MemPalace's (python: non-ASCII and <>& as they are) or as the gateway's
// own answers (json.MarshalIndent); resp when it cannot be.
func withText(resp []byte, v any, python bool) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(!python)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return resp // a map decoded from JSON encodes; kept as it was otherwise
	}
	out, err := sjson.SetBytes(resp, "result.content.0.text", string(bytes.TrimSuffix(b.Bytes(), []byte("\n"))))
	if err != nil {
		return resp
	}
	return out
}
