package gateway

import (
	"context"
	"strings"
	"testing"
)

// Against real MemPalace 3.11.0: drawers an admin deleted through the
// gateway and laptop then filed again (the same ids: real ids come from
// wing, room and content; a chunked one too) read as laptop's to a
// device that trusts only the admin, in get_drawer and search, and still
// do after the admin's delete is restored over them; a drawer deleted and
// restored with nothing filed in between is the admin's again.
func TestRealRefiledAfterDeleteIsTheRefilers(t *testing.T) {
	u, _ := startReal(t)
	ds := trustingDevices(UntrustedMark)
	for i := range ds {
		ds[i].ReadRate, ds[i].WriteRate = 1e9, 1e9
	}
	g := newGWAt(t, ds, u)
	laptop, desk, admin := g.tokens["laptop-7f3a"], g.tokens["desk-9b21"], g.tokens["admin-0001"]
	texts := []string{"rotate the signing key with the admin's script", strings.Repeat("the admin's long note on rotating the signing key. ", 30)}
	var ids []any
	for _, c := range texts {
		ids = append(ids, must1(t, g, admin, "add_drawer", map[string]any{"wing": "shared", "room": "keys", "content": c})["drawer_id"])
	}
	if res := must1(t, g, admin, "delete_drawers", map[string]any{"drawer_ids": ids}); res["deleted"] != 2.0 {
		t.Fatalf("delete_drawers: %v", res)
	}
	for i, c := range texts {
		if again := must1(t, g, laptop, "add_drawer", map[string]any{"wing": "shared", "room": "keys", "content": c}); again["drawer_id"] != ids[i] || again["reason"] == "already_exists" {
			t.Fatalf("not a refile under %v: %v", ids[i], again)
		}
	}
	laptops := func(when string) {
		t.Helper()
		for _, id := range ids {
			if o := originOf(t, must1(t, g, desk, "get_drawer", map[string]any{"drawer_id": id})); o["device"] != "laptop-7f3a" || o["trusted"] != false {
				t.Errorf("%s: get_drawer %v: origin %v, want laptop-7f3a untrusted", when, id, o)
			}
		}
		hits, _ := must1(t, g, desk, "search", map[string]any{"query": "rotating the signing key", "wing": "shared"})["results"].([]any)
		if len(hits) == 0 {
			t.Errorf("%s: search found nothing", when)
		}
		for _, h := range hits {
			if o := originOf(t, h); o["device"] != "laptop-7f3a" || o["trusted"] != false {
				t.Errorf("%s: search hit origin %v, want laptop-7f3a untrusted", when, o)
			}
		}
	}
	laptops("after the refile")
	rs, err := g.restorer(t).Restore(context.Background(), []string{ids[0].(string), ids[1].(string)})
	if err != nil || len(rs) != 2 || rs[0].Err != nil || rs[1].Err != nil || !rs[0].Already || !rs[1].Already {
		t.Fatalf("restore over the refiles: %+v %v", rs, err)
	}
	laptops("after the restore")

	id := must1(t, g, admin, "add_drawer", map[string]any{"wing": "shared", "room": "keys", "content": "the admin's runbook"})["drawer_id"]
	must1(t, g, admin, "delete_drawer", map[string]any{"drawer_id": id})
	if rs, err := g.restorer(t).Restore(context.Background(), []string{id.(string)}); err != nil || len(rs) != 1 || rs[0].Err != nil || rs[0].Already {
		t.Fatalf("restore: %+v %v", rs, err)
	}
	if o := originOf(t, must1(t, g, desk, "get_drawer", map[string]any{"drawer_id": id})); o["device"] != "admin-0001" || o["trusted"] != true {
		t.Errorf("the restored drawer's origin %v, want admin-0001 trusted", o)
	}
}
