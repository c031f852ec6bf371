package join

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/doctor"
	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
)

// Attack76 F1: on a cloned devbox, join refused for a diary op queued
// before the copy and offered `drop ID` ("the next join sends its
// entry"); the operator dropped it, as flush also advises there, and the
// join sent the entry, which the original then sent too: filed twice. A
// join on the copy now leaves such entries to the original, held or
// dropped (also past the outbox's retention), names none of their ops in
// a Fix line, and still sends what the copy wrote itself.
func TestJoinOnACloneLeavesPreCopyDiaryEntriesToTheOriginal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, pr := newPalace(t), newPrimary(t)
	queued := map[string]any{"agent_name": "opencode", "entry": "J1 queued on b, b then cloned to p"}
	p.do(t, "diary_write", queued)
	file := doctor.OutboxPath(p.dir)
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := outbox.Open(file, "dev-b", "lab")
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(queued)
	op, err := s.Enqueue(ctx, outbox.Write{Name: "mempalace_diary_write", Payload: payload, Wing: "wing_opencode"})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	// cp -a dev-b dev-p: the original keeps its file (moved, same inode);
	// the copy's is new bytes at the palace's path.
	original := filepath.Join(t.TempDir(), outbox.FileName)
	if err := os.Rename(file, original); err != nil {
		t.Fatal(err)
	}
	copyFile(t, original, file)
	p.do(t, "diary_write", map[string]any{"agent_name": "opencode", "entry": "P2 written on the copy"})
	p.save(t)
	c, err := outbox.Open(file, "dev-p", "lab") // the copy's first edge command: recorded
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := config(t, p, pr)

	rep := run(t, cfg, Options{})
	if !rep.OK() || rep.LeftToOriginal != 1 || rep.Sent[Diaries] != 1 || !strings.Contains(strings.Join(rep.Notes, "\n"), "the original's to send") {
		t.Fatalf("join on the copy with the pre-copy op held (want P2 sent, J1 left to the original): sent %v, left %d, failed %+v, notes %q", rep.Sent, rep.LeftToOriginal, rep.Failed, rep.Notes)
	}
	if _, _, err := c.Drop(ctx, op.ID); err != nil { // as flush advises on the copy
		t.Fatal(err)
	}
	if _, err := c.Prune(ctx, -time.Hour); err != nil { // retention past
		t.Fatal(err)
	}
	if rep := run(t, cfg, Options{}); !rep.OK() || rep.LeftToOriginal != 1 || rep.Sent[Diaries] != 0 {
		t.Fatalf("join on the copy after the pre-copy op was dropped and pruned (want J1 left to the original): sent %v, left %d, failed %+v", rep.Sent, rep.LeftToOriginal, rep.Failed)
	}

	o, err := outbox.Open(original, "dev-b", "lab") // the original back online
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	primary := edge.NewPrimary(cfg.URL, cfg.Token, nil, edge.PrimaryOptions{Timeout: 5 * time.Second})
	defer primary.Close()
	(&outbox.Flusher{S: o, P: edge.FlushTarget(primary)}).Drain(ctx)
	n := 0
	for _, d := range pr.pl.Dump().Drawers {
		if d.Content == queued["entry"] {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the primary holds the pre-copy entry %d times, want once", n)
	}
}

// copyFile copies a closed file's bytes to dst, a new file.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
