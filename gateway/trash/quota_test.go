package trash

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway/provenance"
)

// attack69 F4: a device rewriting its own drawers filled the trash with
// its own old texts for 30 days. What the trash keeps of a device's own
// text is bounded (OwnQuota), its oldest dropped first, each drop logged;
// another device's text it replaced, text of unknown origin, a purged
// drawer (its mark refuses a replay) and one a restore holds stay, and so
// does what the device deleted in the last hour, however large its newest
// delete (review 24 D3, O3).
func TestOwnTextIsKeptUnderAQuota(t *testing.T) {
	ctx := context.Background()
	var log bytes.Buffer
	s, err := Open(filepath.Join(t.TempDir(), "trash.sqlite"), 0, slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s.Now = func() time.Time { return now }
	s.OwnQuota = 3 * 1000
	by := func(dev string) *provenance.Stamp { return &provenance.Stamp{Device: dev} }
	keep := func(dev, content string, origin *provenance.Stamp) int64 {
		t.Helper()
		dr := Drawer{ID: "drawer_" + content[:8], Wing: "wing_ci", Room: "r", Content: content, Metadata: json.RawMessage(`{}`), Origin: origin}
		id, err := s.Keep(ctx, Delete{Device: dev, Tool: "update_drawer", Drawers: []Drawer{dr}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Settle(ctx, id, StateDeleted, "", nil); err != nil {
			t.Fatal(err)
		}
		return id
	}
	text := func(tag string) string { return tag + strings.Repeat(".", 990) } // 1,000 bytes with its metadata
	desks := keep("ci", text("desk0001"), by("desk"))                         // desk's text ci replaced
	unknown := keep("ci", text("unknown1"), nil)                              // text of unknown origin
	deskOwn := keep("desk", text("deskown1"), by("desk"))                     // another device's own
	purged := keep("ci", text("ciprg001"), by("ci"))
	if _, _, err := s.Purge(ctx, strconv.FormatInt(purged, 10)); err != nil {
		t.Fatal(err)
	}
	restoring := keep("ci", text("cirst001"), by("ci"))
	if _, err := s.Claim(ctx, restoring, "drawer_cirst001", ""); err != nil {
		t.Fatal(err)
	}
	var own []int64
	for i, tag := range []string{"ciown001", "ciown002", "ciown003", "ciown004", "ciown005"} {
		if i == 2 {
			now = now.Add(2 * time.Hour) // the first two are past the floor
		}
		own = append(own, keep("ci", text(tag), by("ci")))
	}
	now = now.Add(time.Minute)
	own = append(own, keep("ci", "ciown006"+strings.Repeat(".", 4990), by("ci"))) // over the quota alone
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, d := range list {
		ids = append(ids, d.ID)
	}
	for _, id := range append([]int64{desks, unknown, deskOwn, purged, restoring}, own[2:]...) {
		if !slices.Contains(ids, id) {
			t.Errorf("delete %d dropped; the trash holds %v", id, ids)
		}
	}
	for _, id := range own[:2] {
		if slices.Contains(ids, id) {
			t.Errorf("ci's own old text, delete %d, kept over the quota of three: %v", id, ids)
		}
	}
	for _, id := range own[:2] {
		want := fmt.Sprintf("device=ci deletes=1 bytes=1000 ids=[%d]", id)
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, log.String())
		}
	}
}

// A Keep of a device's own text, under the primary's write slot, reads
// none of the text the trash keeps to count that device's quota (review
// 24 D2: it read every byte the device had in the trash, others' text
// included, ~0.8 ms a MB).
func TestAnOwnKeepReadsNoKeptText(t *testing.T) {
	if _, err := os.ReadFile("/proc/self/io"); err != nil {
		t.Skip("counts the bytes read in /proc/self/io (Linux):", err)
	}
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "trash.sqlite"), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	body := strings.Repeat("x", 100_000)
	keep := func(origin string, n int) {
		t.Helper()
		var drs []Drawer
		for i := range n {
			drs = append(drs, Drawer{ID: fmt.Sprintf("drawer_%s_%d", origin, i), Content: body, Metadata: json.RawMessage(`{}`), Origin: &provenance.Stamp{Device: origin}})
		}
		id, err := s.Keep(ctx, Delete{Device: "ci", Tool: "delete_drawers", Drawers: drs})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Settle(ctx, id, StateDeleted, "", nil); err != nil {
			t.Fatal(err)
		}
	}
	keep("desk", 200) // 20 MB of desk's text ci deleted
	keep("ci", 100)   // 10 MB of ci's own, under its quota
	if err := s.truncateWAL(ctx); err != nil {
		t.Fatal(err)
	}
	before := readBytes(t)
	keep("ci", 1)
	n := readBytes(t) - before
	t.Logf("read %d bytes", n)
	if n > 1<<20 {
		t.Errorf("a Keep of 100 KB of ci's own text read %d bytes; the trash holds 30 MB of ci's deletes", n)
	}
}

// readBytes is how many bytes the process has read (rchar).
func readBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "rchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no rchar in /proc/self/io: %s", b)
	return 0
}

// A trash kept before it recorded the size of a delete's own text counts
// what its deletes kept of their device's own text, once, when migrated:
// the quota drops the oldest of them, and never another device's.
func TestOldOwnTextCountsForTheQuota(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "trash.sqlite")
	s, err := Open(file, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s.Now = func() time.Time { return now.Add(-2 * time.Hour) }
	var old []int64
	for _, origin := range []string{"ci", "desk", "ci"} {
		dr := Drawer{ID: "drawer_" + origin, Content: strings.Repeat("x", 998), Metadata: json.RawMessage(`{}`), Origin: &provenance.Stamp{Device: origin}}
		id, err := s.Keep(ctx, Delete{Device: "ci", Tool: "update_drawer", Drawers: []Drawer{dr}})
		if err == nil {
			err = s.Settle(ctx, id, StateDeleted, "", nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		old = append(old, id)
	}
	for _, q := range []string{`DROP INDEX deletes_own`, `ALTER TABLE deletes DROP COLUMN own_bytes`, `PRAGMA user_version = 1`} {
		if _, err := s.db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if s, err = Open(file, 0, nil); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.OwnQuota = 2 * 1000
	dr := Drawer{ID: "drawer_new", Content: strings.Repeat("x", 998), Metadata: json.RawMessage(`{}`), Origin: &provenance.Stamp{Device: "ci"}}
	if _, err := s.Keep(ctx, Delete{Device: "ci", Tool: "update_drawer", Drawers: []Drawer{dr}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, old[0]); err == nil {
		t.Errorf("ci's oldest own text, delete %d, kept over the quota of two", old[0])
	}
	for _, id := range old[1:] {
		if _, err := s.Get(ctx, id); err != nil {
			t.Errorf("delete %d: %v", id, err)
		}
	}
}
