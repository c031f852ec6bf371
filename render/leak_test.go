package render

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// attack12: a URL holding $MEMPALACE_REMOTE_TOKEN was written into
// gemini's settings, which expands it and sent the token to the primary in
// the URL path; and a .env line with two assignments made render's warning
// print the token. Neither reaches a config or a warning.
func TestRenderWritesNoExpandableURLAndRepeatsNoSecret(t *testing.T) {
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".gemini"), 0o755)
	env := map[string]string{
		"MEMPALACE_REMOTE_URL":   "http://127.0.0.1:30511/$MEMPALACE_REMOTE_TOKEN/mcp",
		"MEMPALACE_REMOTE_TOKEN": "SECRETTOK_0123456789",
		"MEMPALACE_EDGE":         "1 MEMPALACE_REMOTE_TOKEN=LEAKME",
		"MEMPALACE_AGENT_NAME":   "a MEMPALACE_REMOTE_TOKEN=LEAKME",
		"PI_SETTINGS_MERGE":      "1 MEMPALACE_REMOTE_TOKEN=LEAKME",
	}
	o := opts(home, env)
	o.Targets = []string{TargetGemini, TargetOpencode}
	res, lw, err := Run(o, false)
	if err != nil {
		t.Fatal(err)
	}
	said := ""
	for _, r := range res {
		said += strings.Join(r.Warnings, "\n") + "\n"
	}
	for _, w := range lw {
		said += w.Fix + "\n"
	}
	if strings.Contains(said, "LEAKME") || !strings.Contains(said, "%24") {
		t.Errorf("render's warnings repeat a value or lack the fix for '$':\n%s", said)
	}
	b, _ := os.ReadFile(filepath.Join(home, ".gemini", "settings.json"))
	if strings.Contains(string(b), "$MEMPALACE") || strings.Contains(string(b), "30511") {
		t.Errorf("gemini's settings hold the URL gemini would expand:\n%s", b)
	}
}
