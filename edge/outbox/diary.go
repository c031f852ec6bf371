package outbox

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/strictjson"
)

// Diary entries have no server guard (RFC 001 §7.6) and their text may
// repeat ("standup: nothing new", day after day), so "an entry with this
// text is on the primary" never means "this op landed". The look-ups
// count instead:
//
//   - Live writes (the edge): each diary wing has a fence, the id stamp of
//     the newest entry this outbox knows it wrote there (or, before its
//     first, the newest entry the wing held). Entry ids carry the
//     primary's own clock, so an entry with the op's text newer than the
//     fence is the op's: ops of one wing are sent in order (one causal
//     key), so no earlier op of this outbox can have made it. Before the
//     first send to a wing the fence is read from the primary (two
//     list_drawers calls, once per wing for the outbox's life).
//   - A replay of history (join, Flusher.History): the n-th of n equal
//     entries in the local palace is on the primary when the primary's
//     wing holds n entries with that text. Sent, it names itself the
//     (n-c)-th copy the primary lacks (c the wing holds; WithCopy), so a
//     gateway's trash holding k deleted accounts for k copies, not all.
//
// The limit: another writer appending the same text to the same wing
// after the fence (another palace or device under the same agent name)
// is counted as this op's, for a live write whose answer was lost; and a
// palace joining counts every equal entry on the primary, whoever wrote
// it. docs/replication.md says so.

// flushRun caches what one lane's round learned about the primary.
type flushRun struct {
	counts map[string]map[string]int // History: wing -> entry suffix -> entries on the primary
}

// fenceKey is a wing's fence in meta.
func fenceKey(wing string) string { return "fence:diary:" + wing }

// noEntries is the fence of a wing that held no entry: every stamp is newer.
const noEntries = "0"

// diaryLanded reports whether the diary entry of op (a diary_write, or a
// checkpoint's diary) is on the primary, and, when a live write's look-up
// found it, its id and timestamp there (filed_at, the timestamp
// diary_read answers: a tombstone names the copy by it). A first attempt
// of a live write looks nothing up, but reads the wing's fence first if
// the outbox has none.
func (f *Flusher) diaryLanded(ctx context.Context, run *flushRun, op Op, diary map[string]any, ambiguous bool) (found entryOnPrimary, landed bool, err error) {
	wing, suffix := catalogue.DiaryWingFor(diary), catalogue.EntrySuffix(catalogue.DiaryEntry(diary))
	if f.History {
		n, err := f.primaryCount(ctx, run, wing, suffix)
		return entryOnPrimary{}, err == nil && n >= max(op.Ordinal, 1), err
	}
	if !ambiguous {
		// The fence was read before the op was marked in flight
		// (prepareDiary); a device that may write the wing but not read it
		// (a gateway's grant) sends without one.
		return entryOnPrimary{}, false, nil
	}
	fence, err := f.S.Meta(ctx, fenceKey(wing))
	if err != nil {
		return entryOnPrimary{}, false, fmt.Errorf("%w: the diary fence of %s: %w", ErrLookup, wing, err)
	}
	// No fence (an op an older edge left in flight): the older rule, an
	// entry with the text anywhere in the wing.
	return f.newestWith(ctx, wing, suffix, cmp.Or(fence, noEntries))
}

// prepareDiary reads the fence of a diary op's wing (a diary_write's, a
// checkpoint's diary) when the outbox has none, before the op's first
// attempt is marked in flight: a process cut while reading it leaves the
// op unsent, not maybe applied, so no look-up without a fence ever takes
// another writer's equal entry for it. A read the primary refuses (a
// device that may write the wing but not read it) sends without a fence;
// any other failure is transient: the op is not sent now.
func (f *Flusher) prepareDiary(ctx context.Context, op Op) error {
	d, _ := diaryOf(op)
	if f.History || d == nil {
		return nil // (a payload that is not an object: the send says why)
	}
	wing := catalogue.DiaryWingFor(d)
	fence, err := f.S.Meta(ctx, fenceKey(wing))
	if err != nil {
		return fmt.Errorf("%w: the diary fence of %s: %w", ErrLookup, wing, err)
	}
	if fence != "" {
		return nil
	}
	if err := f.readFence(ctx, wing); err != nil && !lookUpRefused(err) {
		return err
	}
	return nil
}

// sendDiary sends a diary_write (looked up first as diaryLanded says).
func (f *Flusher) sendDiary(ctx context.Context, run *flushRun, op Op, a map[string]any, ambiguous bool) (map[string]any, error) {
	found, landed, err := f.diaryLanded(ctx, run, op, a, ambiguous)
	if err != nil {
		return nil, err
	}
	if landed {
		// Found, not sent: the count already holds it.
		res := map[string]any{"success": true, "skipped": "this diary entry is already on the primary", "entry_id": found.ID}
		if found.FiledAt != "" {
			res["timestamp"] = found.FiledAt
		}
		return res, nil
	}
	if f.History { // the n-th copy the primary lacks: a gateway's trash holding k accounts for k
		ctx = WithCopy(ctx, max(op.Ordinal, 1)-run.counts[catalogue.DiaryWingFor(a)][catalogue.EntrySuffix(catalogue.DiaryEntry(a))])
	}
	res, err := f.sendWrite(resendIf(ctx, ambiguous), op, op.Payload)
	if err == nil && res["success"] != false {
		run.sent(a)
	}
	return res, err
}

