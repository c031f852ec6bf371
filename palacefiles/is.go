package palacefiles

import (
	"os"
	"path/filepath"
)

// SidecarFile is MemPalace's embedder identity file in a palace
// directory, written on the palace's first write.
const SidecarFile = "mempalace_embedder.json"

// Is reports that dir holds a palace's files: its ChromaFile or its
// SidecarFile.
func Is(dir string) bool {
	for _, name := range []string{ChromaFile, SidecarFile} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode().IsRegular() {
			return true
		}
	}
	return false
}

// SharedParent is another palace in palace's parent directory (a sibling
// directory that Is one), "" when there is none: MemPalace 3.11 keeps
// tunnels.json and hallways.json in a palace's parent (mempalace/config.py),
// so two palaces side by side read and write the same tunnels.
func SharedParent(palace string) string {
	parent := filepath.Dir(filepath.Clean(palace))
	entries, err := os.ReadDir(parent)
	if err != nil {
		return "" // no palace yet: nothing shared
	}
	self, _ := os.Stat(palace)
	for _, e := range entries {
		other := filepath.Join(parent, e.Name())
		fi, err := os.Stat(other)
		if err == nil && fi.IsDir() && (self == nil || !os.SameFile(self, fi)) && Is(other) {
			return other
		}
	}
	return ""
}
