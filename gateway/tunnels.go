package gateway

import (
	"context"
	"errors"
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

// ruleTunnelLookUp refuses a non-admin's create_tunnel whose look-up
// (list_tunnels) MemPalace answered with its error.
const ruleTunnelLookUp Rule = "tunnel:look-up refused"

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
// doubt (ledger.Resent) when it is what that op's first send made (its
// stamp withdrawn or never recorded: review28b F5): the same label and
// drawer ids (sameTunnel). Any other unstamped tunnel there (made since,
// around the gateway or by another device's lost create) is refused as
// before (review29 F3: the resend skipped the look-up and replaced it).
// A look-up MemPalace answers with its error is refused too, as final:
// whose tunnel it is cannot be told (review29 F4: it let the write
// through unchecked). errNoAnswer when the primary did not answer it.
func (s *Server) othersTunnel(ctx context.Context, d *Device, args map[string]any, wing string) error {
	if d.Admin {
		return nil
	}
	id := catalogue.TunnelID(str(args["source_wing"]), str(args["source_room"]), str(args["target_wing"]), str(args["target_room"]))
	st, stamped := s.prov.Lookup(provenance.Tunnel(id))
	if stamped && st.Device == d.ID {
		return nil
	}
	tun, err := s.tunnelOf(ctx, str(args["source_wing"]), id)
	switch {
	case errors.Is(err, errNoAnswer):
		return err
	case err != nil:
		return &changed{code: CodeDenied, rule: ruleTunnelLookUp, wing: wing, id: id, msg: fmt.Sprintf("devbox-config gateway: %s's create_tunnel of tunnel %s was not sent: MemPalace answered the look-up of the tunnel it would rewrite (list_tunnels of wing %q) with its error, %q, so whose tunnel that is cannot be checked; nothing was written, and sent again it is refused again while MemPalace answers so", d.ID, id, str(args["source_wing"]), err)}
	case tun == nil, !stamped && ledger.Resent(ctx) && sameTunnel(tun, args):
		return nil
	}
	writer := "of unknown origin (made around the gateway)"
	if stamped {
		writer = fmt.Sprintf("written by %s (%s)", st.Device, st.Label)
	}
	return &changed{code: CodeDenied, rule: ruleTunnelWriter, wing: wing, id: id, msg: fmt.Sprintf("devbox-config gateway: %s may not rewrite tunnel %s: it is %s, and create_tunnel of the same two rooms replaces its label and drawer ids, which nothing keeps; nothing was written: ask an admin device to rewrite it", d.ID, id, writer)}
}

// sameTunnel: tun, as list_tunnels lists it, is what create_tunnel's
// args make: the same label, and the same drawer id (or none) at each
// end.
func sameTunnel(tun, args map[string]any) bool {
	for _, end := range []string{"source", "target"} {
		e, _ := tun[end].(map[string]any)
		if str(e["drawer_id"]) != str(args[end+"_drawer_id"]) {
			return false
		}
	}
	return str(tun["label"]) == str(args["label"])
}
