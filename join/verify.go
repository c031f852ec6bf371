package join

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/strictjson"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// ChunkSize is MemPalace's MCP chunk size (config.chunk_size, 800
// characters in 3.6.0 and since).
const ChunkSize = 800

// Mismatch is a verified record whose content differs on the primary.
type Mismatch struct {
	Kind      string `json:"type"`
	LocalID   string `json:"local_id"`
	PrimaryID string `json:"primary_id,omitempty"`
	Wing      string `json:"wing,omitempty"`
	// Verdict: "missing" (not on the primary), "truncated on the primary",
	// "truncated locally", "edited" (two complete revisions), "damaged"
	// (neither a prefix nor complete).
	Verdict string `json:"verdict"`
	Detail  string `json:"detail"`
}

// verifyTarget is one record to verify: its local content and the id the
// primary holds it under.
type verifyTarget struct {
	rec       Record
	primaryID string
	// earlier: an earlier join sent it (this one did not send it again).
	earlier bool
}

// missing is the mismatch of a target the primary does not hold: one an
// earlier join sent may have been deleted there since, which no join
// sends again.
func missing(t verifyTarget, why string) Mismatch {
	if t.earlier {
		why += "; an earlier join sent it: if it was deleted on the primary since, a join does not send it again (behind a devbox-config gateway, `gateway trash list` there shows the delete, `gateway trash restore N` brings it back)"
	}
	return Mismatch{Kind: t.rec.Kind, LocalID: t.rec.LocalID, PrimaryID: t.primaryID, Wing: t.rec.Wing, Verdict: "missing", Detail: why}
}

