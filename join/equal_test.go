package join

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/joakimp/devbox-config/gateway"
)

// Issue 26, point 4, in join: a palace holding the same diary text twice
// (one standup each day) puts both on the primary, and a second join adds
// none. Before, join took two equal entries for one write and sent one,
// and --verify all passed.
func TestJoinSendsEveryEqualDiaryEntry(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	for range 2 {
		p.do(t, "diary_write", map[string]any{"agent_name": "opencode", "entry": "standup: nothing new"})
	}
	p.do(t, "diary_write", map[string]any{"agent_name": "opencode", "entry": "a one-off"})
	p.save(t)
	cfg := config(t, p, pr)
	rep := run(t, cfg, Options{Verify: All})
	if !rep.OK() {
		t.Fatalf("join: %+v", rep)
	}
	if n := pr.pl.Dump().CountContent("standup: nothing new"); n != 2 {
		t.Fatalf("the primary holds %d of the 2 equal entries (sent %v)", n, rep.Sent)
	}
	rep = run(t, cfg, Options{Verify: All})
	if !rep.OK() || rep.Sent[Diaries] != 0 || pr.pl.Dump().CountContent("standup: nothing new") != 2 {
		t.Fatalf("a second join: sent %v, the primary holds %d", rep.Sent, pr.pl.Dump().CountContent("standup: nothing new"))
	}
}

// attack30 f5: of three equal entries in the palace the primary already
// holds one (the device's edge replicated it): the join sends the two it
// lacks, and --verify all verifies each of the three against a copy of
// its own.
func TestJoinSendsTheEqualDiaryEntriesThePrimaryLacks(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	entry := map[string]any{"agent_name": "opencode", "entry": "standup: nothing new", "topic": "standup"}
	for range 3 {
		p.do(t, "diary_write", entry)
	}
	p.save(t)
	gwCall(t, pr.srv.URL(), testToken, "diary_write", entry)
	rep := run(t, config(t, p, pr), Options{Verify: All})
	if n := pr.pl.Dump().CountContent("standup: nothing new"); !rep.OK() || n != 3 || rep.Sent[Diaries] != 2 || rep.Skipped[Diaries] != 1 || rep.Verified != 3 {
		t.Fatalf("the primary holds %d of 3 equal entries; sent %v skipped %v verified %d; failed %+v mismatches %+v", n, rep.Sent, rep.Skipped, rep.Verified, rep.Failed, rep.Mismatches)
	}
}

// attack30 f4: one of three equal entries a join sent is deleted by an
// admin through the gateway (its trash holds it), and the join's state is
// lost: the next join counts it deleted on the primary, the two others
// skipped, and files none again.
func TestJoinCountsAnEqualDiaryEntryInTheTrashDeleted(t *testing.T) {
	t.Parallel()
	pr, url, tokens := frontGateway(t, []gateway.Device{
		{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"wing_*"}, Agents: []string{"opencode@desk"}},
		{ID: "ops-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true},
	})
	p := newPalace(t)
	for range 3 {
		p.do(t, "diary_write", map[string]any{"agent_name": "opencode", "entry": "standup: nothing new", "topic": "standup"})
	}
	p.save(t)
	c := config(t, p, pr)
	c.URL, c.Token = url, func() string { return tokens["desk-9b21"] }
	if rep := run(t, c, Options{}); !rep.OK() || rep.Sent[Diaries] != 3 {
		t.Fatalf("join: sent %v, failed %+v", rep.Sent, rep.Failed)
	}
	var first string
	for _, d := range pr.pl.Dump().Drawers {
		if d.Content == "standup: nothing new" && (first == "" || d.ID < first) {
			first = d.ID
		}
	}
	if res := gwCall(t, url, tokens["ops-0001"], "delete_drawer", map[string]any{"drawer_id": first}); res["success"] != true {
		t.Fatalf("the admin's delete: %v", res)
	}
	if err := os.RemoveAll(filepath.Join(p.dir, "edge")); err != nil {
		t.Fatal(err)
	}
	rep := run(t, c, Options{Verify: All})
	if n := pr.pl.Dump().CountContent("standup: nothing new"); !rep.OK() || n != 2 || rep.DeletedOnPrimary[Diaries] != 1 || rep.Skipped[Diaries] != 2 || rep.Sent[Diaries] != 0 {
		t.Fatalf("a join after the delete: the primary holds %d; sent %v skipped %v deleted %v; failed %+v mismatches %+v", n, rep.Sent, rep.Skipped, rep.DeletedOnPrimary, rep.Failed, rep.Mismatches)
	}
}

