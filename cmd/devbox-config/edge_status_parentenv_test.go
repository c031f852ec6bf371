package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/joakimp/devbox-config/doctor"
	"github.com/joakimp/devbox-config/edge/outbox"
)

// With MEMPALACE_ENV_FROM_PARENT=1 the edge reads the harness's
// MEMPALACE_EMBEDDING_MODEL, and so does its local MemPalace: edge status
// judges the palace's embedder record by that one too, not by its own
// environment alone (the review of edge status: it read os.LookupEnv and
// reported a mismatch the edge does not have).
func TestEdgeStatusReadsTheEmbedderFromTheParentAsTheEdgeDoes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	palace := filepath.Join(dir, "palace")
	s, err := outbox.Open(filepath.Join(palace, "edge", outbox.FileName), "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.WriteFile(filepath.Join(palace, doctor.SidecarFile), []byte(`{"mempalace_drawers": {"model_name": "openai-compat", "dimension": 384}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// sh is the parent holding the model; devbox-config's own environment
	// lacks it. "; exit" keeps sh from replacing itself with the command.
	cmd := exec.Command("sh", "-c", `env -u MEMPALACE_EMBEDDING_MODEL MEMPALACE_ENV_FROM_PARENT=1 devbox-config edge status --json; exit $?`)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "MEMPALACE_PALACE_PATH=" + palace, "MEMPALACE_EMBEDDING_MODEL=openai-compat"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("edge status: %v\n%s", err, out)
	}
	var st map[string]any
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("edge status --json: %v\n%s", err, out)
	}
	if st["embedder_sidecar"] != nil {
		t.Errorf("edge status reports a mismatch with the model the parent sets: %v", st["embedder_sidecar"])
	}
}
