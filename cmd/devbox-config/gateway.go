package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/joakimp/devbox-config/gateway"
)

const gatewayHelp = `gateway sits in front of 'mempalace serve' (unchanged, one shared token) and
gives every device its own token: requests are authorized by wing, knowledge-
graph grant, coordination identity and admin scope (deny by default), added_by
is stamped from the credential, results are filtered to readable wings, and
every request goes to a hash-chained audit log with signed checkpoints.
Every delete (admin devices only) is kept in the gateway's trash first
('gateway trash'); sync and mine are refused for every device. The
upstream's token comes from MEMPALACE_UPSTREAM_TOKEN or the config's
upstream_token_file, never argv; the gateway refuses to start without one
unless --no-upstream-token says the upstream has none. There is no implicit
0.0.0.0: bind the docker0 gateway address behind the tunnel (RFC 001 §6.2);
a wildcard needs --allow-wildcard. An --upstream it cannot use (no scheme, no
/mcp path, credentials) and a missing config are refused before it listens,
each with its fix, and so is a gateway that has served whose kept state (audit
log, signing key, trash, op-id ledger, provenance index, state file, secret)
is missing, unless --new-state. One gateway per audit log: it holds <audit_log>.lock
while it runs, and a second one is refused with the holder's pid. The
config reloads on change and on SIGHUP. A subcommand that changes the config
(device add|set|remove, token issue|rotate|revoke) then waits up to 2 s for
a running gateway to record that it took the file: exit status 3 when it
refused it (its previous config stays in force, and the error is its own),
when the file it took no longer holds the change (a later edit undid it),
or when it did not say so (a gateway older than this release records
nothing). Run again, a change the file holds already is checked the same
way.`

// newGatewayCmd is `gateway` (it serves: gateway_serve.go) and its
// operator subcommands, which share --config.
func newGatewayCmd(stdout, stderr io.Writer) *cobra.Command {
	g := &gatewayConfig{}
	sc := &gatewayServeCmd{config: g, stderr: stderr}
	cmd := &cobra.Command{
		Use:   "gateway --listen ADDR --upstream URL [--config FILE]",
		Short: "Per-device authorization, provenance and an audit log in front of the primary",
		Long:  gatewayHelp,
		Args:  noArgs,
		RunE:  func(*cobra.Command, []string) error { return sc.run() },
	}
	cmd.Flags().StringVar(&sc.listen, "listen", "", "address to listen on, e.g. 172.17.0.1:8766 (no default)")
	cmd.Flags().StringVar(&sc.upstream, "upstream", "", "the primary's MCP endpoint, e.g. http://127.0.0.1:8765/mcp")
	cmd.Flags().BoolVar(&sc.allowWildcard, "allow-wildcard", false, "allow --listen 0.0.0.0 or [::] (every interface): only behind a firewall")
	cmd.Flags().BoolVar(&sc.noUpstreamToken, "no-upstream-token", false, "the upstream runs without a token (loopback mempalace serve): start without MEMPALACE_UPSTREAM_TOKEN")
	cmd.Flags().BoolVar(&sc.newState, "new-state", false, "start though this gateway has served and its audit log, trash, op-id ledger, provenance index, state file or keys are missing: each is made anew, empty (what it held is lost)")
	cmd.PersistentFlags().StringVar(&g.file, "config", gateway.DefaultConfigFile, "gateway config (JSONC)")
	cmd.AddCommand(
		newGatewayInitCmd(g, stderr),
		newGatewayDeviceCmd(g, stdout, stderr),
		newGatewayTokenCmd(g, stdout, stderr),
		newGatewayAuditCmd(g, stdout),
		newGatewayTrashCmd(g, stdout, stderr),
	)
	return cmd
}

// gatewayConfig is the --config file the gateway's subcommands read and
// change.
type gatewayConfig struct {
	file string
	// wait bounds how long a change waits for the running gateway to say
	// it took it (0: confirmWait); tests set less.
	wait time.Duration
}

// confirmWait is how long a change waits for the running gateway (which
// reads the file every 200 ms) to say it took it.
const confirmWait = 2 * time.Second

// missing is the error for a config that does not exist, with the command
// that makes one.
func (g *gatewayConfig) missing() error {
	at, also := g.file, ""
	if abs, err := filepath.Abs(at); err == nil {
		at = abs
	}
	if filepath.Clean(g.file) == gateway.DefaultConfigFile {
		also = " (or run this in the config's directory, or give --config its path)"
	}
	return failed(fmt.Errorf("no gateway config at %s: create one with '%s'%s", at, gateway.Hint(g.file, "init"), also))
}

// hint is the command line that runs sub with this --config.
func (g *gatewayConfig) hint(sub string) string { return gateway.Hint(g.file, sub) }

