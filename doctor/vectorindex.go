package doctor

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/palacefiles"
	"github.com/joakimp/devbox-config/shellword"
	"github.com/joakimp/devbox-config/sqlitewal"
)

// MemPalace 3.11's stub rule (backends/chroma.py,
// _hnsw_capacity_ceiling_from_payload): a segment with no
// index_metadata.pickle holds at most data_level0.bin's size / 256
// elements, and one whose shortfall against chroma.sqlite3's embeddings
// exceeds max(2000, 10% of them) is a replacement for a lost index.
const (
	stubBytesPerElement = 256
	stubFloor           = 2000
)

// drawersIndex is what chroma.sqlite3 says of the drawers' vector index:
// its segment (a directory of that name beside the file) and how many
// embeddings the collection holds.
type drawersIndex struct {
	segment    string
	embeddings int
}

// readDrawersIndex reads chroma.sqlite3 read-only, as MemPalace's own
// probe does (_vector_segment_id, _sqlite_embedding_count). ok is false
// when the file cannot tell (none, locked, damaged: palace-damaged says
// so), which is no verdict.
func readDrawersIndex(ctx context.Context, palace string) (drawersIndex, bool) {
	file := filepath.Join(palace, palacefiles.ChromaFile)
	if _, err := os.Stat(file); err != nil {
		return drawersIndex{}, false
	}
	db, err := sql.Open("sqlite", sqlitewal.URI(file)+"?mode=ro&_pragma=busy_timeout(500)")
	if err != nil {
		return drawersIndex{}, false
	}
	defer db.Close() // read-only: nothing to lose
	var ix drawersIndex
	err = db.QueryRowContext(ctx, `SELECT s.id FROM segments s JOIN collections c ON s.collection = c.id
		WHERE c.name = ? AND s.scope = 'VECTOR' LIMIT 1`, drawersCollection).Scan(&ix.segment)
	if err == nil {
		err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM embeddings e JOIN segments s ON e.segment_id = s.id
			JOIN collections c ON s.collection = c.id WHERE c.name = ?`, drawersCollection).Scan(&ix.embeddings)
	}
	return ix, err == nil && ix.segment != ""
}

// CheckVectorIndex is vector-index (§1.2): the drawers' vector index
// directory is gone (a half-copied palace), or is the empty replacement
// Chroma makes for a lost one. MemPalace 3.11 then answers searches from
// BM25 alone and, once it sees the replacement fall short by its stub
// rule, refuses every write ("Palace vector index is diverged").
func CheckVectorIndex(ctx context.Context, opts Options, st State) []Finding {
	if st.Palace == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, opts.IntegrityTimeout)
	defer cancel()
	ix, ok := readDrawersIndex(ctx, st.Palace)
	if !ok || ix.embeddings == 0 {
		return nil
	}
	dir := filepath.Join(st.Palace, ix.segment)
	var msg string
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		msg = fmt.Sprintf("the drawers' vector index %s is missing although %s holds %d embeddings: MemPalace's next open puts an empty index in its place, so vector search misses every drawer filed so far, and MemPalace refuses every write (\"Palace vector index is diverged\") once the empty index falls short by more than its margin", dir, palacefiles.ChromaFile, ix.embeddings)
	} else if ceiling, stub := stubCeiling(dir); stub && ix.embeddings-ceiling > max(stubFloor, ix.embeddings/10) {
		msg = fmt.Sprintf("the drawers' vector index %s holds at most %d elements and was never written out (no index_metadata.pickle), while %s holds %d embeddings: it replaced a lost index, and MemPalace refuses every write (\"Palace vector index is diverged\"); searches answer from keywords alone", dir, ceiling, palacefiles.ChromaFile, ix.embeddings)
	} else {
		return nil
	}
	return []Finding{{ID: IDVectorIndex, Severity: Error, Section: "§1.2", Message: msg,
		Fix: fmt.Sprintf("on an edge device `devbox-config edge flush` first; stop every MemPalace client of this palace (harness sessions, the edge, mempalace serve), then re-embed the index from %[1]s: `mempalace --palace %[2]s repair rebuild-index --yes`. It moves the old palace aside as %[2]s.pre-rebuild-<time> and its edge/ directory (the outbox, the deletes the edge hides, a join's state) with it: move that edge/ back to %[2]s/edge before any session starts (%[4]s warns until you do); once the palace takes writes again, move the copy out of %[3]s or delete it (palace-shared-parent warns of it)", palacefiles.ChromaFile, st.Palace, filepath.Dir(st.Palace), IDRebuildCopyOutbox)}}
}

// CheckRebuildCopyOutbox is rebuild-copy-outbox (§1.2): `mempalace repair
// rebuild-index` (vector-index's fix) moves the old palace aside as
// PALACE.pre-rebuild-<time>, the edge's edge/ directory with it, and
// makes the palace anew without it: what that outbox still had to send
// and the deletes it hid are then nobody's, and deleting the copy loses
// them (attack41 N3). Only a regular outbox file (not through a link)
// that holds such rows is an error; one that holds none, a note.
func CheckRebuildCopyOutbox(opts Options, st State) []Finding {
	if st.Palace == "" {
		return nil
	}
	palace := filepath.Clean(st.Palace)
	entries, _ := os.ReadDir(filepath.Dir(palace)) // unreadable: no copy seen, as none
	var out []Finding
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), filepath.Base(palace)+".pre-rebuild-") || e.Type()&os.ModeSymlink != 0 {
			continue // a link is no copy the rebuild made (one to the live palace, say)
		}
		left := filepath.Join(filepath.Dir(palace), e.Name(), "edge")
		if f, ok := leftOutbox(left, palace); ok {
			out = append(out, f)
		}
	}
	return out
}

