package join

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/joakimp/devbox-config/doctor"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/provenance"
)

// fact is one knowledge-graph triple as a join replays it.
type fact struct {
	Subject, Predicate, Object, ValidFrom, ValidTo string
}

// timelineCap is kg_timeline's page before 3.10 (and its maximum limit).
const timelineCap = 100

// kgReader reads the local knowledge graph: kg_timeline while it answers
// everything, its limit/offset paging where the server has it (3.10+),
// else the server's own knowledge_graph.sqlite3, read-only.
type kgReader struct {
	// Files are the candidate knowledge_graph.sqlite3 paths, in the order
	// the local server would use them (RFC 001 §7.1: <palace>/ with
	// --palace, else ~/.mempalace/). The one whose triple count matches
	// the server's kg_stats is read.
	Files []string
	// Home and Palace are where doctor looks for a split graph (kg-split):
	// ~/.mempalace's and the palace's two different files.
	Home, Palace string
}

// split is doctor's kg-split finding as an error ("" Home: not looked
// for): the local server reads one of two knowledge graphs, so the facts
// it answers may be half of them or none.
func (k kgReader) split() error {
	if k.Home == "" {
		return nil
	}
	for _, f := range doctor.CheckSplits(doctor.Options{Home: k.Home}, doctor.State{Palace: k.Palace}) {
		if f.ID == doctor.IDKGSplit {
			return fmt.Errorf("not read (doctor's %s): %s; fix: %s; then join again", f.ID, f.Message, f.Fix)
		}
	}
	return nil
}

func (k kgReader) read(ctx context.Context, local Caller) ([]fact, string, error) {
	first, err := timeline(ctx, local, map[string]any{})
	if err != nil {
		return nil, "", err
	}
	if err := k.split(); err != nil { // after the server opened its graph: it may have made the second file
		return nil, "", err
	}
	if len(first) < timelineCap {
		return first, "kg_timeline (the whole graph in one answer)", nil
	}
	want := -1
	if st, err := local.Call(ctx, "mempalace_kg_stats", map[string]any{}); err == nil && errorOf(st) == nil {
		if n, ok := st["triples"].(float64); ok {
			want = int(n)
		}
	}
	// Full page: the graph may hold more. Page on if the server can; the
	// pages count only if they add up to the server's own triple count
	// (an unstable order across pages would skip a fact).
	all := append([]fact(nil), first...)
	for offset := len(first); ; offset += timelineCap {
		page, err := timeline(ctx, local, map[string]any{"limit": timelineCap, "offset": offset})
		if err != nil || (offset == len(first) && len(page) > 0 && page[0] == first[0]) {
			break // -32602 (no such argument) or an argument ignored: no paging
		}
		all = append(all, page...)
		if len(page) < timelineCap {
			if want < 0 || len(all) == want {
				return all, "kg_timeline (paged by limit/offset)", nil
			}
			break
		}
	}
	var tried []string
	for _, file := range k.Files {
		facts, err := readKGFile(ctx, file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			tried = append(tried, err.Error())
			continue
		}
		if want >= 0 && len(facts) != want {
			tried = append(tried, fmt.Sprintf("%s holds %d triples, the local server's kg_stats %d (not the file it serves; see devbox-config doctor)", file, len(facts), want))
			continue
		}
		return facts, fmt.Sprintf("%s, read-only (kg_timeline stops at %d facts and cannot page on this server)", file, timelineCap), nil
	}
	if len(tried) == 0 {
		tried = append(tried, "none of "+strings.Join(k.Files, ", ")+" exists")
	}
	return nil, "", fmt.Errorf("kg_timeline stops at %d facts and cannot page on this server, and no knowledge_graph.sqlite3 matches the server's graph: %s", timelineCap, strings.Join(tried, "; "))
}

func timeline(ctx context.Context, local Caller, args map[string]any) ([]fact, error) {
	res, err := local.Call(ctx, "mempalace_kg_timeline", args)
	if err != nil {
		return nil, err
	}
	if err := errorOf(res); err != nil {
		return nil, fmt.Errorf("local palace: kg_timeline: %w", err)
	}
	rows, ok := res["timeline"].([]any)
	if !ok {
		return nil, errors.New("local palace: kg_timeline answered without a timeline")
	}
	out := make([]fact, 0, len(rows))
	for _, x := range rows {
		m, _ := x.(map[string]any)
		out = append(out, fact{str(m, "subject"), str(m, "predicate"), str(m, "object"), str(m, "valid_from"), str(m, "valid_to")})
	}
	return out, nil
}

