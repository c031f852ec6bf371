package ladder

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
)

// What MemPalace itself reads from the environment and its config, by its
// own rules (3.11's config.py), where they differ from the ladder's: for
// doctor to say where MemPalace's processes will look.

// chromaFile is MemPalace's default store in a palace with data.
const chromaFile = "chroma.sqlite3"

// MemPalacePalace is the palace directory MemPalace 3.11 uses, and why:
// MEMPALACE_PALACE_PATH or its aliases MEMPALACE_PALACE and
// MEMPAL_PALACE_PATH; else palace_path in its config directory's
// config.json, else that directory's palace. Its config directory is
// MEMPALACE_CONFIG_DIR; ~/.mempalace when that holds an install
// (config.json, people_map.json or palace/chroma.sqlite3: an empty
// ~/.mempalace, a volume's mount point, does not count); else
// $XDG_CONFIG_HOME/mempalace (an absolute XDG_CONFIG_HOME), else
// ~/.config/mempalace. Releases before 3.10 always used ~/.mempalace.
// PalacePath, the ladder's own rule, is the pre-3.10 one. "" when HOME is
// unknown.
func MemPalacePalace(env Lookup) (dir, why string) {
	get := func(k string) string { v, _ := env(k); return strings.TrimSpace(v) }
	home := get("HOME")
	expand := func(p string) string {
		if p == "~" || strings.HasPrefix(p, "~/") {
			return filepath.Join(home, strings.TrimPrefix(p, "~"))
		}
		return p
	}
	for _, k := range []string{EnvPalacePath, "MEMPALACE_PALACE", "MEMPAL_PALACE_PATH"} {
		if v := get(k); v != "" {
			return expand(v), k
		}
	}
	if home == "" {
		return "", ""
	}
	cfgDir, why := get("MEMPALACE_CONFIG_DIR"), "MEMPALACE_CONFIG_DIR"
	if cfgDir == "" {
		cfgDir, why = filepath.Join(home, ".mempalace"), "its config directory, ~/.mempalace"
		installed := false
		for _, marker := range []string{"config.json", "people_map.json", filepath.Join("palace", chromaFile)} {
			fi, err := os.Stat(filepath.Join(cfgDir, marker))
			installed = installed || err == nil && fi.Mode().IsRegular()
		}
		if !installed {
			cfgDir, why = filepath.Join(home, ".config", "mempalace"), "its XDG config directory: ~/.mempalace holds no install (no config.json, people_map.json or palace/chroma.sqlite3)"
			if x := get("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
				cfgDir = filepath.Join(x, "mempalace")
			}
		}
	}
	cfgDir = expand(cfgDir)
	var c struct {
		Palace string `json:"palace_path"`
	}
	if b, err := os.ReadFile(filepath.Join(cfgDir, "config.json")); err == nil && json.Unmarshal(b, &c) == nil && c.Palace != "" {
		return expand(c.Palace), "palace_path in " + filepath.Join(cfgDir, "config.json")
	}
	return filepath.Join(cfgDir, "palace"), why
}

// EmbeddingModel is the embedding model MemPalace's processes here use,
// and where that comes from: MEMPALACE_EMBEDDING_MODEL, else
// embedding_model in ~/.mempalace/config.json, else MemPalace's default,
// minilm.
func EmbeddingModel(env Lookup) (model, from string) {
	get := func(k string) string { v, _ := env(k); return strings.TrimSpace(v) }
	if m := get("MEMPALACE_EMBEDDING_MODEL"); m != "" {
		return m, "MEMPALACE_EMBEDDING_MODEL"
	}
	cfg := filepath.Join(get("HOME"), ".mempalace", "config.json")
	var c struct {
		Model string `json:"embedding_model"`
	}
	if b, err := os.ReadFile(cfg); err == nil && json.Unmarshal(b, &c) == nil && c.Model != "" {
		return c.Model, cfg
	}
	return "minilm", "MemPalace's default (neither MEMPALACE_EMBEDDING_MODEL nor embedding_model in " + cfg + " is set)"
}
