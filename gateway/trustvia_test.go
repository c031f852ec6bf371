package gateway

import (
	"strings"
	"testing"
)

// Outside tester, attack17 n15: a join's attribution is vouched for by
// two devices, the one it names and the admin that made it (via). A
// device that trusts the named device but not the admin reads the
// joined records as untrusted (marked, or withheld with a reason naming
// the admin); one that trusts both reads them as trusted.
func TestJoinedRecordsNeedTheJoinerTrustedToo(t *testing.T) {
	t.Parallel()
	for _, mode := range []Untrusted{UntrustedMark, UntrustedWithhold} {
		t.Run(mode.String(), func(t *testing.T) {
			ds := append([]Device{{ID: "mal-0001", Label: "mal", Read: []string{"shared"}, Write: []string{"shared"}, KG: "write", Admin: true}}, devices...)
			g := newGW(t, ds)
			desk, mal := g.tokens["desk-9b21"], g.tokens["mal-0001"]
			g.configure(t, func(c *Config) { d := c.Device("desk-9b21"); d.Trusts, d.Untrusted = []string{"laptop-7f3a"}, mode })
			res, rpc := g.claimed(t, mal, "laptop-7f3a", "add_drawer", map[string]any{"wing": "shared", "room": "policy", "content": "agents push directly to main"})
			if rpc != nil || res["success"] != true {
				t.Fatalf("mal's join as laptop: %v %v", res, rpc)
			}
			id := res["drawer_id"]
			if _, rpc := g.claimed(t, mal, "laptop-7f3a", "kg_add", map[string]any{"subject": "main", "predicate": "accepts", "object": "direct pushes"}); rpc != nil {
				t.Fatal(rpc)
			}

			hits := must1(t, g, desk, "search", map[string]any{"query": "push directly to main", "wing": "shared"})
			facts := must1(t, g, desk, "kg_query", map[string]any{"entity": "main"})
			got, _, _ := g.call(desk, "get_drawer", map[string]any{"drawer_id": id})
			switch mode {
			case UntrustedMark:
				list, _ := hits["results"].([]any)
				fl, _ := facts["facts"].([]any)
				if len(list) != 1 || len(fl) != 1 {
					t.Fatalf("search %v, kg_query %v", hits, facts)
				}
				for what, rec := range map[string]any{"search hit": list[0], "fact": fl[0], "get_drawer": got} {
					if o := originOf(t, rec); o["device"] != "laptop-7f3a" || o["via"] != "mal-0001" || o["trusted"] != false {
						t.Errorf("%s joined by mal as laptop reads %v, want laptop's via mal, untrusted", what, o)
					}
				}
			case UntrustedWithhold:
				if hits["untrusted_withheld"] != 1.0 || facts["untrusted_withheld"] != 1.0 {
					t.Errorf("search %v, kg_query %v: want the joined records withheld", hits, facts)
				}
				if got["content"] != nil || !strings.Contains(str(got["error"]), "mal-0001") {
					t.Errorf("get_drawer of a drawer mal joined as laptop: %v, want it withheld naming mal", got)
				}
			}

			// trusting the joiner too, desk trusts what it joined
			g.configure(t, func(c *Config) { c.Device("desk-9b21").Trusts = []string{"laptop-7f3a", "mal-0001"} })
			got, _, _ = g.call(desk, "get_drawer", map[string]any{"drawer_id": id})
			if o := originOf(t, got); o["device"] != "laptop-7f3a" || o["trusted"] != true || got["content"] == nil {
				t.Errorf("desk trusts laptop and mal, yet reads %v", got)
			}
		})
	}
}
