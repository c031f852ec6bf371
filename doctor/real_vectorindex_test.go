package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// bigDrawers files n drawers of 60,000 characters each (about 76 chunks,
// so 76 embeddings, apiece).
func bigDrawers(t *testing.T, s *realpalace.Stdio, n int) {
	t.Helper()
	for i := range n {
		var b strings.Builder
		for j := 0; b.Len() < 60000; j++ {
			fmt.Fprintf(&b, "Drawer %d sentence %d is about subject %d and a few more words. ", i, j, i*j)
		}
		s.Seed(t, realpalace.Drawer("w", "r", b.String()))
	}
}

// failing is what doctor, run on the real palace in solitary mode
// (nothing contacted), reports as errors or warnings.
func failing(t *testing.T, p *realpalace.Palace) []Finding {
	t.Helper()
	env := map[string]string{"MEMPALACE_PALACE_PATH": p.Dir, "MEMPALACE_EMBEDDING_MODEL": "openai-compat"}
	mi := filepath.Join(t.TempDir(), "mountinfo")
	write(t, mi, persistedMounts, 0o644)
	var out []Finding
	for _, f := range Run(context.Background(), Options{Home: p.Home, HomeFromFlag: true, MountInfo: mi,
		Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}) {
		if f.Severity != Info {
			out = append(out, f)
		}
	}
	return out
}

// TestRealVectorIndexMissing makes a half-copied palace (chroma.sqlite3
// without the drawers' segment directory) from a real MemPalace 3.11
// palace of 40 large drawers. Doctor says so before MemPalace opens it
// and after MemPalace put its empty replacement there and refuses writes
// (before, doctor said nothing to fix); the fix it names, MemPalace's
// rebuild-index, makes the palace take writes again and doctor quiet.
func TestRealVectorIndexMissing(t *testing.T) {
	p := realpalace.New(t)
	s := p.Stdio(t, p.MCPCommand()...)
	bigDrawers(t, s, 40)
	must(t, s.Stop())
	if fs := failing(t, p); len(fs) != 0 {
		t.Fatalf("a healthy real palace: %+v", fs)
	}
	ents, err := os.ReadDir(p.Dir)
	must(t, err)
	for _, e := range ents {
		if e.IsDir() && len(e.Name()) == 36 { // the segment's uuid
			must(t, os.RemoveAll(filepath.Join(p.Dir, e.Name())))
		}
	}
	fs := failing(t, p)
	if len(fs) != 1 || fs[0].Severity != Error || !strings.Contains(fs[0].Message, "is missing although chroma.sqlite3 holds") || !strings.Contains(fs[0].Fix, "repair rebuild-index") {
		t.Fatalf("the segment directory gone: %+v", fs)
	}
	add := func(s *realpalace.Stdio, text string) error {
		_, err := s.Client.Call("mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": text})
		return err
	}
	s = p.Stdio(t, p.MCPCommand()...)
	add(s, "the first write after the damage: Chroma makes an empty index") // accepted or not: MemPalace's probe ran before Chroma opened
	var rpc *realpalace.RPCError
	if err := add(s, "the second write after the damage"); !errors.As(err, &rpc) || !strings.Contains(rpc.Message, "diverged") {
		t.Fatalf("MemPalace took a write on the damaged palace (%v): the test does not make the damage it means to", err)
	}
	must(t, s.Stop())
	if fs := failing(t, p); len(fs) != 1 || !strings.Contains(fs[0].Message, "replaced a lost index") {
		t.Fatalf("the empty replacement MemPalace refuses writes on: %+v", fs)
	}
	// An edge's outbox with a write still to send: the rebuild takes it
	// into its copy of the old palace (attack41 N3).
	ob, err := outbox.Open(OutboxPath(p.Dir), "dev", "")
	must(t, err)
	_, err = ob.Enqueue(context.Background(), outbox.Write{Name: "mempalace_add_drawer", Payload: []byte(`{"wing":"w","room":"r","content":"queued before the rebuild"}`), Wing: "w"})
	must(t, err)
	must(t, ob.Close())
	fix := exec.Command(p.Bin("mempalace"), "--palace", p.Dir, "repair", "rebuild-index", "--yes")
	fix.Env = p.Env()
	if out, err := fix.CombinedOutput(); err != nil {
		t.Fatalf("the fix: %v\n%s", err, out)
	}
	kept, err := filepath.Glob(p.Dir + ".pre-rebuild-*")
	must(t, err)
	if len(kept) != 1 {
		t.Fatalf("the copy the fix names: %v", kept)
	}
	fs = failing(t, p)
	if i := slices.IndexFunc(fs, func(f Finding) bool { return f.ID == IDRebuildCopyOutbox }); i < 0 || !strings.Contains(fs[i].Fix, "mv "+filepath.Join(kept[0], "edge")+" "+p.Dir+"/edge") {
		t.Fatalf("the outbox the rebuild left in its copy: %+v", fs)
	}
	must(t, os.Rename(filepath.Join(kept[0], "edge"), filepath.Join(p.Dir, "edge"))) // the fix
	must(t, os.RemoveAll(kept[0]))
	if fs := failing(t, p); len(fs) != 0 {
		t.Fatalf("after the fix: %+v", fs)
	}
	ob, err = outbox.Open(OutboxPath(p.Dir), "dev", "")
	must(t, err)
	defer ob.Close()
	if st, err := ob.Stats(context.Background()); err != nil || st.ByState[outbox.Queued] != 1 {
		t.Fatalf("the write queued before the rebuild, after the fix: %v %v", st.ByState, err)
	}
	s = p.Stdio(t, p.MCPCommand()...)
	if err := add(s, "a write after the fix"); err != nil {
		t.Fatalf("after the fix: %v", err)
	}
}
