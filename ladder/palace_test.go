package ladder

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// PalacePath follows MemPalace 3.11's own resolution (config.py:
// MempalaceConfig.palace_path and _default_config_dir) step by step, so
// the edge's outbox and the local MemPalace's palace are one directory.
func TestPalacePathIsMemPalaces(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	file := func(rel, content string) func(string) {
		return func(home string) {
			p := filepath.Join(home, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	dir := func(rel string) func(string) {
		return func(home string) {
			if err := os.MkdirAll(filepath.Join(home, rel), 0o700); err != nil {
				t.Fatal(err)
			}
		}
	}
	const xdgDefault = "~/.config/mempalace/palace"
	for _, c := range []struct {
		name  string
		setup []func(home string)
		env   map[string]string // $H is the temp HOME; a ~ is PalacePath's to expand
		want  string            // "~/..." is under the temp HOME
	}{
		{name: "a fresh HOME: the XDG default", want: xdgDefault},
		{name: "an empty ~/.mempalace (a volume's mount point) is no install", setup: []func(string){dir(".mempalace")}, want: xdgDefault},
		{name: "~/.mempalace/palace without chroma.sqlite3 (an old edge's outbox) is no install", setup: []func(string){file(".mempalace/palace/edge/outbox.sqlite3", "x")}, want: xdgDefault},
		{name: "a directory named config.json is no install", setup: []func(string){dir(".mempalace/config.json")}, want: xdgDefault},
		{name: "~/.mempalace/config.json marks an install", setup: []func(string){file(".mempalace/config.json", "{}")}, want: "~/.mempalace/palace"},
		{name: "~/.mempalace/people_map.json marks an install", setup: []func(string){file(".mempalace/people_map.json", "{}")}, want: "~/.mempalace/palace"},
		{name: "~/.mempalace/palace/chroma.sqlite3 marks an install", setup: []func(string){file(".mempalace/palace/chroma.sqlite3", "")}, want: "~/.mempalace/palace"},
		{name: "an install beats XDG_CONFIG_HOME", setup: []func(string){file(".mempalace/people_map.json", "{}")}, env: map[string]string{"XDG_CONFIG_HOME": "~/xdg"}, want: "~/.mempalace/palace"},
		{name: "an absolute XDG_CONFIG_HOME", env: map[string]string{"XDG_CONFIG_HOME": "$H/xdg"}, want: "~/xdg/mempalace/palace"},
		{name: "XDG_CONFIG_HOME with ~ is absolute once expanded", env: map[string]string{"XDG_CONFIG_HOME": "~/xdg"}, want: "~/xdg/mempalace/palace"},
		{name: "a relative XDG_CONFIG_HOME is ignored", env: map[string]string{"XDG_CONFIG_HOME": "xdg"}, want: xdgDefault},
		{name: "a blank XDG_CONFIG_HOME is ignored", env: map[string]string{"XDG_CONFIG_HOME": " "}, want: xdgDefault},
		{name: "MEMPALACE_CONFIG_DIR beats an install", setup: []func(string){file(".mempalace/config.json", `{"palace_path": "/not/this"}`)}, env: map[string]string{"MEMPALACE_CONFIG_DIR": "~/cfg"}, want: "~/cfg/palace"},
		{name: "MEMPALACE_CONFIG_DIR absolute", env: map[string]string{"MEMPALACE_CONFIG_DIR": "$H/cfg"}, want: "~/cfg/palace"},
		{name: "a blank MEMPALACE_CONFIG_DIR is unset", env: map[string]string{"MEMPALACE_CONFIG_DIR": " "}, want: xdgDefault},
		{name: "palace_path in the XDG directory's config.json, ~ expanded", setup: []func(string){file(".config/mempalace/config.json", `{"palace_path": "~/elsewhere"}`)}, want: "~/elsewhere"},
		{name: "palace_path in ~/.mempalace/config.json", setup: []func(string){file(".mempalace/config.json", `{"palace_path": "~/old"}`)}, want: "~/old"},
		{name: "palace_path in MEMPALACE_CONFIG_DIR's config.json", setup: []func(string){file("cfg/config.json", `{"palace_path": "~/p"}`)}, env: map[string]string{"MEMPALACE_CONFIG_DIR": "~/cfg"}, want: "~/p"},
		{name: "a Palace_Path in config.json is not palace_path (MemPalace reads keys as written)", setup: []func(string){file(".config/mempalace/config.json", `{"Palace_Path": "~/elsewhere"}`)}, want: xdgDefault},
		{name: "a config.json without palace_path", setup: []func(string){file(".config/mempalace/config.json", `{"embedding_model": "minilm"}`)}, want: xdgDefault},
		{name: "MEMPALACE_PALACE_PATH beats config.json", setup: []func(string){file(".mempalace/config.json", `{"palace_path": "/not/this"}`)}, env: map[string]string{"MEMPALACE_PALACE_PATH": "~/env"}, want: "~/env"},
		{name: "MEMPALACE_PALACE_PATH bare ~", env: map[string]string{"MEMPALACE_PALACE_PATH": "~"}, want: "~"},
		{name: "MEMPALACE_PALACE_PATH relative is made absolute, .. collapsed", env: map[string]string{"MEMPALACE_PALACE_PATH": "a/../p"}, want: filepath.Join(wd, "p")},
		{name: "MEMPALACE_PALACE_PATH beats its aliases", env: map[string]string{"MEMPALACE_PALACE_PATH": "/one", "MEMPALACE_PALACE": "/two", "MEMPAL_PALACE_PATH": "/three"}, want: "/one"},
		{name: "MEMPALACE_PALACE beats MEMPAL_PALACE_PATH", env: map[string]string{"MEMPALACE_PALACE": "~/two", "MEMPAL_PALACE_PATH": "/three"}, want: "~/two"},
		{name: "MEMPAL_PALACE_PATH", env: map[string]string{"MEMPAL_PALACE_PATH": "/three/"}, want: "/three"},
		{name: "an empty MEMPALACE_PALACE_PATH (compose's empty default) is unset", env: map[string]string{"MEMPALACE_PALACE_PATH": "", "MEMPAL_PALACE_PATH": "/three"}, want: "/three"},
	} {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			for _, s := range c.setup {
				s(home)
			}
			env := map[string]string{"HOME": home}
			for k, v := range c.env {
				env[k] = strings.ReplaceAll(v, "$H", home)
			}
			want := c.want
			if strings.HasPrefix(want, "~") {
				want = filepath.Join(home, want[1:])
			}
			if got, err := PalacePath(lookupOf(env)); err != nil || got != want {
				t.Errorf("got %q %v, want %q", got, err, want)
			}
		})
	}
}

// A config.json MemPalace would read that does not parse stops the edge
// with the file named, wherever its config directory is.
func TestPalacePathNamesABrokenConfig(t *testing.T) {
	home := t.TempDir()
	file := filepath.Join(home, ".config", "mempalace", "config.json")
	os.MkdirAll(filepath.Dir(file), 0o700)
	os.WriteFile(file, []byte(`{`), 0o600)
	if _, err := PalacePath(lookupOf(map[string]string{"HOME": home})); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("a broken config.json names the file: %v", err)
	}
}

// embedding_model comes from the config.json MemPalace reads: on a fresh
// HOME, ~/.config/mempalace's, not ~/.mempalace's.
func TestEmbeddingModelFromMemPalacesConfigDir(t *testing.T) {
	home := t.TempDir()
	file := filepath.Join(home, ".config", "mempalace", "config.json")
	os.MkdirAll(filepath.Dir(file), 0o700)
	os.WriteFile(file, []byte(`{"embedding_model": "embeddinggemma"}`), 0o600)
	if m, from := EmbeddingModel(lookupOf(map[string]string{"HOME": home})); m != "embeddinggemma" || from != file {
		t.Errorf("got %q from %q, want embeddinggemma from %s", m, from, file)
	}
	// MemPalace reads keys as written: an "Embedding_Model" is not its model
	os.WriteFile(file, []byte(`{"Embedding_Model": "embeddinggemma"}`), 0o600)
	if m, _ := EmbeddingModel(lookupOf(map[string]string{"HOME": home})); m != "minilm" {
		t.Errorf("Embedding_Model: got %q, want MemPalace's default, minilm", m)
	}
}