// leftOutbox is rebuild-copy-outbox for the edge/ directory left in a
// rebuild's copy (ok false: none there, or one that is no outbox: a
// link, not a regular file).
func leftOutbox(left, palace string) (Finding, bool) {
	ob := filepath.Join(left, outbox.FileName)
	di, err := os.Lstat(left)
	fi, ferr := os.Lstat(ob)
	if err != nil || !di.IsDir() || ferr != nil || !fi.Mode().IsRegular() {
		return Finding{}, false
	}
	pending, err := leftRows(ob)
	switch {
	case err != nil:
		// Locked by a process using it, or no outbox at all: what it
		// holds is not known, so nothing says the copy may go.
		return Finding{ID: IDRebuildCopyOutbox, Severity: Warn, Section: "§1.2",
			Message: fmt.Sprintf("%s is an edge outbox left in MemPalace's copy of the old palace, and it cannot be read now (%v): whether writes there still wait to be sent is not known", left, err),
			Fix:     "keep the copy; run doctor again when nothing uses it (stop any edge or sqlite3 shell on it)"}, true
	case pending == 0:
		return Finding{ID: IDRebuildCopyOutbox, Severity: Info, Section: "§1.2",
			Message: fmt.Sprintf("%s is an edge outbox left in MemPalace's copy of the old palace; nothing in it waits to be sent or hides a delete", left),
			Fix:     fmt.Sprintf("nothing to bring back: delete the copy once the palace takes writes (`rm -r %s`)", shellword.Quote(filepath.Dir(left)))}, true
	}
	return Finding{ID: IDRebuildCopyOutbox, Severity: Error, Section: "§1.2",
		Message: fmt.Sprintf("%s holds an edge outbox that MemPalace's rebuild left in its copy of the old palace, with %d write(s) still to send or delete(s) it hides: they are not in %s, so nothing sends them, and deleting the copy loses them", left, pending, palace),
		Fix: fmt.Sprintf("stop the harness sessions; if %[2]s exists (a session ran since the rebuild), run `devbox-config edge flush` until `devbox-config edge status` shows nothing queued, and only then move it aside; then `mv %[1]s %[2]s` and run `devbox-config edge flush`",
			shellword.Quote(left), shellword.Quote(filepath.Join(palace, "edge")))}, true
}

// leftRows counts what an outbox left behind still holds for the fleet:
// ops not done, and the deletes it hides (read-only).
func leftRows(path string) (int, error) {
	db, err := OpenReadOnly(path)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int
	err = db.QueryRow(`SELECT (SELECT COUNT(*) FROM ops WHERE state <> 'done') + (SELECT COUNT(*) FROM tombstones)`).Scan(&n)
	return n, err
}

// stubCeiling is MemPalace's bound on a segment with no
// index_metadata.pickle (stub false: the pickle exists, or no payload).
func stubCeiling(dir string) (ceiling int, stub bool) {
	if _, err := os.Stat(filepath.Join(dir, "index_metadata.pickle")); err == nil {
		return 0, false
	}
	fi, err := os.Stat(filepath.Join(dir, "data_level0.bin"))
	if err != nil {
		return 0, false
	}
	return int(fi.Size() / stubBytesPerElement), true
}