// attack33 g2: four equal entries in the palace; the primary held some of
// them and an admin deleted k through the gateway (its trash holds k).
// The k in the trash account for k of the local copies (deleted), the
// copies still there for as many, and the rest are sent: one delete of
// one entry is not a delete of every equal entry. It counted every
// missing copy deleted ("deleted 3", the primary kept 1 of 4).
func TestJoinCountsOnlyAsManyEqualDiaryEntriesDeletedAsTheTrashHolds(t *testing.T) {
	t.Parallel()
	const text = "standup: same"
	for _, c := range []struct{ held, deleted int }{{2, 1}, {1, 1}, {3, 2}} {
		t.Run(fmt.Sprintf("held %d deleted %d", c.held, c.deleted), func(t *testing.T) {
			pr, url, tokens := frontGateway(t, []gateway.Device{
				{ID: "desk-9b21", Label: "desk", Read: []string{"*"}, Write: []string{"wing_*"}, Agents: []string{"opencode@desk"}},
				{ID: "ops-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true},
			})
			entry := map[string]any{"agent_name": "opencode", "entry": text, "topic": "standup"}
			p := newPalace(t)
			for range 4 {
				p.do(t, "diary_write", entry)
			}
			p.save(t)
			var ids []string
			for range c.held {
				ids = append(ids, gwCall(t, url, tokens["desk-9b21"], "diary_write", entry)["entry_id"].(string))
			}
			for _, id := range ids[:c.deleted] {
				if res := gwCall(t, url, tokens["ops-0001"], "delete_drawer", map[string]any{"drawer_id": id}); res["success"] != true {
					t.Fatalf("the admin's delete: %v", res)
				}
			}
			cfg := config(t, p, pr)
			cfg.URL, cfg.Token = url, func() string { return tokens["desk-9b21"] }
			rep := run(t, cfg, Options{Verify: All})
			live := c.held - c.deleted
			if n := pr.pl.Dump().CountContent(text); !rep.OK() || n != 4-c.deleted || rep.DeletedOnPrimary[Diaries] != c.deleted || rep.Skipped[Diaries] != live || rep.Sent[Diaries] != 4-c.held {
				t.Fatalf("the primary holds %d of 4; sent %v skipped %v deleted %v; failed %+v mismatches %+v", n, rep.Sent, rep.Skipped, rep.DeletedOnPrimary, rep.Failed, rep.Mismatches)
			}
			rep = run(t, cfg, Options{Verify: All})
			if n := pr.pl.Dump().CountContent(text); !rep.OK() || n != 4-c.deleted || rep.Skipped[Diaries] != 4-c.deleted || rep.DeletedOnPrimary[Diaries] != c.deleted || rep.Sent[Diaries] != 0 {
				t.Fatalf("a second join: the primary holds %d of 4; sent %v skipped %v deleted %v; failed %+v mismatches %+v", n, rep.Sent, rep.Skipped, rep.DeletedOnPrimary, rep.Failed, rep.Mismatches)
			}
			if err := os.RemoveAll(filepath.Join(p.dir, "edge")); err != nil {
				t.Fatal(err)
			}
			rep = run(t, cfg, Options{Verify: All})
			if n := pr.pl.Dump().CountContent(text); !rep.OK() || n != 4-c.deleted || rep.DeletedOnPrimary[Diaries] != c.deleted || rep.Sent[Diaries] != 0 {
				t.Fatalf("a join after its state is lost: the primary holds %d of 4; sent %v skipped %v deleted %v; failed %+v", n, rep.Sent, rep.Skipped, rep.DeletedOnPrimary, rep.Failed)
			}
		})
	}
}

// Two entries of one text under two topics (a standup and a retro that
// both said "nothing new") are two equal entries to the primary, which
// counts an entry by its wing and text: the join sends both. It numbered
// them by topic, each the first of its kind, sent one and counted the
// other skipped as already there; only --verify all named it missing.
func TestJoinSendsEqualDiaryEntriesOfTwoTopics(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	for _, topic := range []string{"standup", "retro"} {
		p.do(t, "diary_write", map[string]any{"agent_name": "opencode", "entry": "nothing new", "topic": topic})
	}
	p.save(t)
	cfg := config(t, p, pr)
	rep := run(t, cfg, Options{})
	if n := pr.pl.Dump().CountContent("nothing new"); !rep.OK() || n != 2 || rep.Sent[Diaries] != 2 {
		t.Fatalf("the primary holds %d of 2; sent %v skipped %v; failed %+v", n, rep.Sent, rep.Skipped, rep.Failed)
	}
	rep = run(t, cfg, Options{Verify: All})
	if n := pr.pl.Dump().CountContent("nothing new"); !rep.OK() || n != 2 || rep.Sent[Diaries] != 0 || rep.Skipped[Diaries] != 2 || rep.Verified != 2 {
		t.Fatalf("a second join: the primary holds %d; sent %v skipped %v verified %d; mismatches %+v", n, rep.Sent, rep.Skipped, rep.Verified, rep.Mismatches)
	}
}

// attack99 F9: diary entries edited with update_drawer (one longer than a
// list_drawers preview), on the primary already with the same edits (the
// edge replicated them), are not sent again; a third entry written with
// one edited text is (equal entries are each a write), and a second join
// sends nothing. Before, the primary's entries were counted by their ids'
// suffix, the hash of the text they were filed with, and each edited
// entry was sent a second time.
func TestJoinSendsNoEditedDiaryEntryThePrimaryHolds(t *testing.T) {
	t.Parallel()
	p, pr := newPalace(t), newPrimary(t)
	short, lng := "entry EDITED offline", "online entry EDITED: "+long("the rest of the edit", 300)
	edit := func(do func(tool string, args map[string]any) map[string]any, text, edited string) {
		w := do("diary_write", map[string]any{"agent_name": "opencode", "entry": text})
		do("update_drawer", map[string]any{"drawer_id": w["entry_id"], "content": edited})
	}
	local := func(tool string, args map[string]any) map[string]any { return p.do(t, tool, args) }
	onPrimary := func(tool string, args map[string]any) map[string]any {
		return gwCall(t, pr.srv.URL(), testToken, tool, args)
	}
	edit(local, "entry to edit offline", short)
	edit(local, "online entry to edit", lng)
	local("diary_write", map[string]any{"agent_name": "opencode", "entry": short})
	p.save(t)
	edit(onPrimary, "entry to edit offline", short)
	edit(onPrimary, "online entry to edit", lng)
	cfg := config(t, p, pr)
	for i, want := range []int{1, 0} {
		rep := run(t, cfg, Options{Verify: All})
		if d := pr.pl.Dump(); !rep.OK() || rep.Sent[Diaries] != want || d.CountContent(short) != 2 || d.CountContent(lng) != 1 {
			t.Fatalf("join %d: sent %v (want %d diaries); the primary holds the short edit %d times (want 2), the long one %d (want 1); failed %+v mismatches %+v",
				i+1, rep.Sent, want, d.CountContent(short), d.CountContent(lng), rep.Failed, rep.Mismatches)
		}
	}
}
