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

// verify compares each target's content on both sides: get_drawer on the
// local palace and on the primary, reassembled content compared (never
// counts, never chunk-id sets: RFC 001 §4.4, §9.3).
func verify(ctx context.Context, local, primary Caller, ts []verifyTarget) (verified int, mismatches []Mismatch, failed []Failure) {
	for _, t := range ts {
		if ctx.Err() != nil {
			return
		}
		l, err := local.Call(ctx, "mempalace_get_drawer", map[string]any{"drawer_id": t.rec.LocalID})
		if err != nil || errorOf(l) != nil {
			failed = append(failed, Failure{Kind: t.rec.Kind, Record: t.rec.LocalID, Wing: t.rec.Wing, Error: fmt.Sprintf("verify: local get_drawer: %v", cmp.Or(err, errorOf(l)))})
			continue
		}
		if t.primaryID == "" {
			mismatches = append(mismatches, missing(t, "no record with this content's id on the primary"))
			continue
		}
		p, err := primary.Call(ctx, "mempalace_get_drawer", map[string]any{"drawer_id": t.primaryID})
		if notVisible(err) {
			mismatches = append(mismatches, missing(t, "not on the primary, or not visible to this device (the gateway answers both alike)"))
			continue
		}
		if err != nil {
			failed = append(failed, Failure{Kind: t.rec.Kind, Record: t.rec.LocalID, Wing: t.rec.Wing, Error: fmt.Sprintf("verify: primary get_drawer %s: %v", t.primaryID, err)})
			continue
		}
		if e := errorOf(p); e != nil {
			mismatches = append(mismatches, missing(t, e.Error()))
			continue
		}
		if m, ok := compare(t, l, p); !ok {
			mismatches = append(mismatches, m)
			continue
		}
		verified++
	}
	return
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
	if c, ok := d["chunks"].(float64); ok && c >= 1 {
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
// wing -> sha256(entry)[:12] suffix -> ids, sorted.
func primaryDiaryIDs(ctx context.Context, primary Caller, wings map[string]bool) map[string]map[string][]string {
	out := map[string]map[string][]string{}
	for wing := range wings {
		ids := map[string][]string{}
		// A listing that fails keeps what it read: what it misses is named
		// as missing or passed over, never as a copy.
		_ = eachDrawer(ctx, primary, "primary", map[string]any{"wing": wing, "room": "diary"}, func(row map[string]any) {
			id := str(row, "drawer_id")
			if _, sfx, ok := catalogue.DiaryEntryID(id); ok {
				ids[sfx] = append(ids[sfx], id)
			}
		})
		for _, v := range ids {
			sort.Strings(v)
		}
		out[wing] = ids
	}
	return out
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
		n := max(local[w.rec.Wing+"\x00"+catalogue.EntrySuffix(w.rec.Content)], 1)
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