// update applies an operator's change under the config's lock, to the
// file as it is now (gateway.UpdateConfig), then confirms it; holds finds
// the change in a config (a later edit may undo it). change may return
// an exitError of its own; a change made already (a re-run) may return
// nil and change nothing: it is confirmed the same way.
func (g *gatewayConfig) update(change func(*gateway.Config) error, holds func(*gateway.Config) bool) error {
	since := time.Now() // a refusal recorded before this write says nothing of it
	written, err := gateway.UpdateConfig(g.file, change)
	var ee exitError
	switch {
	case err == nil:
		return g.confirm(since, written, holds)
	case errors.As(err, &ee):
		return ee
	case errors.Is(err, fs.ErrNotExist):
		return g.missing()
	}
	return failed(err)
}

// confirm says whether the gateway running on the config took the change
// written from since on, which holds finds (gateway.ConfirmApplied): nil
// when it did or when none runs; else an error with exitNotInForce naming
// what is in force; written: the command wrote the file (not a re-run
// the file held already).
func (g *gatewayConfig) confirm(since time.Time, written bool, holds func(*gateway.Config) bool) error {
	wait := cmp.Or(g.wait, confirmWait)
	err := gateway.ConfirmApplied(g.file, since, wait, holds)
	var refused *gateway.RefusedError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gateway.ErrUndone):
		return exitError{exitNotInForce, fmt.Errorf("the config was written, but %w before the running gateway read it (a hand save from a copy opened before this command, an editor's buffer), so this change is NOT in force: the file the gateway runs on does not hold it (a device removed or a token revoked here STILL WORKS; a device added or a token issued here does not exist). Fix: close or reload the file in the editor, run this command again, and check with '%s'", err, g.hint("device list"))}
	case errors.As(err, &refused) && !written:
		return exitError{exitNotInForce, fmt.Errorf("the file holds this change already (nothing was written), but the running gateway refuses the file, so the change is NOT in force unless the previous config the gateway still runs held it too (check there before relying on it: a device removed or a token revoked here may STILL WORK). The gateway's error: %w (fix: correct what it names: the gateway tries the file again every few seconds, and at once when it is saved; then check with '%s')", err, g.hint("device list"))}
	case errors.As(err, &refused):
		return exitError{exitNotInForce, fmt.Errorf("the config is written, but the running gateway refused it, so this change is NOT in force: its previous config stays (a device removed or a token revoked here STILL WORKS, a token issued here is refused) until it takes the file. The gateway's error: %w (fix: correct what it names: the gateway tries the file again every few seconds, and at once when it is saved; then check with '%s'. A key it does not know means the gateway is older than this command: restart it on this release's binary)", err, g.hint("device list"))}
	case errors.Is(err, gateway.ErrNotConfirmed):
		return exitError{exitNotInForce, fmt.Errorf("the config is written, but %w within %s (a gateway older than this release does not say; its log does): until it does, a device removed or a token revoked here may still work. Restart it on this release's binary (the older one refuses what this release writes, removed_agents, and would not start), then check with '%s'", err, wait, g.hint("device list"))}
	case errors.Is(err, fs.ErrPermission):
		return exitError{exitNotInForce, fmt.Errorf("the config is written, but whether the running gateway took it cannot be told: %w (the gateway keeps its lock and its record in its audit directory, which this user may not read). Until it is checked, a device removed or a token revoked here may still work: check as the gateway's user or root with '%s', and in the gateway's log ('config change not applied' is a refusal)", err, g.hint("device list"))}
	}
	return exitError{exitNotInForce, fmt.Errorf("the config is written, but whether the running gateway took it is not known: %w", err)}
}

// load reads the config with the gateway's state folded in.
func (g *gatewayConfig) load() (*gateway.Config, error) {
	c, err := gateway.LoadConfig(g.file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, g.missing()
	}
	if err != nil {
		return nil, failed(err)
	}
	st, err := gateway.LoadState(gateway.StateFile(g.file, c))
	if err != nil {
		return nil, failed(err)
	}
	c.FoldState(st)
	return c, nil
}

// deviceIn is the device id in c, or the error naming it and the next
// command.
func (g *gatewayConfig) deviceIn(c *gateway.Config, id string) (*gateway.Device, error) {
	if d := c.Device(id); d != nil {
		return d, nil
	}
	if slices.Contains(c.RemovedDevices, id) {
		return nil, failed(fmt.Errorf("device %s was removed ('device remove'): a removed id has no tokens and no scopes (fix: give the machine a new id, '%s', then 'token issue NEW-ID'; or, if it is the same machine and should keep the old one's records and trust, '%s')", id, g.hint("device add NEW-ID"), g.hint("device add "+id+" --reuse-removed-id")))
	}
	ids := make([]string, 0, len(c.Devices))
	for _, d := range c.Devices {
		ids = append(ids, d.ID)
	}
	if near := gateway.NearestID(id, ids); near != "" {
		return nil, failed(fmt.Errorf("no device %s: did you mean %s? (fix: give %s; '%s' shows the devices)", id, near, near, g.hint("device list")))
	}
	return nil, failed(fmt.Errorf("no device %s (fix: '%s' shows the devices; '%s' adds it)", id, g.hint("device list"), g.hint("device add "+id)))
}
