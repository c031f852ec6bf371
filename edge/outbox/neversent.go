package outbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/sqlitewal"
)

// A diary entry's copy on the primary is named by the write that carried
// it (EntryCopies); where no write of this outbox's names one, a merged
// read pairs the entry with the primary's by wing and text, which is
// right only if a write of it may have reached the primary (a join's, an
// older outbox's). NeverSent tells the entries none can have: written
// with the outbox bypassed (a solitary session on this palace, a full
// disk, a wing the policy keeps local) since the outbox began noting its
// entries' writes and since its last prune, and matched by no op of it.
// Such an entry pairs with nothing (attack99 F5), unless a join sent it:
// its done write in a join outbox beside this one names its copy
// (attack102 F2).

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

// NeverSent is, of entries, those no write of this outbox may have
// carried to the primary: written after both metaEntriesSince and
// metaPrunedBefore, with no write noted for their stamp, and no op noted
// for no entry (an intent given up before the local palace answered)
// writing their wing and text. Each maps to its copy: none (never sent),
// or the one a join sent (joinCopies) when a join outbox beside this one
// holds a done write of the entry's wing and text, the only one for the
// only such entry. An entry a join sent whose copy cannot be told (two
// equal ones, a join outbox that cannot be read) is left out: it pairs by
// text. Nil when the outbox cannot tell (no metaEntriesSince: an older
// build's, read only).
func (s *Store) NeverSent(ctx context.Context, entries []LocalEntry) (map[string]EntryCopy, error) {
	cand, err := s.unnoted(ctx, entries)
	if err != nil || len(cand) == 0 {
		return nil, err
	}
	byText := map[string][]string{} // wing and suffix: the stamps
	for _, en := range cand {
		k := entryText(en.Wing, en.Suffix)
		byText[k] = append(byText[k], en.Stamp)
	}
	joined, err := s.joinCopies(ctx, cand[0].Written, byText)
	out := map[string]EntryCopy{}
	for k, stamps := range byText {
		switch cs, sent := joined[k]; {
		case err != nil || sent && (len(cs) != 1 || len(stamps) != 1):
			// which copy is whose cannot be told: by text
		case sent:
			out[stamps[0]] = cs[0]
		default:
			for _, st := range stamps {
				out[st] = EntryCopy{}
			}
		}
	}
	return out, err
}

// entryText is a diary entry's wing and text, as NeverSent matches them.
func entryText(wing, suffix string) string {
	return catalogue.SanitizedName(wing) + "\x00" + suffix
}

// unnoted is those of entries written since the outbox knows its
// entries' writes (entriesKnownSince) with none noted, nor written by an
// op noted for no entry, oldest first.
func (s *Store) unnoted(ctx context.Context, entries []LocalEntry) ([]LocalEntry, error) {
	since, err := s.entriesKnownSince(ctx)
	if err != nil || since.IsZero() || len(entries) == 0 {
		return nil, err
	}
	var cand []LocalEntry
	for _, en := range entries {
		if en.Written.After(since) && en.Stamp != "" {
			cand = append(cand, en)
		}
	}
	if len(cand) == 0 {
		return nil, nil
	}
	slices.SortFunc(cand, func(a, b LocalEntry) int { return a.Written.Compare(b.Written) })
	noted, err := s.notedStamps(ctx, cand)
	if err != nil {
		return nil, fmt.Errorf("outbox: the diary entries' writes: %w", err)
	}
	ops, err := queryAll(ctx, s.db, scanOp, `SELECT `+opCols+` FROM ops WHERE created_at >= ? AND op_id NOT IN (SELECT value FROM meta WHERE key GLOB 'entry:*')`,
		cand[0].Written.Add(-entryLead).UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("outbox: the diary entries' writes: %w", err)
	}
	carried := map[string]bool{} // wing and suffix of the entries the unnoted ops write
	for _, o := range ops {
		if d, _ := diaryOf(o); d != nil {
			carried[entryText(catalogue.DiaryWingFor(d), catalogue.EntrySuffix(catalogue.DiaryEntry(d)))] = true
		}
	}
	return slices.DeleteFunc(cand, func(en LocalEntry) bool { return carried[entryText(en.Wing, en.Suffix)] || noted[en.Stamp] }), nil
}

