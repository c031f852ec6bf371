package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/provenance"
)

// tunnelPrimary is an upstream that keeps tunnels by their rooms, as
// MemPalace does (the fake palace keeps none), and knows the wing of the
// drawers in drawers; creates counts its create_tunnel calls.
type tunnelPrimary struct {
	mu      sync.Mutex
	tunnels map[string]string    // id -> label
	ends    map[string][2]string // id -> its source and target drawer ids
	drawers map[string]string    // id -> wing
	creates int
	// slow delays each create_tunnel before it lands; listErr answers
	// list_tunnels MemPalace's refusal of a wing name; loseCreate cuts
	// the connection of a create_tunnel it made, and every list_tunnels
	// after it until cleared (down).
	slow       time.Duration
	listErr    bool
	loseCreate bool
	down       bool
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
	if req.Params.Name == "mempalace_create_tunnel" {
		time.Sleep(p.slow)
	}
	p.mu.Lock()
	if p.down && req.Params.Name == "mempalace_list_tunnels" {
		p.mu.Unlock()
		hangUpOn(w)
		return
	}
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
			end := func(i int) map[string]any {
				if p.ends[id][i] == "" {
					return map[string]any{}
				}
				return map[string]any{"drawer_id": p.ends[id][i]}
			}
			list = append(list, map[string]any{"id": id, "label": label, "source": end(0), "target": end(1)})
		}
		res = list
		if p.listErr {
			res = map[string]any{"error": "wing contains invalid characters"}
		}
	case "mempalace_create_tunnel":
		id := catalogue.TunnelID(str(a["source_wing"]), str(a["source_room"]), str(a["target_wing"]), str(a["target_room"]))
		p.tunnels[id] = str(a["label"])
		if p.ends == nil {
			p.ends = map[string][2]string{}
		}
		p.ends[id] = [2]string{str(a["source_drawer_id"]), str(a["target_drawer_id"])}
		p.creates++
		res = map[string]any{"id": id, "label": a["label"]}
		if p.loseCreate {
			p.loseCreate, p.down = false, true
			p.mu.Unlock()
			hangUpOn(w)
			return
		}
	}
	p.mu.Unlock()
	text, _ := json.Marshal(res)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": string(text)}}}})
}

// hangUpOn closes the connection of w's request without an answer.
func hangUpOn(w http.ResponseWriter) {
	if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
		c.Close()
	}
}

// made is how many create_tunnel calls p took.
func (p *tunnelPrimary) made() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.creates
}

