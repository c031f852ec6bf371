package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/joakimp/devbox-config/gateway"
)

// newGatewayTokenCmd is `gateway token issue|rotate|revoke`.
func newGatewayTokenCmd(g *gatewayConfig, stdout, stderr io.Writer) *cobra.Command {
	issue := func(rotate bool) func(*cobra.Command, []string) error {
		return func(_ *cobra.Command, args []string) error { return issueToken(g, stdout, stderr, args[0], rotate) }
	}
	var tokenID string
	revoke := &cobra.Command{
		Use: "revoke DEVICE", Short: "Revoke a device's tokens (--token ID for one); effective within a second", Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error { return revokeTokens(g, stdout, args[0], tokenID) },
	}
	revoke.Flags().StringVar(&tokenID, "token", "", "only this token id")
	return group("token", "Issue, rotate and revoke device tokens",
		&cobra.Command{Use: "issue DEVICE", Short: "Issue a token (shown once)", Args: exactArgs(1), RunE: issue(false)},
		&cobra.Command{Use: "rotate DEVICE", Short: "Issue the next token; the old one stays valid for the grace period after the new one's first use", Args: exactArgs(1), RunE: issue(true)},
		revoke)
}

// issueToken is `gateway token issue|rotate DEVICE`: the token on stdout,
// shown once, and what to do with it on stderr.
func issueToken(g *gatewayConfig, stdout, stderr io.Writer, id string, rotate bool) error {
	var tok string
	var grace time.Duration
	var old *gateway.Token // the live token rotated out: it keeps working for the grace
	var issued string      // its id
	err := g.update(func(c *gateway.Config) error {
		d, err := g.deviceIn(c, id)
		if err != nil {
			return err
		}
		key, err := gateway.LoadCheckedSecret(c, gateway.StateFile(g.file, c))
		if err != nil {
			return failed(err)
		}
		if i := slices.IndexFunc(d.Tokens, func(t gateway.Token) bool { return t.Live(time.Now()) }); i >= 0 {
			old = new(gateway.Token)
			*old = d.Tokens[i]
		}
		if tok, err = gateway.Issue(key, d, time.Now()); err != nil { // two live tokens
			return failed(fmt.Errorf("%w (fix: '%s' with one of its tokens: %s)", err, g.hint("token revoke "+id+" --token ID"), tokenIDs(d)))
		}
		issued, grace = d.Tokens[len(d.Tokens)-1].ID, c.Grace()
		return nil
	}, func(c *gateway.Config) bool { return unrevoked(c, issued) })
	if ee, ok := errors.AsType[exitError](err); ok && ee.code == exitNotInForce && !errors.Is(err, gateway.ErrUndone) {
		fmt.Fprintln(stdout, tok) // in the file: it works once the gateway takes it
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, tok)
	msg := "shown once: put it in the device's .env as MEMPALACE_REMOTE_TOKEN; a running gateway takes it within a second (it reloads the config), so a device's call or doctor in that second may still see it refused"
	switch {
	case rotate && old != nil && old.Expires != nil: // its grace runs from an earlier rotation's first use
		msg += fmt.Sprintf("; the old token keeps working until %s UTC (token %s: the end of its grace from an earlier rotation, which this one's first use does not move)", old.Expires.UTC().Format("2006-01-02 15:04"), old.ID)
	case rotate && old != nil:
		msg += fmt.Sprintf("; the old token keeps working until %d days after this one is first used", int(grace.Hours()/24))
	case rotate:
		msg += "; the device had no live token, so none keeps working beside it (a revoked one stays refused)"
	}
	fmt.Fprintln(stderr, msg)
	return nil
}

// revokeTokens is `gateway token revoke DEVICE [--token ID]`.
func revokeTokens(g *gatewayConfig, stdout io.Writer, id, tokenID string) error {
	n, ids := 0, []string{tokenID}
	err := g.update(func(c *gateway.Config) error {
		d, err := g.deviceIn(c, id)
		if err != nil {
			return err
		}
		if tokenID != "" && !slices.ContainsFunc(d.Tokens, func(t gateway.Token) bool { return t.ID == tokenID }) {
			return noSuchToken(g, c, d, tokenID)
		}
		if tokenID == "" {
			ids = nil
			for _, t := range d.Tokens {
				ids = append(ids, t.ID)
			}
		}
		n = gateway.Revoke(d, tokenID) // 0 when run again: confirmed like the first run
		return nil
	}, func(c *gateway.Config) bool {
		return !slices.ContainsFunc(ids, func(t string) bool { return unrevoked(c, t) })
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "revoked %d token(s)\n", n)
	return nil
}

// unrevoked reports whether token id is in c, not revoked (an expiry
// aside: a revocation, or a removal of its device, is what a later edit
// undoes or does).
func unrevoked(c *gateway.Config, id string) bool {
	return slices.ContainsFunc(c.Devices, func(d gateway.Device) bool {
		return slices.ContainsFunc(d.Tokens, func(t gateway.Token) bool { return t.ID == id && !t.Revoked })
	})
}

// noSuchToken is the error for `token revoke DEVICE --token ID` when ID is
// no token of d: its token ids (never a secret), and the device it is one
// of, if any.
func noSuchToken(g *gatewayConfig, c *gateway.Config, d *gateway.Device, id string) error {
	has := "it has no token at all"
	if len(d.Tokens) > 0 {
		has = "its tokens: " + tokenIDs(d)
	}
	fix := fmt.Sprintf("give one of its ids, or no --token to revoke them all; '%s' shows every device's", g.hint("device list"))
	for _, o := range c.Devices {
		if slices.ContainsFunc(o.Tokens, func(t gateway.Token) bool { return t.ID == id }) {
			fix = fmt.Sprintf("%s is device %s's token: '%s'", id, o.ID, g.hint("token revoke "+o.ID+" --token "+id))
		}
	}
	return failed(fmt.Errorf("device %s has no token %s, so nothing is revoked; %s (fix: %s)", d.ID, id, has, fix))
}

// tokenIDs lists d's token ids with their states (never a secret).
func tokenIDs(d *gateway.Device) string {
	ids := make([]string, 0, len(d.Tokens))
	for _, t := range d.Tokens {
		ids = append(ids, t.ID+" ("+tokenState(t)+")")
	}
	return strings.Join(ids, ", ")
}
