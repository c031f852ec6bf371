package join

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A bootstrap.json that does not parse names its line and column and the
// fix, and is left as it was.
func TestCheckpointErrorNamesLineColumnAndFix(t *testing.T) {
	t.Parallel()
	palace := t.TempDir()
	file := checkpointPath(palace)
	os.MkdirAll(filepath.Dir(file), 0o700)
	body := "{\n  \"http://p/mcp\": {\"state\": \"complete\"\n}\n"
	os.WriteFile(file, []byte(body), 0o600)
	_, err := readCheckpoint(palace)
	if err == nil || !strings.HasPrefix(err.Error(), file+":4:1: ") || !strings.Contains(err.Error(), "(fix: close every") || !strings.Contains(err.Error(), "move it aside") {
		t.Errorf("got %v, want %s:4:1: ... (fix: close every ... move it aside ...", err, file)
	}
	if b, _ := os.ReadFile(file); string(b) != body {
		t.Error("bootstrap.json changed")
	}
}

// A join that meets an unreadable bootstrap.json records its own target
// all the same (the join outboxes know what each target was sent), but the
// file's bytes, other targets' entries among them, are kept beside it.
func TestCheckpointUnreadableIsKeptAside(t *testing.T) {
	t.Parallel()
	palace := t.TempDir()
	file := checkpointPath(palace)
	os.MkdirAll(filepath.Dir(file), 0o700)
	body := "{\"http://other/mcp\": {\"state\": \"complete\"},\n  broken\n"
	os.WriteFile(file, []byte(body), 0o600)
	if err := writeCheckpoint(palace, "http://p/mcp", TargetState{State: StateComplete}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(file + ".unreadable"); err != nil || string(b) != body {
		t.Errorf("the unreadable file's bytes were not kept beside it: %q %v", b, err)
	}
	if cp, err := readCheckpoint(palace); err != nil || cp["http://p/mcp"].State != StateComplete {
		t.Errorf("this target's entry: %+v %v", cp, err)
	}
}

// A bootstrap.json (or its .unreadable copy) that is a symlink, planted
// by whoever may write the palace's edge directory, is not written
// through: the checkpoint write fails naming it, and the file the link
// names keeps its bytes. The join replaced that file (a ~/.bashrc, say)
// with its JSON.
func TestCheckpointDoesNotWriteThroughASymlink(t *testing.T) {
	t.Parallel()
	for _, name := range []string{CheckpointFile, CheckpointFile + ".unreadable"} {
		t.Run(name, func(t *testing.T) {
			palace := t.TempDir()
			os.MkdirAll(filepath.Join(palace, "edge"), 0o700)
			if name != CheckpointFile {
				os.WriteFile(checkpointPath(palace), []byte("not json\n"), 0o600)
			}
			victim := filepath.Join(t.TempDir(), "bashrc")
			os.WriteFile(victim, []byte("export PATH=/usr/bin\n"), 0o600)
			if err := os.Symlink(victim, filepath.Join(palace, "edge", name)); err != nil {
				t.Fatal(err)
			}
			err := writeCheckpoint(palace, "http://p/mcp", TargetState{State: StateComplete})
			if b, _ := os.ReadFile(victim); string(b) != "export PATH=/usr/bin\n" || err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("writeCheckpoint: %v; the file %s links to holds %q", err, name, b)
			}
			if fi, err := os.Lstat(checkpointPath(palace) + ".unreadable"); err == nil && fi.Mode().IsRegular() {
				b, _ := os.ReadFile(checkpointPath(palace) + ".unreadable")
				if !strings.Contains(string(b), "PATH") {
					return
				}
				t.Fatalf("the file the link names was copied into the palace: %q", b)
			}
		})
	}
}

// A key of bootstrap.json is read only as written: a "State" beside the
// entry's "state" is ignored, where encoding/json, which ignores case,
// took the later one (attack73 F1's cause, in every file read through
// confpos).
func TestCheckpointKeyInAnotherCaseIsIgnored(t *testing.T) {
	t.Parallel()
	palace := t.TempDir()
	file := checkpointPath(palace)
	os.MkdirAll(filepath.Dir(file), 0o700)
	os.WriteFile(file, []byte(`{"http://p/mcp": {"state": "complete", "State": "failed", "High_Water": 9}}`), 0o600)
	if cp, err := readCheckpoint(palace); err != nil || cp["http://p/mcp"].State != StateComplete || cp["http://p/mcp"].HighWater != 0 {
		t.Errorf("got %+v %v, want the state complete and no high water", cp, err)
	}
}
