package catalogue_test

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// EmbeddingModels is the list the pinned MemPalace itself keeps: doctor
// refuses any other value, so a model MemPalace adds or drops must not
// pass unseen.
func TestRealEmbeddingModelsAreMemPalaces(t *testing.T) {
	venv := realpalace.Venv(t)
	out, err := exec.Command(filepath.Join(venv, "bin", "python"), "-c",
		"from mempalace.embedding import _KNOWN_EMBEDDING_MODELS as k; print(','.join(sorted(k)))").Output()
	if err != nil {
		t.Fatalf("reading MemPalace's models: %v", err)
	}
	if got := strings.Split(strings.TrimSpace(string(out)), ","); !slices.Equal(got, catalogue.EmbeddingModels()) {
		t.Errorf("MemPalace %s knows %v; the catalogue says %v", catalogue.Checked, got, catalogue.EmbeddingModels())
	}
	for _, m := range []string{"minilm", " MiniLM ", "openai-compat"} {
		if !catalogue.KnownEmbeddingModel(m) {
			t.Errorf("%q is refused", m)
		}
	}
	if catalogue.KnownEmbeddingModel("...") {
		t.Error(`"..." is taken`)
	}
}
