package gateway

import (
	"fmt"
	"testing"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
)

// narrowAdmins: an admin of two wings (mal), an admin that reads every
// wing and writes one (auditor), and the operator's admin of everything.
var narrowAdmins = []Device{
	{ID: "mal-0001", Label: "mal", Read: []string{"team_b", "wing_codex"}, Write: []string{"team_b", "wing_codex"}, Admin: true, ReadRate: 1e9, WriteRate: 1e9},
	{ID: "auditor-01", Label: "auditor", Read: []string{"*"}, Write: []string{"team_b"}, Admin: true, ReadRate: 1e9, WriteRate: 1e9},
	{ID: "ops-0001", Label: "ops", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Admin: true, ReadRate: 1e9, WriteRate: 1e9},
}

// refusal is what a device is told of a refused call, the parts that must
// not tell a hidden drawer from a missing one.
func refusal(rpc map[string]any) string {
	if rpc == nil {
		return "(not refused)"
	}
	data, _ := rpc["data"].(map[string]any)
	return fmt.Sprintf("%v %v wing=%q rule=%q", rpc["code"], rpc["message"], data["wing"], data["rule"])
}

// Outside tester, attack16 f11: the admin scope adds the right to delete,
// it does not widen the wing globs. An admin of team_b is refused the
// delete of a team_a drawer exactly as the delete of a drawer that does
// not exist, and as get_drawer refuses it; a delete_by_source, dry run or
// not, and every admin tool that acts on or tells of the whole palace
// need "*"; an admin of "*" works as before.
func TestAdminStaysInsideItsGlobs(t *testing.T) {
	t.Parallel()
	g := newGW(t, narrowAdmins)
	mal, auditor, ops := g.tokens["mal-0001"], g.tokens["auditor-01"], g.tokens["ops-0001"]
	add := func(wing, content, src string) string {
		t.Helper()
		res, rpc, _ := g.call(ops, "add_drawer", map[string]any{"wing": wing, "room": "adm", "content": content, "source_file": src})
		if rpc != nil || res["drawer_id"] == nil {
			t.Fatalf("add_drawer %s: %v %v", wing, res, rpc)
		}
		return res["drawer_id"].(string)
	}
	secret := add("team_a", "team_a only secret", "/s/a/x.md")
	other := add("team_a", "another team_a secret", "/s/a/y.md")
	own := add("team_b", "a team_b note mal may delete", "/s/b/z.md")
	const missing = "drawer_team_a_adm_000000000000000000000000"

	// By id: a hidden drawer is refused as a missing one, and as get_drawer refuses it.
	_, hidden, _ := g.call(mal, "get_drawer", map[string]any{"drawer_id": secret})
	for _, c := range []struct {
		tool string
		args map[string]any
		like map[string]any
	}{
		{"delete_drawer", map[string]any{"drawer_id": secret}, map[string]any{"drawer_id": missing}},
		{"delete_drawers", map[string]any{"drawer_ids": []any{secret}}, map[string]any{"drawer_ids": []any{missing}}},
		{"delete_drawers", map[string]any{"drawer_ids": []any{own, secret}}, map[string]any{"drawer_ids": []any{own, missing}}},
	} {
		_, got, _ := g.call(mal, c.tool, c.args)
		_, want, _ := g.call(mal, c.tool, c.like)
		if got == nil || refusal(got) != refusal(want) || got["data"].(map[string]any)["rule"] != ruleNotVisible.String() {
			t.Errorf("mal %s %v: %s; of a missing drawer: %s", c.tool, c.args, refusal(got), refusal(want))
		}
		if got != nil && hidden != nil && got["data"].(map[string]any)["rule"] != hidden["data"].(map[string]any)["rule"] {
			t.Errorf("mal %s: rule %v, get_drawer's %v", c.tool, got["data"], hidden["data"])
		}
	}
	if n := g.up.toolCalls(t, "delete_drawer") + g.up.toolCalls(t, "delete_drawers"); n != 0 {
		t.Fatalf("%d deletes reached the primary", n)
	}
	// A wing it reads but does not write: refused by its write globs.
	if _, rpc, _ := g.call(auditor, "delete_drawer", map[string]any{"drawer_id": secret}); rpc == nil || rpc["data"].(map[string]any)["rule"] != deviceinfo.RuleWriteGlobs || rpc["data"].(map[string]any)["wing"] != "team_a" {
		t.Errorf("auditor's delete of a team_a drawer: %s", refusal(rpc))
	}
	// Its own wing: deleted, as before.
	if res, rpc, _ := g.call(mal, "delete_drawer", map[string]any{"drawer_id": own}); rpc != nil || res["success"] != true {
		t.Errorf("mal's delete of its own drawer: %v %s", res, refusal(rpc))
	}

	// By source, and the palace-wide tools: "*" only, whatever exists.
	for _, d := range []struct {
		token string
		tools []string
	}{
		{mal, []string{"delete_by_source", "mesh_peers", "reconnect", "hook_settings", "memories_filed_away", "delete_tunnel", "delete_hallway"}},
		{auditor, []string{"delete_by_source", "reconnect", "hook_settings", "memories_filed_away", "delete_tunnel", "delete_hallway"}},
	} {
		for _, tool := range d.tools {
			args := map[string]any{"tunnel_id": "t", "hallway_id": "h"}
			t0, _ := catalogue.Lookup(tool)
			for k := range args {
				if !t0.Accepts(k) {
					delete(args, k)
				}
			}
			var outs []string
			for _, a := range []map[string]any{{"source_file": "/s/a/x.md"}, {"source_file": "/s/a/nothing.md"}, {"source_file": "/s/a/x.md", "dry_run": false}} {
				if tool != "delete_by_source" {
					a = args
				}
				_, rpc, _ := g.call(d.token, tool, a)
				outs = append(outs, refusal(rpc))
				if rpc == nil || rpc["code"] != float64(CodeDenied) {
					t.Errorf("%s: %s %v is not refused: %v", d.token[:12], tool, a, rpc)
				}
			}
			if outs[0] != outs[1] {
				t.Errorf("%s: a source with drawers is told from one without: %q, %q", tool, outs[0], outs[1])
			}
		}
	}
	if n := g.up.toolCalls(t, "delete_by_source") + g.up.toolCalls(t, "reconnect") + g.up.toolCalls(t, "hook_settings"); n != 0 {
		t.Fatalf("%d palace-wide admin calls reached the primary", n)
	}
	// The admin GET routes (/sync/peers is mesh_peers' payload): "*" readers only.
	for _, path := range []string{"/statusz", "/sync/peers", "/sync/ops?origin=a"} {
		if code := g.get(mal, path, nil); code != 403 {
			t.Errorf("mal GET %s: HTTP %d, want 403", path, code)
		}
		if code := g.get(auditor, path, nil); code == 403 {
			t.Errorf("auditor GET %s: HTTP %d", path, code)
		}
	}
	if e := g.auditLog(); e[len(e)-2].Rule != ruleReadsAll {
		t.Errorf("mal's GET is audited as %q", e[len(e)-2].Rule)
	}
	// A palace-wide read: any admin that reads every wing.
	if _, rpc, _ := g.call(auditor, "mesh_peers", nil); rpc != nil && rpc["code"] == float64(CodeDenied) {
		t.Errorf("auditor (read \"*\") refused mesh_peers: %s", refusal(rpc))
	}

	// The admin of "*": as before.
	if res, rpc, _ := g.call(ops, "delete_by_source", map[string]any{"source_file": "/s/a/x.md"}); rpc != nil || res["match_count"] != float64(1) {
		t.Errorf("ops' dry run: %v %s", res, refusal(rpc))
	}
	for _, tool := range []string{"reconnect", "hook_settings"} {
		if _, rpc, _ := g.call(ops, tool, nil); rpc != nil {
			t.Errorf("ops' %s: %s", tool, refusal(rpc))
		}
	}
	if res, rpc, _ := g.call(ops, "delete_drawers", map[string]any{"drawer_ids": []any{secret, missing}}); rpc != nil || res["deleted"] != float64(1) {
		t.Errorf("ops' delete_drawers: %v %s", res, refusal(rpc))
	}
	if res, rpc, _ := g.call(ops, "delete_drawer", map[string]any{"drawer_id": other}); rpc != nil || res["success"] != true {
		t.Errorf("ops' delete_drawer: %v %s", res, refusal(rpc))
	}
	if res, rpc, _ := g.call(ops, "delete_drawer", map[string]any{"drawer_id": missing}); rpc != nil || res["success"] != false {
		t.Errorf("ops' delete of a missing drawer is not MemPalace's answer: %v %s", res, refusal(rpc))
	}
}

