package doctor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joakimp/devbox-config/fakepalace"
	"github.com/joakimp/devbox-config/testbed/realpalace"
)

// realBox is doctor's view of a real palace: HOME is the palace's home,
// the palace named by MEMPALACE_PALACE_PATH and the embedder by
// MEMPALACE_EMBEDDING_MODEL (as the edge's child gets them), edge mode
// towards primaryURL.
func realBox(t *testing.T, p *realpalace.Palace, primaryURL, token string) Options {
	t.Helper()
	mi := filepath.Join(t.TempDir(), "mountinfo")
	write(t, mi, persistedMounts, 0o644)
	env := map[string]string{"MEMPALACE_PALACE_PATH": p.Dir, "MEMPALACE_REMOTE_URL": primaryURL, "MEMPALACE_REMOTE_TOKEN": token, "MEMPALACE_EDGE": "1",
		"MEMPALACE_AGENT_NAME": "opencode", "MEMPALACE_ORIGIN_LABEL": "lab", "MEMPALACE_EMBEDDING_MODEL": "openai-compat"}
	return Options{
		Home: p.Home, HomeFromFlag: true, MountInfo: mi, Timeout: 10e9,
		SlowPrimary: 10e9, // a loaded machine's serve answered /healthz in 817 ms (CI 125): slowness is not what these check
		Env:         func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		LookPath:    func(string) (string, error) { return p.Bin("mempalace-mcp"), nil },
	}
}

