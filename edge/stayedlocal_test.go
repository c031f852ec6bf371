package edge

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/sqlitewal"
)

// fillOutboxDisk makes every write to the edge's outbox fail as a full
// disk does (on its ops and its meta both, through SQLite triggers of
// another connection), until the func it returns frees the space.
func (h *harness) fillOutboxDisk() (free func()) {
	h.t.Helper()
	db, err := sql.Open("sqlite", h.edge.outbox.Path()+"?_pragma=busy_timeout(5000)")
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { db.Close() })
	var stmts []string
	for _, t := range []string{"INSERT ON ops", "UPDATE ON ops", "INSERT ON meta", "UPDATE ON meta"} {
		name := "full_" + strings.ReplaceAll(t, " ", "_")
		stmts = append(stmts, fmt.Sprintf(`CREATE TRIGGER %s BEFORE %s BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END`, name, t))
	}
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			h.t.Fatal(err)
		}
	}
	return func() {
		for _, t := range []string{"INSERT_ON_ops", "UPDATE_ON_ops", "INSERT_ON_meta", "UPDATE_ON_meta"} {
			if _, err := db.Exec("DROP TRIGGER full_" + t); err != nil {
				h.t.Fatal(err)
			}
		}
	}
}

// A write the outbox cannot record (its disk full) stays in the local
// palace only, and nothing but a join sends it: the agent's answer names
// that fix, and the edge records how many stayed local since when in a
// file a full disk does not stop, for edge status, doctor and the next
// session's start, which before said nothing was wrong (attack40 F1).
func TestWritesTheOutboxCouldNotRecordAreCountedForAJoin(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{primaryDown: true})
	ctx := context.Background()
	free := h.fillOutboxDisk()
	for i := range 2 {
		r, _ := h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": fmt.Sprintf("written on a full disk %d", i)})
		note := fmt.Sprint(r["edge"])
		if r["success"] != true || !strings.Contains(note, "disk is full") || !strings.Contains(note, "`devbox-config join`") {
			t.Fatalf("a write the outbox could not record: %v", r)
		}
	}
	st, err := h.edge.outbox.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sl := st.StayedLocal; len(sl) != 1 || sl[0].N != 2 || sl[0].Since.IsZero() || sl[0].Last.Before(sl[0].Since) || sl[0].Primary != ladder.RedactURL(h.edge.cfg.PrimaryURL) {
		t.Fatalf("the writes that stayed local, as recorded while the outbox is full: %+v", sl)
	}
	free()
	if r, _ := h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "written once space was back"}); !strings.Contains(fmt.Sprint(r["edge"]), "queued") {
		t.Fatalf("a write with space back: %v", r)
	}
	if got := h.localState().CountContent("written on a full disk 1"); got != 1 {
		t.Fatalf("the local palace holds the write %d times", got)
	}
	// A later session, whose agent did not make them, is told at its start.
	h2 := start(t, harnessOpts{palace: h.palace, primaryDown: true})
	if in := instructionsOf(h2); !strings.Contains(in, "2 write(s) stayed in the local palace only") || !strings.Contains(in, "`devbox-config join`") {
		t.Fatalf("the next session's instructions: %q", in)
	}
}

// An edge that stops while the outbox's disk is still full (the usual
// order: the user frees space after the session) leaves the record for
// edge status, doctor and later sessions; before, the count was kept in
// memory until the outbox took it, and lost (attack41 N1).
func TestWritesThatStayedLocalAreKeptWhenTheEdgeStopsOnAFullDisk(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{primaryDown: true})
	h.fillOutboxDisk()
	h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "written on a full disk"})
	path := h.edge.outbox.Path()
	h.stop()
	<-h.done
	s, err := outbox.Open(path, "", "test")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Stats(context.Background())
	if err != nil || len(st.StayedLocal) != 1 || st.StayedLocal[0].N != 1 {
		t.Fatalf("after a stop on a full disk: %+v, %v", st.StayedLocal, err)
	}
}

// An edge whose outbox will not open (here one a newer release set up: a
// rollback) counts the writes the local palace took as a full disk's
// are, for a join: the agent's answer names `devbox-config join`, the
// record file holds them, and the next session is told. Before, each
// answer said only "outbox unavailable" and nothing recorded them, so
// once the outbox opened again nothing said a join was owed (attack58
// N1).
func TestWritesAnUnopenableOutboxMissesAreCountedForAJoin(t *testing.T) {
	t.Parallel()
	palace := t.TempDir()
	path := filepath.Join(palace, "edge", outbox.FileName)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := outbox.Open(path, "dev", "lab")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sqlitewal.Open(path, "FULL")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA user_version = 99`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	h := start(t, harnessOpts{palace: palace, primaryDown: true})
	r, _ := h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "written past a newer outbox"})
	if note := fmt.Sprint(r["edge"]); r["success"] != true || !strings.Contains(note, "newer devbox-config") || !strings.Contains(note, "`devbox-config join`") {
		t.Fatalf("a write the outbox could not take: %v", r)
	}
	if sl, err := outbox.ReadStayedLocal(path); err != nil || len(sl) != 1 || sl[0].N != 1 {
		t.Fatalf("the record of writes that stayed local: %+v %v", sl, err)
	}
	h2 := start(t, harnessOpts{palace: palace, primaryDown: true})
	if in := instructionsOf(h2); !strings.Contains(in, "1 write(s) stayed in the local palace only") || !strings.Contains(in, "`devbox-config join`") {
		t.Fatalf("the next session's instructions: %q", in)
	}
}

// A queued write records the primary it was queued for, credentials
// stripped, for doctor and `edge status` to name once the environment no
// longer does (attack90 F2).
func TestAQueuedWriteRecordsItsPrimary(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{primaryURL: "http://user:pw-secret@127.0.0.1:1/mcp?key=k-secret", timeout: 300 * time.Millisecond})
	if r, _ := h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "queued for a primary down"}); r["success"] != true {
		t.Fatalf("add_drawer: %v", r)
	}
	st, err := h.edge.outbox.Stats(context.Background())
	if err != nil || st.QueuedFor != "http://127.0.0.1:1/mcp" {
		t.Fatalf("recorded primary %q (%v), want http://127.0.0.1:1/mcp", st.QueuedFor, err)
	}
}

// A write that stayed local while its record file could not be written
// either (a read-only mount of <palace>/edge; here a directory in the
// file's place, which refuses root too) is recorded once the file can be
// written again, while the edge runs on with no later write: `edge
// status` and doctor name it then, and a kill no longer loses it. Before,
// the count waited in memory for a next write or the stop (attack106 F1).
func TestAWriteThatStayedLocalIsRecordedOnceItsRecordFileIsWritableAgain(t *testing.T) {
	t.Parallel()
	h := start(t, harnessOpts{primaryDown: true, lease: 50 * time.Millisecond})
	h.fillOutboxDisk()
	record := filepath.Join(filepath.Dir(h.edge.outbox.Path()), outbox.StayedLocalFile)
	if err := os.Rename(record, record+".aside"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(record, 0o700); err != nil {
		t.Fatal(err)
	}
	if r, _ := h.call("add_drawer", map[string]any{"wing": "w", "room": "r", "content": "written while nothing could record it"}); r["success"] != true {
		t.Fatalf("add_drawer: %v", r)
	}
	if err := os.Remove(record); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(record+".aside", record); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := h.edge.outbox.Stats(context.Background())
		if err == nil && len(st.StayedLocal) == 1 && st.StayedLocal[0].N == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the record, with the file writable again and the edge running: %+v %v", st.StayedLocal, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