// newTunnelGateway is a gateway in front of p, for lab and mal (both
// writing team_b) and an admin, none held by a rate.
func newTunnelGateway(t *testing.T, p *tunnelPrimary) *gw {
	up := httptest.NewServer(p)
	t.Cleanup(up.Close)
	fast := func(d Device) Device { d.ReadRate, d.WriteRate = 1e9, 1e9; return d }
	return newGWAt(t, []Device{
		fast(Device{ID: "lab-0001", Label: "lab", Read: []string{"team_b"}, Write: []string{"team_b"}}),
		fast(Device{ID: "mal-0666", Label: "mal", Read: []string{"team_b"}, Write: []string{"team_b"}}),
		fast(Device{ID: "adm-0009", Label: "adm", Read: []string{"*"}, Write: []string{"*"}, Admin: true}),
	}, &upstream{name: "tunnel primary", url: up.URL + "/mcp"})
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
	g := newTunnelGateway(t, p)
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

// tunnelArgs are create_tunnel's arguments for rooms r1 and r2 of team_b.
func tunnelArgs(r1, r2, label string) map[string]any {
	return map[string]any{"source_wing": "team_b", "source_room": r1, "target_wing": "team_b", "target_room": r2, "label": label}
}

// Two non-admin devices creating the same tunnel at once: one is made,
// the other refused, and the tunnel keeps the label of the one made
// (review28b F4). Before, the owner check ran before the write slot, both
// saw no tunnel, and the second silently replaced the first's label.
func TestTwoDevicesCreatingOneTunnelAtOnce(t *testing.T) {
	t.Parallel()
	p := &tunnelPrimary{tunnels: map[string]string{}, slow: 300 * time.Millisecond}
	g := newTunnelGateway(t, p)
	labels := map[string]string{"lab-0001": "LAB", "mal-0666": "MAL"}
	rpcs := map[string]map[string]any{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for dev, label := range labels {
		wg.Go(func() {
			_, rpc, _ := g.call(g.tokens[dev], "create_tunnel", tunnelArgs("r", "s", label))
			mu.Lock()
			rpcs[dev] = rpc
			mu.Unlock()
		})
	}
	wg.Wait()
	var made, refused []string
	for dev, rpc := range rpcs {
		switch {
		case rpc == nil:
			made = append(made, dev)
		case rpc["code"] == float64(CodeDenied) && strings.Contains(str(rpc["message"]), "may not rewrite tunnel"):
			refused = append(refused, dev)
		default:
			t.Errorf("%s: %v, want made or refused as another's tunnel", dev, rpc)
		}
	}
	if len(made) != 1 || len(refused) != 1 || p.made() != 1 {
		t.Fatalf("made %v, refused %v, %d create_tunnel calls on the primary: want one made, one refused, one call", made, refused, p.made())
	}
	p.mu.Lock()
	got := p.tunnels[catalogue.TunnelID("team_b", "r", "team_b", "s")]
	p.mu.Unlock()
	if got != labels[made[0]] {
		t.Errorf("the tunnel's label is %q, want %q (%s's, the one made)", got, labels[made[0]], made[0])
	}
}

// A device's create_tunnel whose answer and look-up were lost (the
// ledger holds its op in doubt), sent again under the same op id, is
// made: the tunnel the primary holds may be that op's first send
// (review28b F5). Before, it read as "of unknown origin" and was refused
// -31003, which the outbox takes as final. Another device's op, new or
// sent saying it is a resend, is still refused.
func TestALostCreateTunnelSentAgainIsItsOwn(t *testing.T) {
	t.Parallel()
	p := &tunnelPrimary{tunnels: map[string]string{}, loseCreate: true}
	g := newTunnelGateway(t, p)
	g.withLedger()
	send := func(dev, label, op, resend string) (int, map[string]any) {
		meta := map[string]any{ledger.MetaKey: op}
		if resend != "" {
			meta[ledger.ResendKey] = resend
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{
			"name": "mempalace_create_tunnel", "arguments": tunnelArgs("r", "s", label), "_meta": meta}})
		return g.post(g.tokens[dev], string(b))
	}
	if status, m := send("lab-0001", "LAB", opOf('a'), ""); status != http.StatusBadGateway {
		t.Fatalf("lab's create_tunnel, its answer and look-up lost: %d %v (want 502, in doubt)", status, m)
	}
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
	for _, c := range []struct{ dev, op, resend string }{{"mal-0666", opOf('b'), ""}, {"mal-0666", opOf('c'), "looked-up"}} {
		status, m := send(c.dev, "MAL", c.op, c.resend)
		if e, _ := m["error"].(map[string]any); status != 200 || e["code"] != float64(CodeDenied) || !strings.Contains(str(e["message"]), "of unknown origin") {
			t.Errorf("%s's create_tunnel of lab's lost tunnel (resend %q): %d %v, want refused as of unknown origin", c.dev, c.resend, status, m)
		}
	}
	status, m := send("lab-0001", "LAB", opOf('a'), "looked-up")
	if e, _ := m["error"]; status != 200 || e != nil {
		t.Fatalf("lab's resend of its lost create_tunnel: %d %v, want it made", status, m)
	}
	if p.made() != 2 {
		t.Errorf("%d create_tunnel calls on the primary, want 2 (lab's lost one and its resend)", p.made())
	}
	if st, _ := g.srv.prov.Lookup(provenance.Tunnel(catalogue.TunnelID("team_b", "r", "team_b", "s"))); st.Device != "lab-0001" {
		t.Errorf("the tunnel's stamp after lab's resend: %+v, want lab's", st)
	}
}

// A list_tunnels MemPalace answers with its error (a wing name it
// refuses, or a failure of its own) is refused at the gateway as final
// (-31003, quoting MemPalace), not answered "busy, send it again" (503),
// which an outbox resent for good (review28b F6), and not taken for "no
// tunnel there", which let a create_tunnel of another device's tunnel
// through unchecked (review29 F4: it was sent on).
func TestATunnelLookUpMemPalaceRefusesIsNotBusy(t *testing.T) {
	t.Parallel()
	p := &tunnelPrimary{tunnels: map[string]string{}, listErr: true}
	g := newTunnelGateway(t, p)
	_, rpc, status := g.call(g.tokens["lab-0001"], "create_tunnel", tunnelArgs("r", "s", "LAB"))
	if status != http.StatusOK || rpc["code"] != float64(CodeDenied) || !strings.Contains(str(rpc["message"]), "wing contains invalid characters") || p.made() != 0 {
		t.Errorf("create_tunnel after list_tunnels answered an error: HTTP %d %v, %d calls on the primary; want refused %d quoting MemPalace, not sent", status, rpc, p.made(), CodeDenied)
	}
}

// A device's create_tunnel whose answer and look-up were lost, sent
// again, is refused when the tunnel of its two rooms is no longer what
// its first send made: replaced since around the gateway (another
// label), or with the same label and other drawer ids (review29 F3: the
// resend skipped the look-up and replaced it). Before, it was made.
func TestALostCreateTunnelResentOverAnotherIsRefused(t *testing.T) {
	t.Parallel()
	id := catalogue.TunnelID("team_b", "r", "team_b", "s")
	for _, c := range []struct {
		name, label string
		ends        [2]string
	}{
		{"another label", "PRIMARY", [2]string{}},
		{"the same label, a drawer id", "LAB", [2]string{"drawer_b", ""}},
	} {
		p := &tunnelPrimary{tunnels: map[string]string{}, loseCreate: true}
		g := newTunnelGateway(t, p)
		g.withLedger()
		if status, m := g.postOp(g.tokens["lab-0001"], "mempalace_create_tunnel", tunnelArgs("r", "s", "LAB"), opOf('a')); status != http.StatusBadGateway {
			t.Fatalf("%s: lab's create_tunnel, its answer and look-up lost: %d %v (want 502, in doubt)", c.name, status, m)
		}
		p.mu.Lock()
		p.down, p.tunnels[id], p.ends[id] = false, c.label, c.ends
		p.mu.Unlock()
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{
			"name": "mempalace_create_tunnel", "arguments": tunnelArgs("r", "s", "LAB"), "_meta": map[string]any{ledger.MetaKey: opOf('a'), ledger.ResendKey: "looked-up"}}})
		status, m := g.post(g.tokens["lab-0001"], string(b))
		if e, _ := m["error"].(map[string]any); status != 200 || e["code"] != float64(CodeDenied) || !strings.Contains(str(e["message"]), "of unknown origin") {
			t.Errorf("%s: lab's resend over a tunnel replaced since: %d %v, want refused as of unknown origin", c.name, status, m)
		}
		if p.made() != 1 {
			t.Errorf("%s: %d create_tunnel calls on the primary, want 1 (lab's lost one)", c.name, p.made())
		}
	}
}