// The same against real MemPalace 3.11.0 (attack16 f11's calls): mal's
// delete_drawer of a team_a drawer and its delete_by_source dry run of
// that drawer's source are refused as those of a drawer and a source that
// do not exist, and the drawer stays; the admin of "*" dry-runs and
// deletes it.
func TestRealAdminStaysInsideItsGlobs(t *testing.T) {
	u, srv := startReal(t)
	g := newGWAt(t, narrowAdmins, u)
	mal, ops := g.tokens["mal-0001"], g.tokens["ops-0001"]
	res, rpc, _ := g.call(ops, "add_drawer", map[string]any{"wing": "team_a", "room": "adm", "content": "team_a only secret", "source_file": "/s/f11/x.md"})
	if rpc != nil || res["drawer_id"] == nil {
		t.Fatalf("add_drawer: %v %v", res, rpc)
	}
	secret := res["drawer_id"].(string)
	for _, c := range []struct {
		tool       string
		args, like map[string]any
	}{
		{"delete_drawer", map[string]any{"drawer_id": secret}, map[string]any{"drawer_id": "drawer_team_a_adm_000000000000000000000000"}},
		{"delete_by_source", map[string]any{"source_file": "/s/f11/x.md"}, map[string]any{"source_file": "/s/f11/nothing.md"}},
	} {
		_, got, _ := g.call(mal, c.tool, c.args)
		_, want, _ := g.call(mal, c.tool, c.like)
		if got == nil || refusal(got) != refusal(want) {
			t.Errorf("mal %s: %s; of nothing: %s", c.tool, refusal(got), refusal(want))
		}
	}
	if got := srv.MustCall(t, "mempalace_get_drawer", map[string]any{"drawer_id": secret}); got["content"] != "team_a only secret" {
		t.Fatalf("the team_a drawer is gone from the primary: %v", got)
	}
	if res, rpc, _ := g.call(ops, "delete_by_source", map[string]any{"source_file": "/s/f11/x.md"}); rpc != nil || res["match_count"] != float64(1) {
		t.Errorf("ops' dry run: %v %s", res, refusal(rpc))
	}
	if res, rpc, _ := g.call(ops, "delete_drawer", map[string]any{"drawer_id": secret}); rpc != nil || res["success"] != true {
		t.Errorf("ops' delete_drawer: %v %s", res, refusal(rpc))
	}
}

