package outbox

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
)

// A diary entry's copy on the primary is named by the write that carried
// it (EntryCopies); where no write of this outbox's names one, a merged
// read pairs the entry with the primary's by wing and text, which is
// right only if a write of it may have reached the primary (a join's, an
// older outbox's). NeverSent tells the entries none can have: written
// with the outbox bypassed (a solitary session on this palace, a full
// disk, a wing the policy keeps local) since the outbox began noting its
// entries' writes and since its last prune, and matched by no op of it.
// Such an entry pairs with nothing (attack99 F5).

// metaEntriesSince is when this outbox began noting the diary entries its
// writes carry (Unix ms, set at its first writing open by a build that
// notes them all): an entry written since with none noted was not queued
// here.
const metaEntriesSince = "entries_noted_since"

// metaPrunedBefore is the cutoff of the latest prune that deleted ops
// (Unix ms): a join's op for an entry written before it may be gone.
const metaPrunedBefore = "pruned_before"

// noteEntriesSince records metaEntriesSince if it is not there (read
// first: an open takes no write lock it does not need).
func (s *Store) noteEntriesSince(ctx context.Context) error {
	if v, err := querierMeta(ctx, s.db, metaEntriesSince); err != nil || v != "" {
		return err
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO NOTHING`, metaEntriesSince, strconv.FormatInt(s.now().UnixMilli(), 10))
	return err
}

// LocalEntry is a diary entry of the local palace, as a merged read has
// it: its id's stamp (EntryCopies' key), its wing, the hash suffix of
// its text (catalogue.EntrySuffix) and when it was written (this
// machine's clock).
type LocalEntry struct {
	Stamp, Wing, Suffix string
	Written             time.Time
}

// NeverSent is the stamps of those of entries no write of this outbox
// may have carried to the primary: written after both metaEntriesSince
// and metaPrunedBefore, with no write noted for their stamp, and no op
// noted for no entry (a join's; an intent given up before the local
// palace answered) writing their wing and text. Nil when the outbox
// cannot tell (no metaEntriesSince: an older build's, read only).
func (s *Store) NeverSent(ctx context.Context, entries []LocalEntry) (map[string]bool, error) {
	since, err := s.entriesKnownSince(ctx)
	if err != nil || since.IsZero() || len(entries) == 0 {
		return nil, err
	}
	var cand []LocalEntry
	oldest := time.Time{}
	for _, en := range entries {
		if en.Written.After(since) && en.Stamp != "" {
			cand = append(cand, en)
			if oldest.IsZero() || en.Written.Before(oldest) {
				oldest = en.Written
			}
		}
	}
	if len(cand) == 0 {
		return nil, nil
	}
	noted, err := s.notedStamps(ctx, cand)
	if err != nil {
		return nil, fmt.Errorf("outbox: the diary entries' writes: %w", err)
	}
	ops, err := queryAll(ctx, s.db, scanOp, `SELECT `+opCols+` FROM ops WHERE created_at >= ? AND op_id NOT IN (SELECT value FROM meta WHERE key GLOB 'entry:*')`,
		oldest.Add(-entryLead).UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("outbox: the diary entries' writes: %w", err)
	}
	carried := map[string]bool{} // wing and suffix of the entries the unnoted ops write
	for _, o := range ops {
		if d, _ := diaryOf(o); d != nil {
			carried[catalogue.SanitizedName(catalogue.DiaryWingFor(d))+"\x00"+catalogue.EntrySuffix(catalogue.DiaryEntry(d))] = true
		}
	}
	out := map[string]bool{}
	for _, en := range cand {
		if !carried[catalogue.SanitizedName(en.Wing)+"\x00"+en.Suffix] && !noted[en.Stamp] {
			out[en.Stamp] = true
		}
	}
	return out, nil
}

// notedStamps is the stamps of entries that have a write noted (entry:<id>).
func (s *Store) notedStamps(ctx context.Context, entries []LocalEntry) (map[string]bool, error) {
	const tail = len("20060102_150405000000_") + 12
	args := []any{tail, tail - 13, tail, tail - 13}
	for _, en := range entries {
		args = append(args, en.Stamp)
	}
	stamps, err := queryAll(ctx, s.db, func(r rowScanner) (string, error) { var st string; return st, r.Scan(&st) },
		`SELECT substr(key, -?, ?) FROM meta WHERE key GLOB 'entry:diary_*' AND substr(key, -?, ?) IN (`+marks(len(entries))+`)`, args...)
	out := make(map[string]bool, len(stamps))
	for _, st := range stamps {
		out[st] = true
	}
	return out, err
}

// entriesKnownSince is the later of metaEntriesSince and
// metaPrunedBefore (zero: no metaEntriesSince).
func (s *Store) entriesKnownSince(ctx context.Context) (time.Time, error) {
	var at [2]int64
	for i, k := range []string{metaEntriesSince, metaPrunedBefore} {
		v, err := querierMeta(ctx, s.db, k)
		if err != nil {
			return time.Time{}, fmt.Errorf("outbox: %w", err)
		}
		at[i], _ = strconv.ParseInt(v, 10, 64) // unset: 0
	}
	if at[0] == 0 {
		return time.Time{}, nil
	}
	return time.UnixMilli(max(at[0], at[1])), nil
}
