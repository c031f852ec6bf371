package provenance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	t0     = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	laptop = Stamp{Device: "laptop-7f3a", Label: "laptop", Agent: "opencode", At: t0}
	desk   = Stamp{Device: "desk-9b21", Label: "desk", Agent: "pi", At: t0.Add(time.Minute)}
)

// A stamp is found by the key a read gives, survives a reopen, is the
// first writer's unless the content was rewritten, and the file is the
// owner's alone.
func TestRecordLookupReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "audit", FileName)
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	entries := []Entry{
		{Key: Drawer("drawer_shared_notes_1"), Stamp: laptop},
		{Key: Event("evt_1"), Stamp: laptop},
		{Key: Fact(" Edge ", "Uses Store", "Mac's SQLite", "", ""), Stamp: laptop},
		{Key: Diary("OpenCode", "2026-11-30T12:00:00.000001", "shipped it"), Stamp: laptop},
	}
	if err := s.Record(ctx, entries...); err != nil {
		t.Fatal(err)
	}
	// desk files the same drawer again, then rewrites the event's content.
	if err := s.Record(ctx, Entry{Key: Drawer("drawer_shared_notes_1"), Stamp: desk}, Entry{Key: Event("evt_1"), Stamp: desk, Replace: true}); err != nil {
		t.Fatal(err)
	}
	check := func(s *Store) {
		t.Helper()
		for _, c := range []struct {
			k    Key
			want Stamp
		}{
			{Drawer("drawer_shared_notes_1"), laptop},
			{Event("evt_1"), desk},
			{Fact("edge", "uses_store", "macs_sqlite", "", ""), laptop}, // as kg_query reads it back
			{Diary("opencode", "2026-11-30T12:00:00.000001", "shipped it"), laptop},
		} {
			got, ok := s.Lookup(c.k)
			if !ok || got != c.want {
				t.Errorf("%v: %+v %v, want %+v", c.k, got, ok, c.want)
			}
		}
		for _, k := range []Key{Drawer("drawer_other"), Fact("edge", "uses_store", "macs_sqlite", "2026-01-01", ""), Diary("opencode", "2026-11-30T12:00:00.000001", "shipped it!")} {
			if got, ok := s.Lookup(k); ok {
				t.Errorf("%v: found %+v", k, got)
			}
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s)
	if s.Len() != 4 {
		t.Errorf("%d records, want 4", s.Len())
	}
	for _, p := range []string{path, filepath.Dir(path)} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if mode := fi.Mode().Perm(); mode&0o077 != 0 {
			t.Errorf("%s: mode %o, want the owner's alone", p, mode)
		}
	}
}

// Keys differ whenever a part does, whatever the parts hold.
func TestKeysDoNotCollide(t *testing.T) {
	a := Key{KindFact, []string{"a|1:b", "c", "d", ""}}.mapKey()
	b := Key{KindFact, []string{"a", "b|1:c", "d", ""}}.mapKey()
	if a == b {
		t.Errorf("two facts share a key: %q", a)
	}
	if Drawer("x").mapKey() == Event("x").mapKey() {
		t.Error("a drawer and an event share a key")
	}
	if Fact("a", "b", "c", "2026-01-01T00:00:00+00:00", "").Parts[3] != "2026-01-01T00:00:00Z" {
		t.Error("valid_from is not normalized as MemPalace stores it")
	}
	// A fact closed and the same fact filed again are two facts, each with
	// its own writer; an open fact's key is as it was before closed facts
	// had keys of their own (rows the index already holds keep meaning it).
	open, closed := Fact("a", "b", "c", "", ""), Fact("a", "b", "c", "", "2026-01-02T00:00:00+00:00")
	if open.mapKey() == closed.mapKey() || open.Parts[3] != "" || closed.Parts[3] != "..2026-01-02T00:00:00Z" {
		t.Errorf("open fact %v, closed %v: want keys of their own, the open one's validity empty", open, closed)
	}
}

func TestNotADatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	os.WriteFile(path, []byte("not sqlite, long enough to be read as a header by SQLite's pager at all"), 0o600)
	if s, err := Open(path, nil); err == nil {
		s.Close()
		t.Fatal("a file that is not a database opened")
	}
}

// BenchmarkRecord is one write's stamp: one transaction, one row.
func BenchmarkRecord(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), FileName), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		if err := s.Record(ctx, Entry{Key: Drawer(fmt.Sprintf("drawer_shared_notes_%024d", i)), Stamp: laptop}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRefreshSeesAnotherWriter: what another process (a trash restore)
// records or forgets in the index shows in a running gateway's lookups
// after Refresh, and not before.
func TestRefreshSeesAnotherWriter(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), FileName)
	gw, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	restore, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer restore.Close()
	admin := Stamp{Device: "admin-0001", Label: "ops", At: time.Unix(10, 0)}
	desk := Stamp{Device: "desk-9b21", Label: "desk", At: time.Unix(5, 0)}
	a, b := Drawer("drawer_a"), Drawer("drawer_b")
	if err := gw.Record(ctx, Entry{Key: a, Stamp: admin}, Entry{Key: b, Stamp: admin}); err != nil {
		t.Fatal(err)
	}
	if err := restore.Refresh(); err != nil { // its own view was read before
		t.Fatal(err)
	}
	if err := restore.Record(ctx, Entry{Key: a, Stamp: desk, Replace: true}); err != nil {
		t.Fatal(err)
	}
	if err := restore.Forget(ctx, b); err != nil {
		t.Fatal(err)
	}
	if st, _ := gw.Lookup(a); st.Device != "admin-0001" {
		t.Fatalf("before Refresh: %v", st)
	}
	if err := gw.Refresh(); err != nil {
		t.Fatal(err)
	}
	if st, _ := gw.Lookup(a); st.Device != "desk-9b21" {
		t.Errorf("after Refresh, a: %v, want desk's", st)
	}
	if st, known := gw.Lookup(b); known {
		t.Errorf("after Refresh, b: %v, want unknown", st)
	}
	if err := gw.Record(ctx, Entry{Key: Drawer("drawer_c"), Stamp: admin}); err != nil {
		t.Fatal(err)
	}
	if err := gw.Refresh(); err != nil { // its own commit: nothing to read
		t.Fatal(err)
	}
	if gw.Len() != 2 {
		t.Errorf("after its own write and Refresh: %d records, want 2", gw.Len())
	}
}