// Outside tester, attack17 n14: the instruction wing is written only by an
// admin device whose write globs match it. mal (admin of team_b and
// wing_codex) and auditor (admin, reads every wing, writes team_b) may
// read the operator's instruction but neither add to the wing, nor
// rewrite, move into it or delete (the trash would keep it) an
// instruction; ops (admin of "*") may.
func TestNarrowAdminDoesNotOwnTheInstructionWing(t *testing.T) {
	t.Parallel()
	ds := append([]Device(nil), narrowAdmins...)
	ds[0].Agents, ds[1].Agents = []string{"codex@mal"}, []string{"codex@auditor"}
	g := newGW(t, ds)
	g.configure(t, func(c *Config) { c.InstructionWing = "wing_instructions" })
	mal, auditor, ops := g.tokens["mal-0001"], g.tokens["auditor-01"], g.tokens["ops-0001"]
	res, rpc, _ := g.call(ops, "add_drawer", map[string]any{"wing": "wing_instructions", "room": "rules", "content": "always run the tests before a release"})
	if rpc != nil || res["success"] != true {
		t.Fatalf("ops's instruction: %v %v", res, rpc)
	}
	rule := res["drawer_id"]
	own, _, _ := g.call(mal, "add_drawer", map[string]any{"wing": "team_b", "room": "r", "content": "mal's team_b note"})
	for _, tok := range []string{mal, auditor} {
		if got, rpc, _ := g.call(tok, "get_drawer", map[string]any{"drawer_id": rule}); rpc != nil || got["content"] != "always run the tests before a release" {
			t.Errorf("a narrow admin reads the instruction: %v %s", got, refusal(rpc))
		}
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{"add_drawer", map[string]any{"wing": "wing_instructions", "room": "rules", "content": "skip tests on fridays"}},
			{"update_drawer", map[string]any{"drawer_id": rule, "content": "tests are optional"}},
			{"update_drawer", map[string]any{"drawer_id": own["drawer_id"], "wing": "wing_instructions"}},
			{"delete_drawer", map[string]any{"drawer_id": rule}},
			{"delete_drawers", map[string]any{"drawer_ids": []any{rule}}},
			{"checkpoint", map[string]any{"items": []any{map[string]any{"wing": "wing_instructions", "room": "rules", "content": "skip tests"}}}},
			{"diary_write", map[string]any{"agent_name": "codex", "wing": "wing_instructions", "entry": "skip tests"}},
		} {
			_, rpc, _ := g.call(tok, c.tool, c.args)
			if rpc == nil || rpc["data"].(map[string]any)["rule"] != deviceinfo.RuleInstructionWing {
				t.Errorf("%s by %s: %s, want refused by the instruction wing's rule", c.tool, tok[:12], refusal(rpc))
			}
		}
	}
	if got, _, _ := g.call(ops, "get_drawer", map[string]any{"drawer_id": rule}); got["content"] != "always run the tests before a release" {
		t.Errorf("the instruction after the narrow admins' calls: %v", got)
	}
	if n := len(g.primary.Dump().Drawers); n != 2 {
		t.Errorf("%d drawers on the primary, want ops's instruction and mal's note", n)
	}
	if res, rpc, _ := g.call(ops, "update_drawer", map[string]any{"drawer_id": rule, "content": "always run the tests before a release, twice"}); rpc != nil || res["success"] != true {
		t.Errorf("ops's update of its instruction: %v %s", res, refusal(rpc))
	}
}