// withoutPalaceFlag is the local server as the edge starts it by default:
// mempalace-mcp with no --palace, the palace from MEMPALACE_PALACE_PATH.
func withoutPalaceFlag(t *testing.T, p *realpalace.Palace) *realpalace.Stdio {
	t.Helper()
	s, err := p.StartStdioEnv([]string{"MEMPALACE_PALACE_PATH=" + p.Dir}, p.Bin("mempalace-mcp"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	return s
}

func facts(t *testing.T, c *realpalace.Client, entity string) string {
	t.Helper()
	q := c.MustCall(t, "mempalace_kg_query", map[string]any{"entity": entity})
	return fmt.Sprint(q["facts"])
}

const realToken = "tok-doctor-real-0123456789abcdef"

// findings runs doctor and fails the test on any finding about a store
// real MemPalace 3.11 does not split or an embedder record it wrote
// itself; it returns the kg-split finding, if any.
func realFindings(t *testing.T, opts Options) *Finding {
	t.Helper()
	var split *Finding
	for _, f := range Run(context.Background(), opts) {
		switch f.ID {
		case IDKGSplit:
			split = &f
		case IDPrimaryUnreachable, IDPrimaryAuth:
			t.Fatalf("the primary: %s", f.Message)
		default:
			t.Errorf("a real 3.11 layout raised %s %s: %s", f.Severity, f.ID, f.Message)
		}
	}
	return split
}

// TestRealDoctorOnRealLayouts runs doctor on the files real MemPalace
// 3.11.0 writes: serve (always --palace) keeps its knowledge graph in the
// palace, mempalace-mcp without --palace (the edge's default child) in
// ~/.mempalace, so each sees half (§7.1). Doctor finds the split with the
// rows each side really holds (read through SQLite's WAL, as MemPalace
// leaves it); with data on both sides --fix refuses and changes nothing;
// with the stdio side empty --fix converges it, and afterwards the two
// real servers see one graph, each the other's writes. A real 3.11 palace
// raises nothing else: its embedder record (the bare "openai-compat",
// dimension 0), its other files, a primary answering tools/list.
func TestRealDoctorOnRealLayouts(t *testing.T) {
	t.Run("both sides hold data", func(t *testing.T) {
		p := realpalace.New(t)
		srv := p.Serve(t, realToken)
		srv.Seed(t, realpalace.Drawer("w", "r", "a drawer the palace holds"), realpalace.Fact("edge", "uses", "sqlite", "", ""), realpalace.Fact("edge", "runs_on", "linux", "", ""))
		s := withoutPalaceFlag(t, p)
		if got := facts(t, s.Client, "edge"); strings.Contains(got, "sqlite") {
			t.Fatalf("mempalace-mcp without --palace sees serve's graph: %s (no split to find)", got)
		}
		s.Seed(t, realpalace.Fact("local", "knows", "nothing", "", ""))
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
		opts := realBox(t, p, srv.URL, srv.Token)
		split := realFindings(t, opts)
		// 1 triple and 2 entities in ~/.mempalace, 2 and 3 in the palace.
		if split == nil || split.Severity != Error || !strings.Contains(split.Message, "(3 rows)") || !strings.Contains(split.Message, "(5 rows)") {
			t.Fatalf("kg-split with both sides' real rows: %+v", split)
		}
		res, err := FixSplit(opts)
		if err == nil || len(res) != 1 || res[0].Done {
			t.Fatalf("--fix with data on both sides: %+v %v", res, err)
		}
		if got := facts(t, srv.Client, "edge"); !strings.Contains(got, "sqlite") || !strings.Contains(got, "linux") {
			t.Fatalf("serve's graph after a refused fix: %s", got)
		}
	})
	t.Run("one side empty, converged", func(t *testing.T) {
		p := realpalace.New(t)
		srv := p.Serve(t, realToken)
		srv.Seed(t, realpalace.Drawer("w", "r", "a drawer the palace holds"), realpalace.Fact("edge", "uses", "sqlite", "", ""))
		s := withoutPalaceFlag(t, p)
		facts(t, s.Client, "edge") // opens (and creates) its own, empty graph
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
		opts := realBox(t, p, srv.URL, srv.Token)
		if split := realFindings(t, opts); split == nil || split.Severity != Warn {
			t.Fatalf("kg-split with an empty stdio side: %+v", split)
		}
		if err := srv.Stop(); err != nil { // --fix wants every mempalace process stopped
			t.Fatal(err)
		}
		if res, err := FixSplit(opts); err != nil || len(res) != 1 || !res[0].Done {
			t.Fatalf("--fix: %+v %v", res, err)
		}
		s = withoutPalaceFlag(t, p)
		if got := facts(t, s.Client, "edge"); !strings.Contains(got, "sqlite") {
			t.Fatalf("after --fix mempalace-mcp without --palace does not see serve's fact: %s", got)
		}
		s.Seed(t, realpalace.Fact("edge", "runs_on", "linux", "", ""))
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		if got := facts(t, srv.Client, "edge"); !strings.Contains(got, "linux") {
			t.Fatalf("after --fix serve does not see the stdio server's fact: %s", got)
		}
		if split := realFindings(t, opts); split != nil {
			t.Fatalf("after --fix: %+v", split)
		}
	})
}

// TestRealDoctorMovesLegacyHallways: real mempalace-mcp 3.11.0 (no
// --palace, the palace from MEMPALACE_PALACE_PATH, as the edge starts it)
// lists none of the hallways in a pre-3.3.6 ~/.mempalace/hallways.json;
// doctor says where 3.11 keeps them (beside the palace) and --fix moves
// them there, after which the same server lists them.
func TestRealDoctorMovesLegacyHallways(t *testing.T) {
	p := realpalace.New(t)
	write(t, filepath.Join(p.Home, ".mempalace", "hallways.json"), hallwaysJSON(2), 0o600)
	total := func() any {
		s := withoutPalaceFlag(t, p)
		defer s.Stop()
		return s.Client.MustCall(t, "mempalace_list_hallways", map[string]any{})["total"]
	}
	if got := total(); fmt.Sprint(got) != "0" {
		t.Fatalf("real 3.11 lists %v hallways from the old file (nothing to find)", got)
	}
	opts := realBox(t, p, "", "")
	st, _ := resolve(opts.withDefaults())
	fs := CheckSplits(opts, st)
	configured := filepath.Join(filepath.Dir(p.Dir), "hallways.json")
	if len(fs) != 1 || fs[0].ID != IDHallwaysSplit || !strings.Contains(fs[0].Message, configured) {
		t.Fatalf("want hallways-split naming %s: %+v", configured, fs)
	}
	if res, err := FixSplit(opts); err != nil || len(res) != 1 || !res[0].Done {
		t.Fatalf("--fix: %+v %v", res, err)
	}
	if got := total(); fmt.Sprint(got) != "2" {
		t.Fatalf("after --fix real 3.11 lists %v hallways, want 2", got)
	}
	if fs := CheckSplits(opts, st); len(fs) != 0 {
		t.Fatalf("after --fix: %+v", fs)
	}
}

// TestRealDoctorNamesAnotherEmbedder: a palace real MemPalace filled with
// one embedder ("openai-compat", recorded in mempalace_embedder.json) and
// an environment that configures another (MEMPALACE_EMBEDDING_MODEL, as
// the edge's child inherits it): real MemPalace refuses every search and
// every write on that palace (its "Embedder identity mismatch"), so the
// edge's local palace takes no write. Doctor names both models and the
// fix (with nothing configured MemPalace's default is minilm); with the
// recorded model configured it says nothing.
func TestRealDoctorNamesAnotherEmbedder(t *testing.T) {
	p := realpalace.New(t)
	srv := p.Serve(t, realToken)
	srv.Seed(t, realpalace.Drawer("w", "r", "a drawer the palace holds"))
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	s, err := p.StartStdioEnv([]string{"MEMPALACE_EMBEDDING_MODEL=minilm"})
	if err != nil {
		t.Fatal(err)
	}
	refused := s.MustCall(t, "mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "another drawer"})
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(refused["details"]), "built with embedder 'openai-compat' but the current embedder is 'minilm'") {
		t.Fatalf("real MemPalace with another embedder: %v", refused)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	opts := realBox(t, p, srv.URL, srv.Token)
	env := opts.Env
	for model, want := range map[string]bool{"minilm": true, "openai-compat": false, "": true} {
		opts.Env = func(k string) (string, bool) {
			if k == "MEMPALACE_EMBEDDING_MODEL" {
				return model, model != ""
			}
			return env(k)
		}
		var got *Finding
		for _, f := range Run(context.Background(), opts) {
			if f.ID == IDEmbedderSidecar {
				got = &f
			}
		}
		if want != (got != nil) || want && (got.Severity != Error || !strings.Contains(got.Message, `"openai-compat"`) || !strings.Contains(got.Message, `"minilm"`)) {
			t.Errorf("MEMPALACE_EMBEDDING_MODEL=%q: %+v", model, got)
		}
	}
}

// TestRealDoctorWithAPrimaryOfAnotherRelease: a local palace real
// MemPalace 3.11.0 wrote, in edge mode towards a primary of an earlier
// release (3.9.0: no writer filter, oldest-first event lists) and of a
// later one (3.12.0 as its release notes describe it, played by the
// double): the releases differ, the edge reads both, and doctor raises
// nothing that is not so.
func TestRealDoctorWithAPrimaryOfAnotherRelease(t *testing.T) {
	p := realpalace.New(t)
	s := p.Stdio(t)
	s.Seed(t, realpalace.Drawer("w", "r", "a drawer the palace holds"), realpalace.Fact("edge", "uses", "sqlite", "", ""), realpalace.DiaryEntry("opencode", "a diary entry"))
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, release := range []string{"3.9.0", "3.12.0"} {
		t.Run(release, func(t *testing.T) {
			srv := primary(t, realToken, fakepalace.Options{Version: release})
			if split := realFindings(t, realBox(t, p, srv.URL(), realToken)); split != nil {
				t.Errorf("%+v", split)
			}
		})
	}
}

// TestRealDoctorFindsWhereMemPalaceKeepsThePalace: on a fresh HOME (no
// ~/.mempalace install) real MemPalace 3.11.0 (mempalace-mcp, no
// --palace, no MEMPALACE_PALACE_PATH) keeps its palace in its XDG config
// directory, ~/.config/mempalace/palace; doctor (and the edge, join: one
// ladder.PalacePath) reads that palace, and has nothing to say.
func TestRealDoctorFindsWhereMemPalaceKeepsThePalace(t *testing.T) {
	p := realpalace.New(t)
	s, err := p.StartStdioEnv([]string{"MEMPALACE_CONFIG_DIR="}, p.Bin("mempalace-mcp"))
	if err != nil {
		t.Fatal(err)
	}
	s.Seed(t, realpalace.Drawer("w", "r", "a drawer on a fresh install"))
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	xdg := filepath.Join(p.Home, ".config", "mempalace", "palace")
	if _, err := os.Stat(filepath.Join(xdg, "chroma.sqlite3")); err != nil {
		t.Fatalf("real MemPalace did not keep the palace in %s: %v", xdg, err)
	}
	env := map[string]string{"XDG_CONFIG_HOME": filepath.Join(p.Home, ".config")}
	opts := Options{Home: p.Home, HomeFromFlag: true, Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	if got, err := opts.Palace(); err != nil || got != xdg {
		t.Fatalf("doctor reads the palace %q (%v), MemPalace wrote %s", got, err, xdg)
	}
	if fs := Run(context.Background(), opts); len(fs) != 0 {
		t.Fatalf("findings: %+v", fs)
	}
}

// TestRealDoctorFindsADamagedPalace: 4 KiB of a real MemPalace 3.11.0
// palace's chroma.sqlite3 overwritten (disk damage). Real MemPalace then
// refuses every tool call ("Palace SQLite integrity check failed"), so an
// edge's local palace takes nothing; doctor said "nothing to fix"
// (attack13 05). It names the file and the fix; a sound real palace (its
// knowledge graph too) raises nothing.
func TestRealDoctorFindsADamagedPalace(t *testing.T) {
	p := realpalace.New(t)
	s := p.Stdio(t)
	s.Seed(t, realpalace.Drawer("w", "r", "a drawer the palace holds"), realpalace.Fact("edge", "uses", "sqlite", "", ""))
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	mi := filepath.Join(t.TempDir(), "mountinfo")
	write(t, mi, persistedMounts, 0o644)
	env := map[string]string{"MEMPALACE_PALACE_PATH": p.Dir, "MEMPALACE_EMBEDDING_MODEL": "openai-compat"}
	opts := Options{Home: p.Home, HomeFromFlag: true, MountInfo: mi,
		Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	if fs := Run(context.Background(), opts); len(fs) != 0 {
		t.Fatalf("a sound real palace: %+v", fs)
	}

	chroma := filepath.Join(p.Dir, "chroma.sqlite3")
	f, err := os.OpenFile(chroma, os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteAt(bytes.Repeat([]byte{0xA5, 0x3C, 0x7E, 0x11}, 1024), 1024)
	must(t, errors.Join(err, f.Close()))

	s = p.Stdio(t)
	_, err = s.Call("mempalace_add_drawer", map[string]any{"wing": "w", "room": "r", "content": "after the damage"})
	if err == nil || !strings.Contains(err.Error(), "integrity check failed") {
		t.Fatalf("real MemPalace on the damaged palace: %v", err)
	}
	must(t, s.Stop())

	fs := Run(context.Background(), opts)
	only(t, fs, "error:palace-damaged")
	t.Log(fs[0].Message, "\n", fs[0].Fix)
	if !strings.Contains(fs[0].Message, chroma) || !strings.Contains(fs[0].Fix, "mempalace repair") {
		t.Errorf("want the file named and MemPalace's repair in the fix: %+v", fs[0])
	}
	// In edge mode the fix keeps the outbox and leans on the primary.
	srv := primary(t, realToken, fakepalace.Options{})
	env["MEMPALACE_REMOTE_URL"], env["MEMPALACE_REMOTE_TOKEN"], env["MEMPALACE_EDGE"] = srv.URL(), realToken, "1"
	var edge *Finding
	for _, f := range Run(context.Background(), opts) {
		if f.ID == IDPalaceDamaged {
			edge = &f
		}
	}
	if edge == nil || !strings.Contains(edge.Fix, "devbox-config edge flush") || !strings.Contains(edge.Fix, "/edge ") {
		t.Errorf("edge mode: %+v", edge)
	}
}
