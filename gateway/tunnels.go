package gateway

import (
	"context"
	"fmt"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/provenance"
)

// ruleTunnelWriter refuses a non-admin's create_tunnel of two rooms that
// a tunnel of another device (or of unknown origin) already joins:
// MemPalace keys a tunnel on its rooms, so the call would replace that
// tunnel's label and drawer ids, and nothing keeps them (attack92 F1).
const ruleTunnelWriter Rule = "tunnel:another device's"

// tunnelBefore checks a create_tunnel its wings allow (dec): each drawer
// id it names must be a drawer of its own end's wing, else it is refused
// as not visible (attack92 F2: a tunnel would show another wing's drawer
// as in this room). Whose tunnel it rewrites is checked under the write
// slot, just before the send (othersTunnel).
func (s *Server) tunnelBefore(ctx context.Context, args map[string]any, dec Decision) (Decision, error) {
	for _, end := range []string{"source", "target"} {
		if id := str(args[end+"_drawer_id"]); id != "" {
			w, err := s.drawerWing(ctx, id)
			if err != nil || w == "" || w != str(args[end+"_wing"]) {
				return deny(ruleNotVisible, w), err
			}
		}
	}
	return dec, nil
}

// othersTunnel refuses (a *changed) a non-admin's create_tunnel that
// would rewrite a tunnel it did not write. sendWrite runs it under the
// write slot, so no other create_tunnel through the gateway lands
// between the look-up and the send (review28b F4: two devices creating
// the same tunnel at once were both allowed, and the second replaced the
// first's). An unstamped tunnel (made around the gateway) that exists is
// another's, but for a resend of this device's own op the ledger held in
// doubt (ledger.Resent): what the primary holds may be that op's first
// send, whose stamp was withdrawn or never recorded (review28b F5).
// errNoAnswer when the primary did not answer the look-up.
func (s *Server) othersTunnel(ctx context.Context, d *Device, args map[string]any, wing string) error {
	if d.Admin {
		return nil
	}
	id := catalogue.TunnelID(str(args["source_wing"]), str(args["source_room"]), str(args["target_wing"]), str(args["target_room"]))
	st, stamped := s.prov.Lookup(provenance.Tunnel(id))
	if stamped && st.Device == d.ID || !stamped && ledger.Resent(ctx) {
		return nil
	}
	tun, listed := s.tunnelOf(ctx, str(args["source_wing"]), id)
	if !listed {
		return fmt.Errorf("%w list_tunnels", errNoAnswer)
	}
	if tun == nil {
		return nil
	}
	writer := "of unknown origin (made around the gateway)"
	if stamped {
		writer = fmt.Sprintf("written by %s (%s)", st.Device, st.Label)
	}
	return &changed{code: CodeDenied, rule: ruleTunnelWriter, wing: wing, id: id, msg: fmt.Sprintf("devbox-config gateway: %s may not rewrite tunnel %s: it is %s, and create_tunnel of the same two rooms replaces its label and drawer ids, which nothing keeps; nothing was written: ask an admin device to rewrite it", d.ID, id, writer)}
}