// readKGFile reads every triple of a MemPalace knowledge graph, read-only
// and without creating a -wal or -shm (doctor.OpenReadOnly). Triples name
// entities by id; the entities table gives their names.
func readKGFile(ctx context.Context, file string) ([]fact, error) {
	db, err := doctor.OpenReadOnly(file)
	if err != nil {
		return nil, err
	}
	defer db.Close() // read only: its error says nothing
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type='table' AND name='entities'`).Scan(&n); err != nil {
		return nil, fmt.Errorf("%s: not a readable SQLite database: %w", file, err)
	}
	q := `SELECT t.subject, t.predicate, t.object, t.valid_from, t.valid_to FROM triples t ORDER BY t.rowid`
	if n > 0 {
		q = `SELECT COALESCE(s.name, t.subject), t.predicate, COALESCE(o.name, t.object), t.valid_from, t.valid_to
			FROM triples t LEFT JOIN entities s ON s.id = t.subject LEFT JOIN entities o ON o.id = t.object ORDER BY t.rowid`
	}
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("%s: triples: %w", file, err)
	}
	defer rows.Close() // read only: its error says nothing
	var out []fact
	for rows.Next() {
		var f fact
		var from, to sql.NullString
		if err := rows.Scan(&f.Subject, &f.Predicate, &f.Object, &from, &to); err != nil {
			return nil, fmt.Errorf("%s: triples: %w", file, err)
		}
		f.ValidFrom, f.ValidTo = from.String, to.String
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: triples: %w", file, err)
	}
	return out, nil
}

// exists reports a regular file (for the candidate list's order).
func exists(p string) bool { fi, err := os.Stat(p); return err == nil && fi.Mode().IsRegular() }

// onPrimary reads the primary's facts of each subject, one kg_query
// (outgoing) a subject; a subject whose look-up fails is left out.
func onPrimary(ctx context.Context, primary Caller, subjects map[string]bool) map[string][]fact {
	out := map[string][]fact{}
	for s := range subjects {
		res, err := primary.Call(ctx, "mempalace_kg_query", map[string]any{"entity": s, "direction": "outgoing"})
		if err != nil || errorOf(res) != nil {
			continue // unknown: the write goes as planned, verify names what is not there
		}
		rows, _ := res["facts"].([]any)
		fs := []fact{}
		for _, x := range rows {
			m, _ := x.(map[string]any)
			if str(m, "subject") == s {
				fs = append(fs, fact{s, str(m, "predicate"), str(m, "object"), str(m, "valid_from"), str(m, "valid_to")})
			}
		}
		out[s] = fs
	}
	return out
}

// factOf is the fact a kg_add's arguments write.
func factOf(a map[string]any) fact {
	return fact{str(a, "subject"), str(a, "predicate"), str(a, "object"), str(a, "valid_from"), str(a, "valid_to")}
}

// states says what the primary holds of f's triple from f's valid_from:
// an open copy, a closed one, f itself.
func states(there []fact, f fact) (open, closed, same bool) {
	for _, p := range there {
		if p.Subject != f.Subject || p.Predicate != f.Predicate || p.Object != f.Object || p.ValidFrom != f.ValidFrom {
			continue
		}
		open, closed, same = open || p.ValidTo == "", closed || p.ValidTo != "", same || p == f
	}
	return
}

// copyOf is the primary's copy of f's triple that is open from another
// valid_from (other false), or closed from f's with another end (other
// true); ok false when it holds neither.
func copyOf(there []fact, f fact, other bool) (c fact, ok bool) {
	for _, p := range there {
		same := p.Subject == f.Subject && p.Predicate == f.Predicate && p.Object == f.Object
		if same && (!other && p.ValidTo == "" && p.ValidFrom != f.ValidFrom || other && p.ValidFrom == f.ValidFrom && p.ValidTo != "" && p.ValidTo != f.ValidTo) {
			return p, true
		}
	}
	return fact{}, false
}

// factsOnPrimary asks the primary, one kg_query a subject, about each
// fact this run would queue and each closed fact an earlier run sent,
// for the triple from the same valid_from in the other state:
//   - closed here, open there (closed locally after the primary got it):
//     MemPalace's kg_add answers a closed triple with the open one's id
//     and files nothing, so the write becomes the close itself
//     (kg_invalidate ended valid_to), as the edge replicates a local
//     close; sent, and on the primary only once it lands.
//   - open here, closed there (ended on the primary since): the primary's
//     close is newer knowledge; not re-opened, counted skipped, and a
//     note says how many. So too closed on both sides with other ends: no
//     second, overlapping copy is filed; --verify names the two ends.
//   - the same fact there already (the edge replicated it): not sent,
//     counted skipped, as a drawer already there is.
//   - open here, its triple closed there and replaced by another value
//     current there (replacedOn): not sent, counted replaced (not
//     skipped, not verified), named in a note (replacedThere); a gateway
//     would hold the kg_add, a bare MemPalace open it beside the current
//     value.
//   - open there from another valid_from (and not here from this one):
//     kg_add answers the open copy and files nothing, so it is not sent,
//     counted neither sent nor skipped, and named (open on the primary).
func (j *joining) factsOnPrimary(ctx context.Context) {
	asks := func(p planned) bool { return p.rec.Kind == Facts && (p.requeue() || p.sent && p.rec.Closed) }
	subjects := map[string]bool{}
	for _, p := range j.planned {
		if asks(p) {
			subjects[str(p.rec.Args, "subject")] = true
		}
	}
	if len(subjects) == 0 {
		return
	}
	j.connect()
	there := onPrimary(ctx, j.sent, subjects)
	var kept []string
	for i := range j.planned {
		p := &j.planned[i]
		fs, asked := there[str(p.rec.Args, "subject")]
		if !asked || !asks(*p) {
			continue
		}
		f := factOf(p.rec.Args)
		switch open, closed, same := states(fs, f); {
		case f.ValidTo != "" && open && !same:
			if p.sent {
				j.rep.Pending[Facts]++
			}
			*p = planned{rec: Record{Kind: Facts, Tool: "mempalace_kg_invalidate", Args: map[string]any{"subject": f.Subject, "predicate": f.Predicate, "object": f.Object, "ended": f.ValidTo}, Closes: f}}
			if op, ok := j.prior[p.rec.key()]; ok && op.State != outbox.Done {
				p.op, p.had = op, true // queued by an interrupted run: resumed, not queued twice
			}
		case closed && !open && !same:
			j.onPrimaryAlready(p)
			c, _ := copyOf(fs, f, true)
			kept = append(kept, fmt.Sprintf("%s (%s..%s there)", recordName(p.rec), cmp.Or(c.ValidFrom, "(no date)"), c.ValidTo))
			if c.ValidTo != "" && f.ValidTo != "" && j.o.Verify != 0 { // closed here too: two ends
				j.rep.Mismatches = append(j.rep.Mismatches, Mismatch{Kind: Facts, LocalID: recordName(p.rec), Verdict: "ended otherwise on the primary",
					Detail: fmt.Sprintf("closed here %s..%s; the primary holds it %s..%s: its close is kept, no second copy filed", cmp.Or(f.ValidFrom, "(no date)"), f.ValidTo, cmp.Or(c.ValidFrom, "(no date)"), c.ValidTo)})
			}
		case same && !p.sent: // on the primary already (the edge replicated it): not sent
			j.onPrimaryAlready(p)
		case !open && !closed:
			if c, ok := copyOf(fs, f, false); ok {
				p.held = true
				if !p.sent {
					j.rep.Pending[Facts]--
				}
				j.rep.Mismatches = append(j.rep.Mismatches, openThere(p.rec, f, c, j.openFix(c)))
			} else if cur, ended, ok := replacedOn(fs, f); ok {
				p.held = true
				if !p.sent {
					j.rep.Pending[Facts]--
				}
				j.replacedOnPrimary(p.rec, fmt.Sprintf("ended %s there; %q current from %s", ended, cur.Object, cmp.Or(cur.ValidFrom, "(no date)")))
			}
		}
	}
	if len(kept) > 0 {
		j.rep.Notes = append(j.rep.Notes, closedThere(kept, "are closed on the primary (ended there since, or with another end)"))
	}
}

// onPrimaryAlready counts a fact the primary holds as it is to stay
// there as skipped; it is not sent.
func (j *joining) onPrimaryAlready(p *planned) {
	p.held = true
	j.rep.Skipped[Facts]++
	if !p.sent {
		j.rep.Pending[Facts]--
	}
}

// closedThere is the note on the facts (names, with the primary's dates)
// left closed on the primary: why they are.
func closedThere(names []string, why string) string {
	list := strings.Join(names[:min(len(names), 5)], ", ")
	if len(names) > 5 {
		list += fmt.Sprintf(", and %d more", len(names)-5)
	}
	return fmt.Sprintf("%d facts %s: %s; left closed there (the primary's close is the newer knowledge), not re-opened and no second copy filed (counted skipped); a fact that holds again is a new kg_add with its own valid_from", len(names), why, list)
}

// openThere names a fact not sent because the primary holds its triple
// open (c) from another valid_from: MemPalace's kg_add would answer c.
// fix is openFix's.
func openThere(rec Record, f, c fact, fix string) Mismatch {
	here := "open here from " + cmp.Or(f.ValidFrom, "(no date)")
	if f.ValidTo != "" {
		here = fmt.Sprintf("closed here (%s..%s)", cmp.Or(f.ValidFrom, "(no date)"), f.ValidTo)
	}
	return Mismatch{Kind: Facts, LocalID: recordName(rec), Verdict: "open on the primary",
		Detail: fmt.Sprintf("%s; the primary holds it open from %s: MemPalace files no copy of a triple while it is open, so it was not sent (%s)", here, cmp.Or(c.ValidFrom, "(no date)"), fix)}
}

// openFix is what to do about a fact the primary holds open (c) that
// keeps another of this palace's facts of the triple off it: close it
// there if it ended, unless this palace holds it open from the same date
// too (a period that ended before the triple held again): then it holds
// now on both sides, and closing it would end a fact that still holds.
func (j *joining) openFix(c fact) string {
	for _, p := range j.planned {
		if p.rec.Kind == Facts && p.rec.Tool == "mempalace_kg_add" && factOf(p.rec.Args) == c {
			return "this palace holds it open from that date too: it holds now on both sides, and MemPalace cannot file this earlier period beside it; leave the primary's open copy as it is"
		}
	}
	return "close it there with kg_invalidate if it ended there, then join again"
}

// replacedOn is the value that replaced f's on the primary (there: the
// subject's facts) and the last end there of f's triple: f is open here,
// its triple closed there with no copy open, and a value of the subject
// and predicate current there starts at one of its ends (a supersede), or
// at the end of a value that did in turn, no earlier than f starts. The
// gateway holds such a kg_add (replacedHeld: nothing filed); a bare
// MemPalace would open f beside the current value. ok false: none.
func replacedOn(there []fact, f fact) (cur fact, ended string, ok bool) {
	if f.ValidTo != "" {
		return fact{}, "", false
	}
	reached := map[string]bool{}
	var values []fact
	for _, p := range there {
		switch {
		case p.Subject != f.Subject || p.Predicate != f.Predicate:
		case p.Object != f.Object:
			values = append(values, p)
		case p.ValidTo == "":
			return fact{}, "", false
		default:
			ended, reached[provenance.Instant(p.ValidTo)] = max(ended, p.ValidTo), true
		}
	}
	for grew := true; grew; {
		grew = false
		for _, v := range values {
			switch {
			case !reached[provenance.Instant(v.ValidFrom)]:
			case v.ValidTo == "":
				return v, ended, provenance.Instant(f.ValidFrom) <= provenance.Instant(v.ValidFrom)
			case !reached[provenance.Instant(v.ValidTo)]:
				reached[provenance.Instant(v.ValidTo)], grew = true, true
			}
		}
	}
	return fact{}, "", false
}

// replacedOnPrimary counts rec, a fact another value replaced on the
// primary (why: what is current there), as replaced: join's noted skip,
// neither sent nor a mismatch.
func (j *joining) replacedOnPrimary(rec Record, why string) {
	j.rep.ReplacedOnPrimary++
	j.replaced = append(j.replaced, fmt.Sprintf("%s (%s)", recordName(rec), why))
}

// replacedThere is the note on the facts (names, with the primary's
// current value) not sent because another value replaced them on the
// primary: what is current there, how to make this palace's value
// current, and what ending it here would do.
func replacedThere(names []string) string {
	list := strings.Join(names[:min(len(names), 5)], ", ")
	if len(names) > 5 {
		list += fmt.Sprintf(", and %d more", len(names)-5)
	}
	return fmt.Sprintf("%d facts current here are closed on the primary and replaced there by another value: %s; not sent (a devbox-config gateway files nothing for such a kg_add, and MemPalace would make both values current) and counted as replaced, not as a mismatch; this palace keeps its own value current, and each join skips it again. To make one the value on the primary: supersede the current value with it (ending another device's fact is for an admin device), or, if both are meant to be current, kg_add it with a valid_from after the current value's start. Ending it here (kg_invalidate) does not make the sides agree: the next join files its period on the primary as closed history beside the primary's own, which no MemPalace tool deletes", len(names), list)
}
