package ladder

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/joakimp/devbox-config/confpos"
)

// What MemPalace itself reads from the environment and its config, by its
// own rules (3.11's config.py).

// PalacePath is the palace directory MemPalace 3.11 uses (config.py's
// MempalaceConfig.palace_path), absolute: MEMPALACE_PALACE_PATH or its
// aliases MEMPALACE_PALACE and MEMPAL_PALACE_PATH; else palace_path in
// its config directory's config.json (configDir); else that directory's
// palace. ~ is expanded everywhere. The edge keeps its state under it
// and hands it to its local MemPalace (ChildEnviron), so the two never
// disagree. A config.json that does not parse is an error naming its line
// and column (MemPalace would ignore it).
func PalacePath(env Lookup) (string, error) {
	get := func(k string) string { v, _ := env(k); return v }
	home := get("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no HOME to find the palace: %w", err)
		}
		home = h
	}
	expand := func(p string) string { return expandUser(p, home) }
	abs := func(p string) (string, error) {
		a, err := filepath.Abs(expand(p))
		if err != nil {
			return "", fmt.Errorf("the palace %s: %w", shown(p, strings.TrimSpace(get(EnvRemoteToken))), err)
		}
		return a, nil
	}
	for _, k := range []string{EnvPalacePath, "MEMPALACE_PALACE", "MEMPAL_PALACE_PATH"} {
		if v := get(k); v != "" {
			return abs(v)
		}
	}
	cfgPath := filepath.Join(configDir(get, home), "config.json")
	if b, err := os.ReadFile(cfgPath); err == nil {
		var cfg struct {
			PalacePath string `json:"palace_path"`
		}
		if err := (confpos.JSON{}).DecodeJSON(cfgPath, b, &cfg); err != nil {
			return "", err
		}
		if cfg.PalacePath != "" {
			return abs(cfg.PalacePath)
		}
	}
	return abs(filepath.Join(filepath.Dir(cfgPath), "palace"))
}

// configDir is MemPalace 3.11's config directory (config.py's
// _default_config_dir): MEMPALACE_CONFIG_DIR; ~/.mempalace when that
// holds an install (config.json, people_map.json or palace/chroma.sqlite3:
// an empty ~/.mempalace, a volume's mount point, does not count); else
// $XDG_CONFIG_HOME/mempalace (when absolute); else ~/.config/mempalace.
func configDir(get func(string) string, home string) string {
	legacy := filepath.Join(home, ".mempalace")
	isFile := func(rel string) bool {
		fi, err := os.Stat(filepath.Join(legacy, rel))
		return err == nil && fi.Mode().IsRegular()
	}
	switch x := expandUser(get("XDG_CONFIG_HOME"), home); {
	case strings.TrimSpace(get("MEMPALACE_CONFIG_DIR")) != "":
		return expandUser(get("MEMPALACE_CONFIG_DIR"), home)
	case isFile("config.json") || isFile("people_map.json") || isFile(filepath.Join("palace", "chroma.sqlite3")):
		return legacy
	case strings.TrimSpace(x) != "" && filepath.IsAbs(x):
		return filepath.Join(x, "mempalace")
	}
	return filepath.Join(home, ".config", "mempalace")
}

// expandUser is Python's os.path.expanduser for ~ and ~/...: home. (It
// leaves ~name alone, which Python expands to that user's home.)
func expandUser(p, home string) string {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p
	}
	return filepath.Join(home, p[1:])
}

// EnvEmbeddingModel is MemPalace's variable for its embedding model.
const EnvEmbeddingModel = "MEMPALACE_EMBEDDING_MODEL"

// EmbeddingModel is the embedding model MemPalace's processes here use,
// and where that comes from: MEMPALACE_EMBEDDING_MODEL, else
// embedding_model in its config directory's config.json (configDir), else
// MemPalace's default, minilm.
func EmbeddingModel(env Lookup) (model, from string) {
	get := func(k string) string { v, _ := env(k); return strings.TrimSpace(v) }
	if m := get(EnvEmbeddingModel); m != "" {
		return m, EnvEmbeddingModel
	}
	cfg := filepath.Join(configDir(func(k string) string { v, _ := env(k); return v }, get("HOME")), "config.json")
	var c struct {
		Model string `json:"embedding_model"`
	}
	if b, err := os.ReadFile(cfg); err == nil && (confpos.JSON{}).DecodeJSON(cfg, b, &c) == nil && c.Model != "" { // keys as MemPalace reads them: exactly
		return c.Model, cfg
	}
	return "minilm", "MemPalace's default (neither MEMPALACE_EMBEDDING_MODEL nor embedding_model in " + cfg + " is set)"
}