// sent notes an entry on the primary in this round's counts (History). A
// live write's fence moves when its op is recorded done, in the same
// transaction (moveFence): a flusher killed between the two must not
// leave a fence past an entry its op does not yet own.
func (run *flushRun) sent(diary map[string]any) {
	if c := run.counts[catalogue.DiaryWingFor(diary)]; c != nil {
		c[catalogue.EntrySuffix(catalogue.DiaryEntry(diary))]++
	}
}

// diaryOf is the diary entry op writes: a diary_write's arguments, or a
// checkpoint's diary (checkpoint); nil for any other op.
func diaryOf(op Op) (diary map[string]any, checkpoint bool) {
	a, err := args(op)
	if err != nil {
		return nil, false
	}
	rec, _ := catalogue.Lookup(op.Tool)
	switch d, _ := a["diary"].(map[string]any); {
	case rec.Replay == catalogue.DiarySuffix:
		return a, false
	case rec.Replay == catalogue.ServerDeduped && d != nil:
		return d, true
	}
	return nil, false
}

// entryOf is the diary entry a landed op (a diary_write, or a checkpoint
// with a diary) made or found on the primary: its wing and id ("" for
// none).
func entryOf(op Op, res map[string]any) (wing, id string) {
	d, checkpoint := diaryOf(op)
	if d == nil {
		return "", ""
	}
	if id = str(res, "entry_id"); checkpoint {
		id = str(res, "diary_entry_id")
		if rd, ok := res["diary"].(map[string]any); ok && id == "" {
			id = str(rd, "entry_id")
		}
	}
	return catalogue.DiaryWingFor(d), id
}

// moveFence moves a wing's fence to a landed live write's entry, in the
// transaction that records the op done.
func (f *Flusher) moveFence(ctx context.Context, tx querier, op Op, res map[string]any) error {
	if f.History {
		return nil
	}
	wing, id := entryOf(op, res)
	stamp, _, ok := catalogue.DiaryEntryID(id)
	if !ok {
		return nil
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=max(value, excluded.value)`, fenceKey(wing), stamp)
	return err
}

// readFence records the newest entry of a wing on the primary as its
// fence (noEntries for an empty wing). list_drawers sorts by id, and a
// wing's diary ids sort by their stamp; a drawer filed in room "diary"
// that is not an entry sorts after them and is passed over.
func (f *Flusher) readFence(ctx context.Context, wing string) error {
	first, _, err := f.lookUp(ctx, "mempalace_list_drawers", map[string]any{"wing": wing, "room": "diary", "limit": 1}, "drawers")
	if err != nil {
		return err
	}
	total, _ := strictjson.Float(first["total"]) // the primary's answer keeps its numbers (json.Number)
	fence := noEntries
	for end := int(total); end > 0 && fence == noEntries; end -= 100 {
		_, rows, err := f.lookUp(ctx, "mempalace_list_drawers", map[string]any{"wing": wing, "room": "diary", "limit": 100, "offset": max(end-100, 0)}, "drawers")
		if err != nil {
			return err
		}
		for i := len(rows) - 1; i >= 0 && fence == noEntries; i-- {
			row, _ := rows[i].(map[string]any)
			if stamp, _, ok := catalogue.DiaryEntryID(str(row, "drawer_id")); ok {
				fence = stamp
			}
		}
	}
	_, err = f.S.flushDB.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO NOTHING`, fenceKey(wing), fence)
	if err != nil {
		return fmt.Errorf("%w: recording the diary fence of %s: %w", ErrLookup, wing, err)
	}
	return nil
}

// newestWith finds the oldest entry of wing with the suffix whose stamp is
// after fence (listed from the fence's date on, the primary's own
// filter; the stamps decide).
func (f *Flusher) newestWith(ctx context.Context, wing, suffix, fence string) (entryOnPrimary, bool, error) {
	filter := map[string]any{"wing": wing, "room": "diary", "limit": 100}
	if len(fence) >= 8 {
		filter["since"] = fence[:4] + "-" + fence[4:6] + "-" + fence[6:8]
	}
	var best entryOnPrimary
	var bestStamp string
	err := f.eachEntry(ctx, filter, func(id, stamp, sfx string, row map[string]any) {
		if sfx == suffix && stamp > fence && (best.ID == "" || stamp < bestStamp) {
			meta, _ := row["metadata"].(map[string]any)
			best, bestStamp = entryOnPrimary{ID: id, FiledAt: str(meta, "filed_at")}, stamp
		}
	})
	return best, best.ID != "", err
}

// entryOnPrimary is a diary entry a look-up found on the primary: its id
// and its filed_at ("" when the listing had none).
type entryOnPrimary struct{ ID, FiledAt string }

