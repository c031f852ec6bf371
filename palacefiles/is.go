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