// JoinOutboxes is the join outboxes' file names beside this one
// (join.OutboxFile: join-outbox-<target hash>.sqlite, a store of this
// package's).
const JoinOutboxes = "join-outbox-*.sqlite"

// joinCopies is, for the wings and texts of want, the copies the diary
// writes of the join outboxes beside this one that landed since (done,
// the primary's answer naming the entry) filed on the primary.
func (s *Store) joinCopies(ctx context.Context, since time.Time, want map[string][]string) (map[string][]EntryCopy, error) {
	files, err := filepath.Glob(filepath.Join(filepath.Dir(s.path), JoinOutboxes))
	if err != nil || len(files) == 0 || len(want) == 0 {
		return nil, err // a bad pattern: none here
	}
	out := map[string][]EntryCopy{}
	for _, f := range files {
		ls, err := s.joinLanded(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, l := range ls {
			if want[l.key] != nil && !l.at.Before(since) {
				out[l.key] = append(out[l.key], l.copy)
			}
		}
	}
	return out, nil
}

// landed is a join's diary write that landed: the wing and text it
// wrote (entryText), when, and the copy the primary answered it with.
type landed struct {
	key  string
	at   time.Time
	copy EntryCopy
}

// joinRead is a join outbox's landed diary writes, read when its file
// and -wal had stamp (fileStamp).
type joinRead struct {
	stamp  string
	landed []landed
}

// joinLanded is the join outbox f's landed diary writes: read once (read
// only, one query reading each write's wing, text and answered entry)
// and again only when the file or its -wal changed, so a merged read
// holding an unnoted entry costs a stat per join outbox, not a read.
func (s *Store) joinLanded(ctx context.Context, f string) ([]landed, error) {
	stamp := fileStamp(f)
	s.mu.Lock()
	r, ok := s.joins[f]
	s.mu.Unlock()
	if ok && r.stamp == stamp {
		return r.landed, nil
	}
	db, err := sqlitewal.OpenReadOnly(f)
	if err != nil {
		return nil, fmt.Errorf("outbox: join outbox %s: %w", f, err)
	}
	defer db.Close() // read only
	ls, err := queryAll(ctx, db, func(r rowScanner) (landed, error) {
		var l landed
		var wing, entry string
		var at int64
		err := r.Scan(&wing, &entry, &at, &l.copy.ID, &l.copy.Timestamp)
		l.key, l.at = entryText(wing, catalogue.EntrySuffix(entry)), time.UnixMilli(at)
		return l, err
	}, `SELECT wing, coalesce(nullif(json_extract(payload_json, '$.entry'), ''), json_extract(payload_json, '$.content'), ''), flushed_at,
		json_extract(result_json, '$.entry_id'), coalesce(json_extract(result_json, '$.timestamp'), '')
		FROM ops WHERE state='done' AND tool_name=? AND coalesce(json_extract(result_json, '$.entry_id'), '') <> ''`, catalogue.Prefix+"diary_write")
	if err != nil {
		return nil, fmt.Errorf("outbox: join outbox %s: %w", f, err)
	}
	s.mu.Lock()
	if s.joins == nil {
		s.joins = map[string]joinRead{}
	}
	s.joins[f] = joinRead{stamp, ls}
	s.mu.Unlock()
	return ls, nil
}

// fileStamp is the size and modification time of the file at path and
// of its -wal ("" for neither).
func fileStamp(path string) string {
	var b strings.Builder
	for _, p := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			fmt.Fprintf(&b, "%d/%d;", fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return b.String()
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