// primaryCount is how many entries with the suffix the wing holds on the
// primary (the wing listed once per round), by the hash of each entry's
// text now, not its id's suffix: an entry edited since it was filed keeps
// its first id (catalogue.ListedEntrySuffix; one whose listing cuts its
// text is read whole).
func (f *Flusher) primaryCount(ctx context.Context, run *flushRun, wing, suffix string) (int, error) {
	if c := run.counts[wing]; c != nil {
		return c[suffix], nil
	}
	counts, cut := map[string]int{}, []string{}
	err := f.eachEntry(ctx, map[string]any{"wing": wing, "room": "diary", "limit": 100}, func(id, _, _ string, row map[string]any) {
		if sfx, known, _ := catalogue.ListedEntrySuffix(row); known {
			counts[sfx]++
		} else {
			cut = append(cut, id)
		}
	})
	if err != nil {
		return 0, err
	}
	for _, id := range cut {
		text, err := f.entryText(ctx, id)
		if err != nil {
			return 0, err
		}
		counts[catalogue.EntrySuffix(text)]++
	}
	run.counts[wing] = counts
	return counts[suffix], nil
}

// entryText is the whole text of diary entry id on the primary.
func (f *Flusher) entryText(ctx context.Context, id string) (string, error) {
	b, err := json.Marshal(map[string]any{"drawer_id": id})
	if err != nil {
		return "", err
	}
	got, err := f.P.Call(ctx, "mempalace_get_drawer", b)
	if err == nil && got["error"] != nil {
		err = fmt.Errorf("%v", got["error"])
	}
	if err != nil {
		return "", fmt.Errorf("%w: mempalace_get_drawer %s: %w", ErrLookup, id, err)
	}
	return str(got, "content"), nil
}

// eachEntry pages list_drawers with filter and calls fn for every diary
// entry id in it, with its row.
func (f *Flusher) eachEntry(ctx context.Context, filter map[string]any, fn func(id, stamp, suffix string, row map[string]any)) error {
	for offset := 0; ; {
		filter["offset"] = offset
		res, rows, err := f.lookUp(ctx, "mempalace_list_drawers", filter, "drawers")
		if err != nil {
			return err
		}
		for _, x := range rows {
			row, _ := x.(map[string]any)
			id := str(row, "drawer_id")
			if stamp, sfx, ok := catalogue.DiaryEntryID(id); ok {
				fn(id, stamp, sfx, row)
			}
		}
		offset += len(rows)
		total, _ := strictjson.Float(res["total"])
		if len(rows) == 0 || float64(offset) >= total {
			return nil
		}
	}
}

// answer is the entry as a checkpoint's answer carries its diary
// (landedCopy reads its timestamp).
func (e entryOnPrimary) answer() map[string]any {
	m := map[string]any{"entry_id": e.ID}
	if e.FiledAt != "" {
		m["timestamp"] = e.FiledAt
	}
	return m
}

// PendingDiary is an op not done yet that writes a diary entry: its id,
// state, and the entry's wing and text (its id suffix, as the primary
// counts equal entries). BeforeCopy: it was queued before this outbox was
// copied (Copied.QueuedBefore), so the original machine sends it; such an
// op is listed done too when it was not sent from here (dropped).
type PendingDiary struct {
	ID, Wing, Suffix string
	State            State
	BeforeCopy       bool
}

// Short is the op id as tables print it.
func (p PendingDiary) Short() string { return Op{ID: p.ID}.Short() }

// PendingDiaries lists, read only, the ops of the outbox file at path
// that write a diary entry (a diary_write, a checkpoint's diary) and are
// not done: queued, in flight, an intent, held, dead or in doubt; in an
// outbox recorded as a copy, also the ops queued before the copy that
// were settled unsent (dropped: the original sends them). The edge sends
// them, the original does, or an operator settles them; a join that sent
// their entries from the local palace too would file each twice, since
// the edge's first send of one looks nothing up. A missing file holds
// none; one read without its -wal (complete false) may miss some.
func PendingDiaries(ctx context.Context, path string) (ops []PendingDiary, complete bool, err error) {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, true, nil
	}
	complete, err = readFile(path, func(db *sql.DB) error {
		ops = nil
		c, err := copyRecord(ctx, db)
		if err != nil {
			return err
		}
		next := int64(0)
		if c != nil {
			next = c.Next
		}
		rows, err := queryAll(ctx, db, func(r rowScanner) (Op, error) {
			var o Op
			var payload string
			err := r.Scan(&o.LocalSeq, &o.ID, &o.Tool, &payload, &o.State)
			o.Payload = json.RawMessage(payload)
			return o, err
		}, `SELECT local_seq, op_id, tool_name, payload_json, state FROM ops
		    WHERE state <> 'done' OR (local_seq < ? AND error_json IS NOT NULL) ORDER BY local_seq`, next)
		for _, o := range rows {
			if d, _ := diaryOf(o); d != nil {
				before, _ := c.QueuedBefore(o)
				ops = append(ops, PendingDiary{ID: o.ID, State: o.State, BeforeCopy: before, Wing: catalogue.DiaryWingFor(d), Suffix: catalogue.EntrySuffix(catalogue.DiaryEntry(d))})
			}
		}
		return err
	})
	return ops, complete, err
}
