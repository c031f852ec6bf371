package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/provenance"
)

// tunnelPrimary is an upstream that keeps tunnels by their rooms, as
// MemPalace does (the fake palace keeps none), and knows the wing of the
// drawers in drawers; creates counts its create_tunnel calls.
type tunnelPrimary struct {
	mu      sync.Mutex
	tunnels map[string]string // id -> label
	drawers map[string]string // id -> wing
	creates int
}

func (p *tunnelPrimary) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID     json.RawMessage
		Params struct {
			Name      string
			Arguments map[string]any
		}
	}
	json.NewDecoder(r.Body).Decode(&req)
	a := req.Params.Arguments
	p.mu.Lock()
	var res any = map[string]any{}
	switch req.Params.Name {
	case "mempalace_get_drawer":
		if wing, ok := p.drawers[str(a["drawer_id"])]; ok {
			res = map[string]any{"drawer_id": a["drawer_id"], "wing": wing}
		} else {
			res = map[string]any{"error": "Drawer not found"}
		}
	case "mempalace_list_tunnels":
		list := []any{}
		for id, label := range p.tunnels {
			list = append(list, map[string]any{"id": id, "label": label})
		}
		res = list
	case "mempalace_create_tunnel":
		id := catalogue.TunnelID(str(a["source_wing"]), str(a["source_room"]), str(a["target_wing"]), str(a["target_room"]))
		p.tunnels[id] = str(a["label"])
		p.creates++
		res = map[string]any{"id": id, "label": a["label"]}
	}
	p.mu.Unlock()
	text, _ := json.Marshal(res)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": string(text)}}}})
}

// TestCreateTunnelRewritesOnlyItsWritersTunnel (attack92 F1, F2): a
// create_tunnel of two rooms a tunnel already joins replaces that
// tunnel's label and drawer ids, and nothing keeps them. A non-admin's is
// refused when the tunnel is another device's or of unknown origin (made
// around the gateway), naming its writer and the fix; its own tunnel's,
// an admin's, and a new tunnel's pass. A drawer id not in its end's wing
// (another wing's, or none) is refused as not visible.
func TestCreateTunnelRewritesOnlyItsWritersTunnel(t *testing.T) {
	t.Parallel()
	p := &tunnelPrimary{tunnels: map[string]string{}, drawers: map[string]string{"drawer_b": "team_b", "drawer_secret": "secret"}}
	up := httptest.NewServer(p)
	t.Cleanup(up.Close)
	fast := func(d Device) Device { d.ReadRate, d.WriteRate = 1e9, 1e9; return d }
	g := newGWAt(t, []Device{
		fast(Device{ID: "lab-0001", Label: "lab", Read: []string{"team_b"}, Write: []string{"team_b"}}),
		fast(Device{ID: "mal-0666", Label: "mal", Read: []string{"team_b"}, Write: []string{"team_b"}}),
		fast(Device{ID: "adm-0009", Label: "adm", Read: []string{"*"}, Write: []string{"*"}, Admin: true}),
	}, &upstream{name: "tunnel primary", url: up.URL + "/mcp"})
	tunnel := func(r1, r2, label string, kv ...string) map[string]any {
		m := map[string]any{"source_wing": "team_b", "source_room": r1, "target_wing": "team_b", "target_room": r2, "label": label}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	label := func(r1, r2 string) string {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.tunnels[catalogue.TunnelID("team_b", r1, "team_b", r2)]
	}
	for _, c := range []struct {
		name, device string
		args         map[string]any
		refused      string // what the refusal says ("": made)
		label        string // the tunnel's label after
	}{
		{"lab makes a tunnel", "lab-0001", tunnel("r", "s", "LAB"), "", "LAB"},
		{"lab rewrites its own", "lab-0001", tunnel("s", "r", "LAB 2"), "", "LAB 2"},
		{"mal rewrites lab's", "mal-0666", tunnel("r", "s", "MAL"), "written by lab-0001 (lab)", "LAB 2"},
		{"the admin rewrites lab's", "adm-0009", tunnel("r", "s", "ADM"), "", "ADM"},
		{"lab rewrites the admin's", "lab-0001", tunnel("r", "s", "LAB 3"), "written by adm-0009 (adm)", "ADM"},
		{"mal rewrites one made around the gateway", "mal-0666", tunnel("u", "v", "MAL"), "of unknown origin", "PRIMARY"},
		{"a drawer of its end's wing", "mal-0666", tunnel("m", "n", "MAL", "source_drawer_id", "drawer_b"), "", "MAL"},
		{"a drawer of another wing", "mal-0666", tunnel("m", "n", "MAL 2", "target_drawer_id", "drawer_secret"), string(ruleNotVisible), "MAL"},
		{"a drawer that is not there", "mal-0666", tunnel("m", "n", "MAL 2", "source_drawer_id", "drawer_none"), string(ruleNotVisible), "MAL"},
	} {
		if c.name == "mal rewrites one made around the gateway" {
			p.mu.Lock()
			p.tunnels[catalogue.TunnelID("team_b", "u", "team_b", "v")] = "PRIMARY"
			p.mu.Unlock()
		}
		p.mu.Lock()
		before := p.creates
		p.mu.Unlock()
		res, rpc, _ := g.call(g.tokens[c.device], "create_tunnel", c.args)
		p.mu.Lock()
		made := p.creates != before
		p.mu.Unlock()
		switch msg := str(rpc["message"]); {
		case c.refused == "" && (rpc != nil || !made):
			t.Errorf("%s: %v %v, want it made", c.name, res, rpc)
		case c.refused != "" && (made || rpc["code"] != float64(CodeDenied) || !strings.Contains(msg, c.refused)):
			t.Errorf("%s: made %v, answer %v, want refused (%d) saying %q", c.name, made, rpc, CodeDenied, c.refused)
		case c.refused != "" && !strings.Contains(c.refused, "not visible") && !strings.Contains(msg, "ask an admin"):
			t.Errorf("%s: %q does not say how to have it rewritten", c.name, msg)
		}
		r1, r2 := str(c.args["source_room"]), str(c.args["target_room"])
		if got := label(r1, r2); got != c.label {
			t.Errorf("%s: the tunnel's label is %q, want %q", c.name, got, c.label)
		}
	}
	if st, _ := g.srv.prov.Lookup(provenance.Tunnel(catalogue.TunnelID("team_b", "r", "team_b", "s"))); st.Device != "adm-0009" {
		t.Errorf("the rewritten tunnel's stamp: %+v, want the admin's", st)
	}
}