// TestFreshSeesAnotherWriterAtOnce: Fresh, the gateway's look before each
// answer's records, sees each commit of another process (two restores in
// a row) without the poll's Refresh.
func TestFreshSeesAnotherWriterAtOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), FileName)
	gw, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	restore, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer restore.Close()
	a := Drawer("drawer_a")
	if err := gw.Record(ctx, Entry{Key: a, Stamp: Stamp{Device: "admin-0001", At: time.Unix(10, 0)}}); err != nil {
		t.Fatal(err)
	}
	if err := gw.Fresh(); err != nil { // its own commit
		t.Fatal(err)
	}
	for _, who := range []string{"desk-9b21", "laptop-7f3a"} {
		if err := restore.Record(ctx, Entry{Key: a, Stamp: Stamp{Device: who, At: time.Unix(5, 0)}, Replace: true}); err != nil {
			t.Fatal(err)
		}
		if err := gw.Fresh(); err != nil {
			t.Fatal(err)
		}
		if st, _ := gw.Lookup(a); st.Device != who {
			t.Errorf("after another process recorded %s's stamp and Fresh: %v", who, st)
		}
	}
}

// BenchmarkFresh is what the gateway adds to each answer that carries
// records when nothing else wrote the index: one stat of its log.
func BenchmarkFresh(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), FileName), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Record(context.Background(), Entry{Key: Drawer("d"), Stamp: Stamp{Device: "a", At: time.Unix(1, 0)}}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := s.Fresh(); err != nil {
			b.Fatal(err)
		}
	}
}

// A diary entry written as agent "ΟΔΟΣ" is listed by MemPalace under
// "οδος" (Python's lower(): a final sigma), and the stamp made at the
// write must be found by that listing: before, Go's lower-casing keyed it
// "οδοσ" and the entry read back of unknown origin.
func TestDiaryKeyLowersAsMemPalace(t *testing.T) {
	for _, c := range [][2]string{{"ΟΔΟΣ", "οδος"}, {"İx", "i̇x"}, {" Pi ", "pi"}} {
		if a, b := Diary(c[0], "2026-12-04T10:00:00", "t"), Diary(c[1], "2026-12-04T10:00:00", "t"); !reflect.DeepEqual(a, b) {
			t.Errorf("Diary(%q) = %v, Diary(%q) = %v: want the same key", c[0], a, c[1], b)
		}
	}
}

// PredicateWrittenBy tells a predicate by who wrote its facts, as the
// index holds them after a record, a rewrite, a forget and a reopen: a
// predicate only desk wrote is not laptop's once laptop's fact with it
// is forgotten, and one no stamped fact has is no one's.
func TestPredicateWrittenBy(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), FileName)
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	joined := laptop
	joined.Via = "admin-0001"
	shared, lap := Fact("a", "Uses Branch", "b", "", ""), Fact("c", "uses branch", "d", "", "")
	if err := s.Record(ctx, Entry{Key: shared, Stamp: desk}, Entry{Key: lap, Stamp: laptop}, Entry{Key: Fact("e", "joined as", "f", "", ""), Stamp: joined}); err != nil {
		t.Fatal(err)
	}
	by := func(s *Store, pred, device, via string) bool {
		return s.PredicateWrittenBy(pred, func(d, v string) bool { return d == device && v == via })
	}
	if !by(s, "uses_branch", "desk-9b21", "") || !by(s, "uses_branch", "laptop-7f3a", "") || !by(s, "joined_as", "laptop-7f3a", "admin-0001") || by(s, "joined_as", "laptop-7f3a", "") {
		t.Errorf("after the records: uses_branch and joined_as not told by their writers")
	}
	if err := s.Record(ctx, Entry{Key: lap, Stamp: desk, Replace: true}); err != nil {
		t.Fatal(err)
	}
	if by(s, "uses_branch", "laptop-7f3a", "") {
		t.Errorf("laptop's only uses_branch fact rewritten by desk: still laptop's")
	}
	if err := s.Forget(ctx, shared, lap); err != nil {
		t.Fatal(err)
	}
	if s.PredicateWrittenBy("uses_branch", func(string, string) bool { return true }) {
		t.Errorf("every uses_branch fact forgotten: still someone's")
	}
	s2, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if !by(s2, "joined_as", "laptop-7f3a", "admin-0001") || s2.PredicateWrittenBy("uses_branch", func(string, string) bool { return true }) {
		t.Errorf("reopened: predicates not as the index holds them")
	}
}
