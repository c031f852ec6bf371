package trash

import (
	"encoding/json"
	"strings"

	"github.com/joakimp/devbox-config/catalogue"
)

// Kind is what a kept drawer comes back as when it is restored: MemPalace
// derives most ids from what a drawer holds or when it was written, so
// only some come back under the id they had.
type Kind string

const (
	// KindFiled: filed over MCP (add_drawer, checkpoint): its id derives
	// from wing, room and content, so re-filing it gives the same id.
	KindFiled Kind = "filed"
	// KindRefiled: any other drawer (mined: its id derives from its source
	// file and chunk index; or one whose content was updated after it was
	// filed): re-filed over MCP, it gets the id wing, room and content
	// give (Drawer.RefiledID).
	KindRefiled Kind = "refiled"
	// KindDiary: a diary entry: written again with diary_write, it is a
	// new entry (a new id and timestamp, dated the restore) that
	// diary_read lists again.
	KindDiary Kind = "diary"
	// KindPrior: the version an update_drawer replaced: put back in place
	// with update_drawer (the same id), or, when the drawer has been
	// deleted since, re-filed with add_drawer (Drawer.RefiledID).
	KindPrior Kind = "prior"
)

func (k Kind) String() string { return string(k) }

// Classify says how a drawer deleted (or, for update_drawer, replaced) by
// tool comes back, from what MemPalace reported of it.
func Classify(tool, id, wing, room, content string, meta map[string]any) Kind {
	switch {
	case strings.TrimPrefix(tool, catalogue.Prefix) == "update_drawer":
		return KindPrior
	case meta["type"] == "diary_entry" && meta["agent"] != nil:
		return KindDiary
	case catalogue.DrawerID(wing, room, content) == id:
		return KindFiled
	}
	return KindRefiled
}

// RefiledID is the id re-filing the drawer over MCP gives it.
func (d Drawer) RefiledID() string { return catalogue.DrawerID(d.Wing, d.Room, d.Content) }

// ComesBackAs says, for `gateway trash list` and before a restore, what
// restoring the drawer makes.
func (d Drawer) ComesBackAs() string {
	switch d.Kind {
	case KindFiled:
		return "the same id and content (re-filed with add_drawer)" + overOther
	case KindPrior:
		return "this content again, in place, under the same id (update_drawer; what the drawer holds then is kept in the trash, restorable in turn); " +
			"if the drawer has been deleted by then, filed again in " + d.Wing + "/" + d.Room + " as " + d.RefiledID()
	case KindDiary:
		return "a new diary entry for " + d.Meta("agent") + " with this text, dated the restore (diary_write gives it a new id)"
	}
	return "the same content under a new id, " + d.RefiledID() + " (its id came from its source file and chunk, or its content changed after filing; add_drawer derives the id from wing, room and content)" + overOther
}

// overOther is what a re-filed drawer does to an id that holds other
// content by then (filed again with this content, then updated).
const overOther = "; if that id holds other content by then, that is kept in the trash, restorable in turn, and replaced"

// Meta is a string field of the drawer's metadata ("" if absent).
func (d Drawer) Meta(key string) string {
	var m map[string]any
	json.Unmarshal(d.Metadata, &m) // kept by Keep from a JSON object: it decodes
	s, _ := m[key].(string)
	return s
}

// Lost is what no restore brings back, whatever the kind.
const Lost = "filed_at (a restored drawer is filed at the restore's time; the original is kept in the trash's metadata), " +
	"last_modified, a mined drawer's chunk_index and source-directory identity, the closets (AAAK index entries) MemPalace purged with the drawer (a re-mine on the primary's host rebuilds them), " +
	"the full source path of a drawer deleted by id (MemPalace reports only the file name; a delete_by_source keeps the path it named), " +
	"and anything that pointed at an id that comes back different (a knowledge-graph fact's source_drawer_id, a tunnel's drawer ids)"