// sample picks n of the targets with a seeded generator (all when n < 0
// or n >= len).
func sample(ts []verifyTarget, n int, seed uint64) []verifyTarget {
	if n < 0 || n >= len(ts) {
		return ts
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := make([]verifyTarget, 0, n)
	for _, i := range r.Perm(len(ts))[:n] {
		out = append(out, ts[i])
	}
	return out
}

// verify compares each target's content on both sides: the local
// palace's and the primary's drawers read l.size() ids a call (reader),
// reassembled content compared (never counts, never chunk-id sets: RFC
// 001 §4.4, §9.3). done, when set, is told how many targets are settled
// after each batch.
func verify(ctx context.Context, l, p *reader, ts []verifyTarget, done func(int)) (verified int, mismatches []Mismatch, failed []Failure) {
	for start := 0; start < len(ts); start += l.size() {
		batch := ts[start:min(start+l.size(), len(ts))]
		var lids, pids []string
		for _, t := range batch {
			lids = append(lids, t.rec.LocalID)
			if t.primaryID != "" {
				pids = append(pids, t.primaryID)
			}
		}
		ls, ps := l.read(ctx, lids), p.read(ctx, pids)
		if ctx.Err() != nil {
			return
		}
		for _, t := range batch {
			lr, pr := ls[t.rec.LocalID], ps[t.primaryID]
			switch {
			case lr.err != nil, lr.res == nil, errorOf(lr.res) != nil:
				failed = append(failed, Failure{Kind: t.rec.Kind, Record: t.rec.LocalID, Wing: t.rec.Wing, Error: "verify: " + lr.why("local").Error()})
			case t.primaryID == "":
				mismatches = append(mismatches, missing(t, "no record with this content's id on the primary"))
			case notVisible(pr.err):
				mismatches = append(mismatches, missing(t, "not on the primary, or not visible to this device (the gateway answers both alike)"))
			case pr.err != nil:
				failed = append(failed, Failure{Kind: t.rec.Kind, Record: t.rec.LocalID, Wing: t.rec.Wing, Error: "verify: " + pr.err.Error()})
			case pr.res == nil, errorOf(pr.res) != nil:
				mismatches = append(mismatches, missing(t, pr.why("primary").Error()))
			default:
				if m, ok := compare(t, lr.res, pr.res); !ok {
					mismatches = append(mismatches, m)
					continue
				}
				verified++
			}
		}
		if done != nil {
			done(start + len(batch))
		}
	}
	return
}

// reader reads one side's drawers by id: get_drawers, up to getBatch ids
// a call (MemPalace 3.11.0), or get_drawer one by one once the side
// refuses get_drawers (an older MemPalace; a gateway to a device that
// does not read every wing).
type reader struct {
	c      Caller
	side   string
	per    int // ids its callers hand it a call at a time (0: getBatch; Options.batch)
	single bool
	max    int // ids a batch carries at most (0: as many as asked), halved by a failed one
}

// reader reads side's drawers through c, as many a call as the join's
// options say.
func (j *joining) reader(c Caller, side string) *reader {
	return &reader{c: c, side: side, per: j.o.batch}
}

// size is how many ids the reader's callers hand it at a time.
func (r *reader) size() int { return cmp.Or(r.per, getBatch) }

// drawerRead is one id's read: the answer for it (nil: a batch answer
// left it out, as a gateway withholds one), or the failed call's error.
type drawerRead struct {
	res map[string]any
	err error
}

// why says why a read holds no drawer.
func (d drawerRead) why(side string) error {
	switch {
	case d.err != nil:
		return d.err
	case d.res == nil:
		return fmt.Errorf("left out of the %s's get_drawers answer: not there, or withheld from this device", side)
	}
	return errorOf(d.res)
}

// read reads ids. A batch whose call fails is read again in halves (an
// answer larger than a client takes: 500 drawers of 130 KB pass the
// edge's 64 MiB), down to one id, which fails with the error, and the
// batches after it are half as large; a side not reached, refusing the
// token or out of time fails the whole batch (its halves would only fail
// again, slower). Only a refusal of the tool itself turns the reader to
// get_drawer.
func (r *reader) read(ctx context.Context, ids []string) map[string]drawerRead {
	out := make(map[string]drawerRead, len(ids))
	for rest := ids; len(rest) > 0 && !r.single; {
		n := len(rest)
		if r.max > 0 {
			n = min(n, r.max)
		}
		if !r.batch(ctx, rest[:n], out) {
			r.max = max(n/2, 1)
		}
		rest = rest[n:]
	}
	if !r.single {
		return out
	}
	for _, id := range ids {
		if ctx.Err() != nil {
			break
		}
		res, err := r.c.Call(ctx, "mempalace_get_drawer", map[string]any{"drawer_id": id})
		if err != nil {
			err = fmt.Errorf("%s get_drawer %s: %w", r.side, id, err)
		}
		out[id] = drawerRead{res: res, err: err}
	}
	return out
}

// batch reads ids by one get_drawers into out, or by its halves when the
// call fails (false) as read says.
func (r *reader) batch(ctx context.Context, ids []string, out map[string]drawerRead) bool {
	res, err := r.c.Call(ctx, "mempalace_get_drawers", map[string]any{"drawer_ids": ids})
	if r.single = refused(err); r.single {
		return true
	}
	if err != nil && len(ids) > 1 && ctx.Err() == nil && !errors.Is(err, outbox.ErrNotSent) && !errors.Is(err, outbox.ErrUnauthorized) && !errors.Is(err, context.DeadlineExceeded) {
		half := len(ids) / 2
		if r.batch(ctx, ids[:half], out); !r.single {
			r.batch(ctx, ids[half:], out)
		}
		return false
	}
	items, ok := res["results"].([]any)
	if err == nil && !ok {
		err = cmp.Or(errorOf(res), errors.New("an answer without results"))
	}
	for _, id := range ids {
		if err != nil {
			out[id] = drawerRead{err: fmt.Errorf("%s get_drawers (%d ids): %w", r.side, len(ids), err)}
		}
	}
	for _, x := range items {
		if it, _ := x.(map[string]any); str(it, "drawer_id") != "" {
			out[str(it, "drawer_id")] = drawerRead{res: it}
		}
	}
	return true
}

// refused is a side's refusal of a tool it does not serve: MemPalace's
// unknown tool (before 3.11.0 for get_drawers), or a gateway's denial.
func refused(err error) bool {
	var rpc *outbox.RPCError
	var local *jsonrpc.Error
	switch {
	case errors.As(err, &rpc):
		return rpc.Code == -32601 || rpc.Code == -31003 /* gateway.CodeDenied */
	case errors.As(err, &local):
		return local.Code == -32601
	}
	return false
}

// notVisible is a gateway's one answer for a record that does not exist
// and one this device may not see.
func notVisible(err error) bool {
	var rpc *outbox.RPCError
	return errors.As(err, &rpc) && rpc.Code == -31003 /* gateway.CodeDenied */ && strings.Contains(rpc.Message, deviceinfo.RuleNotVisible)
}

// compare adjudicates two get_drawer answers (RFC 001 §4.4, §9.3). Equal
// content is verified when the local side's final-chunk arithmetic holds
// (equal truncated texts are not). Two sides that each satisfy the final-chunk
// arithmetic for their own content are two complete revisions (an edit on
// one side), not damage. Truncation is a prefix (only that) whose chunk
// count promises more than it holds.
func compare(t verifyTarget, local, primary map[string]any) (Mismatch, bool) {
	lc, pc := str(local, "content"), str(primary, "content")
	m := Mismatch{Kind: t.rec.Kind, LocalID: t.rec.LocalID, PrimaryID: t.primaryID, Wing: t.rec.Wing}
	lok, lwhy := complete(local, lc)
	pok, pwhy := complete(primary, pc)
	if lc == pc && lok {
		return Mismatch{}, true
	}
	ll, pl := utf8.RuneCountInString(lc), utf8.RuneCountInString(pc)
	switch {
	case lc == pc:
		m.Verdict = "truncated locally"
		m.Detail = fmt.Sprintf("both sides hold the same %d characters, but the local palace's chunks promise more (%s): the text itself is incomplete", ll, lwhy)
	case lok && pok:
		// Both complete by their own arithmetic: two revisions, even when
		// one extends the other.
		m.Verdict = "edited"
		m.Detail = fmt.Sprintf("two complete revisions (%d and %d characters, each with a consistent final chunk): an update on one side, not loss", ll, pl)
	case strings.HasPrefix(lc, pc) && !pok:
		m.Verdict = "truncated on the primary"
		m.Detail = fmt.Sprintf("the primary holds the first %d of %d characters (%s)", pl, ll, pwhy)
	case strings.HasPrefix(pc, lc) && !lok:
		m.Verdict = "truncated locally"
		m.Detail = fmt.Sprintf("the local palace holds the first %d of the primary's %d characters (%s)", ll, pl, lwhy)
	default:
		m.Verdict = "damaged"
		m.Detail = fmt.Sprintf("the sides differ and not by a clean truncation; local: %s; primary: %s", lwhy, pwhy)
	}
	return m, false
}

// complete checks one side's final-chunk arithmetic: with n chunks of 800,
// the last holds len(content) - 800*(n-1) characters, which must be 1..800.
func complete(d map[string]any, content string) (bool, string) {
	n := 1
	if c, ok := strictjson.Float(d["chunks"]); ok && c >= 1 {
		n = int(c)
	} else if ids, ok := d["chunk_ids"].([]any); ok && len(ids) > 0 {
		n = len(ids)
	}
	l := utf8.RuneCountInString(content)
	last := l - ChunkSize*(n-1)
	if last >= 1 && last <= ChunkSize {
		return true, fmt.Sprintf("%d chunk(s), final chunk %d characters: complete", n, last)
	}
	return false, fmt.Sprintf("%d chunk(s) but %d characters: the final chunk would hold %d, so chunks are missing", n, l, last)
}

// primaryDiaryIDs lists the primary's diary wings once each:
// wing -> sha256(entry)[:12] of each entry's text now (an entry edited
// since it was filed keeps its first id: catalogue.ListedEntrySuffix; one
// whose listing cuts its text is read whole) -> ids, sorted.
func primaryDiaryIDs(ctx context.Context, primary Caller, wings map[string]bool) (out map[string]map[string][]string, unread map[string]bool) {
	out, unread = map[string]map[string][]string{}, map[string]bool{}
	for wing := range wings {
		ids := map[string][]string{}
		// A listing that fails keeps what it read (the wing in unread):
		// what it misses is named as missing or passed over, never as a
		// copy; likewise an entry whose text cannot be read.
		err := eachDrawer(ctx, primary, "primary", map[string]any{"wing": wing, "room": "diary"}, func(row map[string]any) {
			id := str(row, "drawer_id")
			sfx, known, ok := catalogue.ListedEntrySuffix(row)
			if ok && !known {
				got, err := primary.Call(ctx, "mempalace_get_drawer", map[string]any{"drawer_id": id})
				sfx, known = catalogue.EntrySuffix(str(got, "content")), err == nil && errorOf(got) == nil
			}
			if known {
				ids[sfx] = append(ids[sfx], id)
			}
		})
		for _, v := range ids {
			sort.Strings(v)
		}
		out[wing], unread[wing] = ids, err != nil
	}
	return out, unread
}

// writtenRecord is a diary entry or closed fact this run sent.
type writtenRecord struct {
	rec Record
	id  string // diary_write's entry_id
}

// concurrentCopies finds, after the drain, a second copy of what this run
// wrote where no server guard could stop one: a diary entry whose suffix
// appears twice in its wing, a closed fact twice on its subject. Only a
// join of another palace running at the same moment makes one (the
// outbox's look-ups and lease serialize everything else). One listing per
// diary wing, one kg_query per subject.
func concurrentCopies(ctx context.Context, primary Caller, wrote []writtenRecord, listing map[string]map[string][]string, local map[string]int) []Mismatch {
	var out []Mismatch
	subjects := map[string][]writtenRecord{}
	for _, w := range wrote {
		if w.rec.Kind == Facts {
			subjects[str(w.rec.Args, "subject")] = append(subjects[str(w.rec.Args, "subject")], w)
			continue
		}
		n := max(local[w.rec.entryKey()], 1)
		if ids := listing[w.rec.Wing][catalogue.EntrySuffix(w.rec.Content)]; len(ids) > n && w.rec.Ordinal <= 1 {
			out = append(out, Mismatch{Kind: Diaries, LocalID: w.rec.LocalID, PrimaryID: w.id, Wing: w.rec.Wing, Verdict: "duplicate on the primary",
				Detail: fmt.Sprintf("the primary holds this entry %d times (%s), this palace %d: another palace joined at the same moment; keep %d and delete the others there", len(ids), strings.Join(ids, ", "), n, n)})
		}
	}
	for subject, ws := range subjects {
		res, err := primary.Call(ctx, "mempalace_kg_query", map[string]any{"entity": subject, "direction": "outgoing"})
		if err != nil || errorOf(res) != nil {
			continue // the look-up says nothing either way; verification is by drawers
		}
		facts, _ := res["facts"].([]any)
		for _, w := range ws {
			n := 0
			for _, x := range facts {
				f, _ := x.(map[string]any)
				if str(f, "subject") == subject && str(f, "predicate") == str(w.rec.Args, "predicate") && str(f, "object") == str(w.rec.Args, "object") &&
					str(f, "valid_from") == str(w.rec.Args, "valid_from") && str(f, "valid_to") == str(w.rec.Args, "valid_to") {
					n++
				}
			}
			if n > 1 {
				out = append(out, Mismatch{Kind: Facts, LocalID: recordName(w.rec), Verdict: "duplicate on the primary",
					Detail: fmt.Sprintf("the primary holds this closed fact %d times: another palace joined at the same moment (closed facts have no server guard, RFC 001 §3.2)", n)})
			}
		}
	}
	return out
}

// verifyFacts reads back from the primary, one kg_query a subject, a
// seeded sample of the facts on it by this run's count (sent, or found
// there): each must be there with its interval. A closed one the primary
// holds open is named so (MemPalace files no closed copy of a triple
// while it is open). A fact kept out as closed on the primary, or as
// replaced there by another value (join's noted skip), is not asked.
func (j *joining) verifyFacts(ctx context.Context) {
	var ts []verifyTarget
	for _, p := range j.planned {
		op, ok := j.final[p.op.ID]
		if p.rec.Kind != Facts || p.held || !(p.sent || ok && op.State == outbox.Done && len(op.Error) == 0) {
			continue
		}
		ts = append(ts, verifyTarget{rec: p.rec})
	}
	ts = sample(ts, j.o.Verify, j.o.Seed)
	subjects := map[string]bool{}
	for i, t := range ts {
		f := t.rec.Closes
		if t.rec.Tool == "mempalace_kg_add" {
			f = factOf(t.rec.Args)
		}
		ts[i].rec.Closes, subjects[f.Subject] = f, true
	}
	there := onPrimary(ctx, j.sent, subjects)
	var closed []string
	for _, t := range ts {
		f := t.rec.Closes
		name := recordName(Record{Kind: Facts, Args: map[string]any{"subject": f.Subject, "predicate": f.Predicate, "object": f.Object}})
		fs, asked := there[f.Subject]
		if !asked {
			j.rep.Failed = append(j.rep.Failed, Failure{Kind: Facts, Record: name, Error: "verify: the primary's kg_query of " + f.Subject + " failed"})
			continue
		}
		open, _, same := states(fs, f)
		if same {
			continue
		}
		if c, ok := copyOf(fs, f, true); ok && f.ValidTo == "" && !open { // ended on the primary since an earlier join sent it
			closed = append(closed, fmt.Sprintf("%s (%s..%s there)", name, cmp.Or(c.ValidFrom, "(no date)"), c.ValidTo))
			continue
		}
		m := Mismatch{Kind: Facts, LocalID: name, Verdict: "missing", Detail: fmt.Sprintf("no fact %s..%s of this triple on the primary", cmp.Or(f.ValidFrom, "(no date)"), f.ValidTo)}
		for _, p := range fs {
			if f.ValidTo != "" && p.Predicate == f.Predicate && p.Object == f.Object && p.ValidTo == "" {
				m.Verdict = "open on the primary"
				m.Detail = fmt.Sprintf("closed here (%s..%s); the primary holds it open from %s: MemPalace files no closed copy of a triple while it is open (%s)", cmp.Or(f.ValidFrom, "(no date)"), f.ValidTo, cmp.Or(p.ValidFrom, "(no date)"), j.openFix(p))
			}
		}
		j.rep.Mismatches = append(j.rep.Mismatches, m)
	}
	if len(closed) > 0 {
		j.rep.Notes = append(j.rep.Notes, closedThere(closed, "open here are closed on the primary since an earlier join sent them"))
	}
}
