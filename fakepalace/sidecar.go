package fakepalace

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/joakimp/devbox-config/filewrite"
)

// SidecarFile is MemPalace's embedder identity record in the palace
// (backends/_sidecar.py): {collection: {"model_name", "dimension"}}.
const SidecarFile = "mempalace_embedder.json"

// drawersCollection is the collection the identity is recorded for.
const drawersCollection = "mempalace_drawers"

// sidecarEntry is one collection's identity, in MemPalace's key order.
type sidecarEntry struct {
	ModelName string `json:"model_name"`
	Dimension int    `json:"dimension"`
}

// recordEmbedder writes the drawers collection's identity into
// <dir>/mempalace_embedder.json when it is not recorded yet, as MemPalace
// 3.11.0 does on the first write: model_name the embedder's name and
// dimension 0 (3.11.0 records the core embedder without probing it),
// json.dump(indent=2) bytes, mode 0600, atomically (filewrite), keeping other
// collections' entries. Unlike MemPalace, a palace that already holds
// drawers is recorded too (MemPalace warns and leaves that to `mempalace
// palace set-embedder`, which the double does not have).
func recordEmbedder(dir, model string) error {
	if dir == "" {
		return nil
	}
	path := filepath.Join(dir, SidecarFile)
	doc := map[string]json.RawMessage{}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		if json.Unmarshal(b, &doc) != nil {
			doc = map[string]json.RawMessage{} // unreadable reads as unknown, as MemPalace's
		}
		var e sidecarEntry
		if json.Unmarshal(doc[drawersCollection], &e) == nil && e.ModelName != "" {
			return nil // recorded
		}
	}
	entry, _ := json.Marshal(sidecarEntry{ModelName: model}) // a struct of a string and an int always encodes
	doc[drawersCollection] = entry
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	_, err = filewrite.Write(path, out, 0o600)
	return err
}
