package doctor

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/palacefiles"
	"github.com/joakimp/devbox-config/shellword"
	"github.com/joakimp/devbox-config/sqlitewal"
)

// damage is quick_check's verdict on one file: what it found ("" = ok),
// or why there is none (skipped: busy, a writer mid-transaction, out of
// time).
type damage struct {
	path, found, skipped string
}

// quickCheck runs PRAGMA quick_check on path, read-only: it creates
// nothing and takes SQLite's shared lock as MemPalace's readers do (a WAL
// file without its -shm is read immutable, since a read-only open cannot
// create one). A writer's lock or hot journal is no verdict, nor is
// running out of ctx; anything else SQLite says about the file is damage.
func quickCheck(ctx context.Context, path string) damage {
	d := damage{path: path}
	if hot(path) {
		d.skipped = "a writer is mid-transaction (" + filepath.Base(path) + "-journal)"
		return d
	}
	q := "mode=ro&_pragma=busy_timeout(500)"
	if _, err := os.Stat(path + "-shm"); err != nil && walHeader(path) {
		q = "mode=ro&immutable=1"
	}
	db, err := sql.Open("sqlite", sqlitewal.URI(path)+"?"+q)
	if err != nil {
		d.found = err.Error()
		return d
	}
	defer db.Close() // read-only: nothing to lose
	db.SetMaxOpenConns(1)
	rows, err := db.QueryContext(ctx, "PRAGMA quick_check")
	var found []string
	for err == nil && rows.Next() {
		var s string
		if err = rows.Scan(&s); err == nil && s != "ok" {
			found = append(found, s)
		}
	}
	if err == nil {
		err = rows.Err()
		rows.Close()
	}
	var se *sqlite.Error
	switch {
	case ctx.Err() != nil:
		d.skipped = "quick_check did not finish in time"
	case errors.As(err, &se) && (se.Code()&0xff == sqlite3.SQLITE_BUSY || se.Code()&0xff == sqlite3.SQLITE_LOCKED):
		d.skipped = "the file is locked by a writer"
	case err != nil:
		d.found = err.Error()
	case len(found) > 0:
		d.found = strings.Join(found[:min(len(found), 3)], "; ")
	}
	if d.found != "" && hot(path) { // a writer began meanwhile: no verdict
		d.found, d.skipped = "", "a writer began a transaction during the check"
	}
	return d
}

// hot: path has a rollback journal, so a writer is mid-transaction (or
// died in one: SQLite rolls it back on the next write open).
func hot(path string) bool {
	fi, err := os.Stat(path + "-journal")
	return err == nil && fi.Size() > 0
}

// walHeader: the file's header says WAL (its read and write versions, 2).
func walHeader(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var h [20]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		return false
	}
	return h[18] == 2 && h[19] == 2
}

// palaceDatabases are the SQLite files MemPalace keeps for the palace:
// the drawers (the file MemPalace's own integrity gate checks) and the
// knowledge graph, in the palace and in ~/.mempalace (§7.1), each once.
func palaceDatabases(opts Options, st State) []string {
	var out []string
	var seen []os.FileInfo
	for _, p := range []string{
		filepath.Join(st.Palace, palacefiles.ChromaFile),
		filepath.Join(st.Palace, "knowledge_graph.sqlite3"),
		filepath.Join(opts.mempalaceDir(), "knowledge_graph.sqlite3"),
	} {
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
			continue
		}
		dup := false
		for _, s := range seen {
			dup = dup || os.SameFile(s, fi)
		}
		if !dup {
			seen, out = append(seen, fi), append(out, p)
		}
	}
	return out
}

// CheckPalaceIntegrity is palace-damaged (§1.2): PRAGMA quick_check on
// the palace's SQLite files, each within Options.IntegrityTimeout. MemPalace
// 3.11 runs the same check on chroma.sqlite3 when its server starts and
// refuses every tool call on a palace that fails it, so an edge's local
// palace takes nothing. A check that gives no verdict (a writer's lock,
// out of time) is an info.
func CheckPalaceIntegrity(ctx context.Context, opts Options, st State) []Finding {
	if st.Palace == "" {
		return nil
	}
	var out []Finding
	for _, path := range palaceDatabases(opts, st) {
		cctx, cancel := context.WithTimeout(ctx, opts.IntegrityTimeout)
		d := quickCheck(cctx, path)
		cancel()
		switch {
		case d.skipped != "":
			out = append(out, Finding{ID: IDPalaceDamaged, Severity: Info, Section: "§1.2",
				Message: fmt.Sprintf("%s was not checked: %s", path, d.skipped),
				Fix:     "run doctor again when MemPalace is idle; `mempalace repair --dry-run` runs MemPalace's own check"})
		case d.found != "":
			out = append(out, Finding{ID: IDPalaceDamaged, Severity: Error, Section: "§1.2",
				Message: fmt.Sprintf("%s is damaged: SQLite's quick_check says %q; MemPalace refuses every tool call on this palace (\"Palace SQLite integrity check failed\")", path, opts.mask(d.found)),
				Fix:     damagedFix(st, path)})
		}
	}
	return out
}

// damagedFix: MemPalace 3.11's `mempalace repair` refuses a file that
// fails quick_check (it prints SQLite's .recover as the way out). An edge
// device has the primary: its outbox is sent first and kept, the palace
// moved aside, and merged reads show the primary's drawers again.
func damagedFix(st State, path string) string {
	kept, q := st.Palace+".damaged", shellword.Quote
	fix := "stop every MemPalace client of this palace (harness sessions, the edge, mempalace serve) and copy the palace directory somewhere safe. " +
		"`mempalace repair` refuses a file that fails this check (`mempalace repair --dry-run` prints its advice): restore " + filepath.Base(path) + " from a backup, " +
		"or recover it offline: `sqlite3 " + shellword.Quote(path) + " .recover > recovered.sql`, load that into a new file, check it with `PRAGMA integrity_check`, put it in place, then `mempalace repair --yes`"
	if st.Settings.Mode != ladder.Edge {
		return fix
	}
	return fix + ". On an edge device the primary has every write the outbox delivered: `devbox-config edge flush` sends what it still holds, " +
		"then `mv " + q(st.Palace) + " " + q(kept) + " && mkdir " + q(st.Palace) + " && mv " + q(kept+"/edge") + " " + q(st.Palace+"/") + "` keeps the outbox and policy; " +
		"the next edge starts an empty local palace and merged reads show the primary's drawers (what local wings held is only in " + kept + ")"
}
