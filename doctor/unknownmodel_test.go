package doctor

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/fakepalace"
)

// operator.md's device .env printed MEMPALACE_EMBEDDING_MODEL=...; copied
// as it was, doctor said "nothing to fix", MemPalace embedded with minilm
// instead and stamped the palace so (attack65 F2). An embedding model
// MemPalace does not know is an error naming the variable, where it is
// set and the values MemPalace takes; one in another case is MemPalace's
// own.
func TestDoctorRefusesAnEmbeddingModelMemPalaceDoesNotKnow(t *testing.T) {
	srvURL := primary(t, "", fakepalace.Options{}).URL()
	b := newBox(t)
	b.edgeMode(srvURL, "")
	env := filepath.Join(b.home, ".env")
	write(t, env, "MEMPALACE_EDGE=1\n# the fleet's one model\nMEMPALACE_EMBEDDING_MODEL=...\n", 0o600)
	b.opts.EnvFiles = []string{env}
	b.env["MEMPALACE_EMBEDDING_MODEL"] = "..."
	fs := b.run()
	only(t, fs, "error:embedder-sidecar")
	for _, want := range []string{`MEMPALACE_EMBEDDING_MODEL="..." (` + env + `:3)`, "embeddinggemma, embeddinggemma2, minilm, openai-compat", "MemPalace 3.11.0"} {
		if !strings.Contains(fs[0].Message+fs[0].Fix, want) {
			t.Errorf("the finding does not say %q:\n%s\n%s", want, fs[0].Message, fs[0].Fix)
		}
	}
	if !strings.Contains(fs[0].Fix, "the primary and every palace") {
		t.Errorf("the fix does not say the fleet shares one model: %s", fs[0].Fix)
	}
	b.env["MEMPALACE_EMBEDDING_MODEL"] = " MiniLM"
	only(t, b.run())
	delete(b.env, "MEMPALACE_EMBEDDING_MODEL")
	cfg := filepath.Join(b.home, ".mempalace", "config.json")
	write(t, cfg, `{"embedding_model": "gemma"}`, 0o600)
	fs = b.run()
	only(t, fs, "error:embedder-sidecar")
	if !strings.Contains(fs[0].Message, `embedding_model="gemma" (`+cfg+`)`) {
		t.Errorf("config.json's model: %s", fs[0].Message)
	}
}
