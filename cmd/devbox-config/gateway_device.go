package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/joakimp/devbox-config/gateway"
)

// newGatewayDeviceCmd is `gateway device add|set|list|remove`.
func newGatewayDeviceCmd(g *gatewayConfig, stdout, stderr io.Writer) *cobra.Command {
	list := &cobra.Command{
		Use: "list", Short: "List devices and their tokens (never the secrets)", Args: noArgs,
		RunE: func(*cobra.Command, []string) error { return listDevices(g, stdout, stderr) },
	}
	remove := &cobra.Command{
		Use: "remove ID", Short: "Remove a device (its tokens stop working within a second)", Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error { return removeDevice(g, stdout, args[0]) },
	}
	return group("device", "Add, change, list and remove devices", newDeviceAddCmd(g, stdout, stderr), newDeviceSetCmd(g, stdout), list, remove)
}

// deviceFlags are the scope flags `device add` and `device set` share,
// parsed into d.
func deviceFlags(f *pflag.FlagSet, d *gateway.Device) {
	f.StringVar(&d.Label, "label", "", "human-readable label (never identity)")
	f.StringSliceVar(&d.Read, "read", nil, "wing globs the device may read")
	f.StringSliceVar(&d.Write, "write", nil, "wing globs the device may write")
	f.StringVar((*string)(&d.KG), "kg", "none", "knowledge-graph grant: none, read or write")
	f.StringSliceVar(&d.Agents, "agents", nil, "from_agent names the device may use, e.g. opencode@laptop")
	f.BoolVar(&d.Admin, "admin", false, "may delete drawers of the wings it writes (kept in the gateway's trash) and write the instruction wing if its write globs match it; with read and write \"*\" also by source, and the other admin tools (no device runs sync or mine on the primary, or a tool the catalogue does not know)")
	f.BoolVar(&d.Coordinator, "coordinator", false, "sees every coordination event")
	f.BoolVar(&d.BulkDelete, "bulk-delete", false, "an admin device's one delete may remove more than the config's delete_cap drawers (every one still kept in the trash)")
	f.StringSliceVar(&d.Trusts, "trusts", nil, "device ids whose records it trusts, besides its own (records of unknown origin never); '' trusts every device again (the default)")
	f.StringVar((*string)(&d.Untrusted), "untrusted", "", "what its answers do with a record from a device it does not trust: mark (\"trusted\": false in the record's origin; the default) or withhold (left out)")
}

// deviceAddCmd is `gateway device add ID`: its flags, and run.
type deviceAddCmd struct {
	config         *gatewayConfig
	stdout, stderr io.Writer
	flags          *pflag.FlagSet
	d              gateway.Device
	reuse          bool // --reuse-removed-id
	take           bool // --take-removed-agents
}

func newDeviceAddCmd(g *gatewayConfig, stdout, stderr io.Writer) *cobra.Command {
	ac := &deviceAddCmd{config: g, stdout: stdout, stderr: stderr}
	c := &cobra.Command{
		Use: "add ID", Short: "Add a device (then issue it a token)", Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error { return ac.run(args[0]) },
	}
	ac.flags = c.Flags()
	deviceFlags(c.Flags(), &ac.d)
	c.Flags().BoolVar(&ac.reuse, "reuse-removed-id", false, "add under the id of a removed device: the new device inherits the old one's records (who wrote what) and every trust that named it")
	takeFlag(c.Flags(), &ac.take)
	return c
}

func (ac *deviceAddCmd) run(id string) error {
	d := ac.d
	d.ID = id
	trimLists(&d)
	at := -1
	var took []string
	already := false
	err := ac.config.update(func(c *gateway.Config) error {
		if e := c.Device(d.ID); e != nil {
			if already = e.Label == d.Label && scopes(*e) == scopes(d); already {
				return nil // run again (after a refusal): confirmed like the first run
			}
			return failed(fmt.Errorf("device %s exists (fix: change it with '%s', or add the new machine under another id: '%s')", d.ID, ac.config.hint("device set "+d.ID+" ..."), ac.config.hint("device add NEW-ID ...")))
		}
		if i := slices.IndexFunc(c.RemovedDevices, func(id string) bool { return strings.EqualFold(id, d.ID) && id != d.ID }); i >= 0 {
			return failed(fmt.Errorf("device %s differs only in case from the removed device %s: one reads as the other in audit lines, trust lists and the mailbox's mark of a removed sender (fix: add it under another id: '%s'; or, if it is the removed machine, '%s')", d.ID, c.RemovedDevices[i], ac.config.hint("device add NEW-ID ..."), ac.config.hint("device add "+c.RemovedDevices[i]+" --reuse-removed-id ...")))
		}
		if slices.Contains(c.RemovedDevices, d.ID) {
			if !ac.reuse {
				return failed(fmt.Errorf("device %s was removed: a new device under its id would inherit the old one's records (who wrote what) and the trust other devices gave it (fix: add the new machine under another id: '%s'; or, if it is the same machine, '%s')", d.ID, ac.config.hint("device add NEW-ID ..."), ac.config.hint("device add "+d.ID+" --reuse-removed-id ...")))
			}
			c.RemovedDevices = slices.DeleteFunc(c.RemovedDevices, func(id string) bool { return id == d.ID })
			maps.DeleteFunc(c.RemovedAgents, func(_, id string) bool { return id == d.ID }) // the same machine: its agents are its own
		}
		if ac.take {
			took = takeRemovedAgents(c, d.Agents)
		}
		c.Devices = append(c.Devices, d)
		at = len(c.Devices) - 1
		return nil
	}, func(c *gateway.Config) bool { return c.Device(d.ID) != nil })
	if err != nil {
		return flagNamed(err, at, ac.flags)
	}
	if already {
		fmt.Fprintln(ac.stdout, "device "+d.ID+" is in the file already, as asked: "+scopes(d))
		return nil
	}
	fmt.Fprintln(ac.stdout, "added device "+d.ID+": "+scopes(d))
	sayTook(ac.stdout, d.ID, took)
	if len(d.Read) > 0 || len(d.Write) > 0 {
		fmt.Fprintf(ac.stderr, "next: %s\n", ac.config.hint("token issue "+d.ID))
		return nil
	}
	what := "it can do nothing until given scopes"
	if d.KG != "none" || d.Admin {
		what = "it can read and write no wing until given some"
	}
	fmt.Fprintf(ac.stderr, "devbox-config: warning: device %s has no --read and no --write wings: %s; give them with '%s'\n",
		d.ID, what, ac.config.hint("device set "+d.ID+" --read WINGS --write WINGS [--kg read|write] [--agents NAMES] [--admin]"))
	return nil
}

// takeFlag is --take-removed-agents, which `device add` and `device set`
// share: an agent another device had (gateway's removed_agents) is
// refused unless it is given.
func takeFlag(f *pflag.FlagSet, take *bool) {
	f.BoolVar(take, "take-removed-agents", false, "let --agents take an agent another device had, removed or dropped by 'device set' (a machine replacing a lost one), or one that looks like it: this device reads every ask ever addressed to it, old ones included, and can answer them")
}

// takeRemovedAgents forgets, of removed_agents, those each of agents is
// or looks like (gateway.Config.RemovedAgent): the device given them
// takes them over. It is each so taken, as "AGENT (removed device ID)"
// or "AGENT (device ID, which dropped it)".
func takeRemovedAgents(c *gateway.Config, agents []string) []string {
	var took []string
	for _, a := range agents {
		for name, was := c.RemovedAgent(a); was != ""; name, was = c.RemovedAgent(a) {
			took = append(took, fmt.Sprintf("%s (%s)", name, c.FormerHolder(was)))
			delete(c.RemovedAgents, name)
		}
	}
	return took
}

// keepDropped remembers in removed_agents each of before that device id
// no longer has (after), removed with it or dropped by `device set`:
// another device given one would read every ask ever addressed to it.
// Those it has again are its own once more.
func keepDropped(c *gateway.Config, id string, before, after []string) {
	maps.DeleteFunc(c.RemovedAgents, func(a, was string) bool { return was == id && slices.Contains(after, a) })
	for _, a := range before {
		if slices.Contains(after, a) {
			continue
		}
		if c.RemovedAgents == nil {
			c.RemovedAgents = map[string]string{}
		}
		c.RemovedAgents[a] = id
	}
}

// sayTook says which agents other devices had device id took over.
func sayTook(w io.Writer, id string, took []string) {
	if len(took) > 0 {
		fmt.Fprintf(w, "device %s took over %s: it reads every ask ever addressed to them, old ones included\n", id, strings.Join(took, ", "))
	}
}

// flagNamed is err, a refusal of a field of devices[at] (the device the
// command adds or changes) named by the flag that set it: "--kg: ...", not
// "FILE: devices[1].kg: ...". Any other error is returned as it is.
func flagNamed(err error, at int, flags *pflag.FlagSet) error {
	prefix := fmt.Sprintf("devices[%d].", at)
	for e := err; e != nil; e = errors.Unwrap(e) {
		rest, ok := strings.CutPrefix(e.Error(), prefix)
		if !ok {
			continue
		}
		field, msg, _ := strings.Cut(rest, ": ")
		field, _, _ = strings.Cut(field, "[")
		name := strings.ReplaceAll(field, "_", "-")
		switch {
		case field == "id":
			return failed(fmt.Errorf("the device id: %s", msg))
		case flags.Lookup(name) == nil:
			return err
		}
		return failed(fmt.Errorf("--%s: %s", name, msg))
	}
	return err
}

// trimLists drops the spaces around each item of d's list flags: "--read
// 'wing_a, wing_b'" (the comma-space habit) means wing_a and wing_b, not
// a glob " wing_b" that never matches.
func trimLists(d *gateway.Device) {
	for _, list := range [][]string{d.Read, d.Write, d.Agents, d.Trusts} {
		for i := range list {
			list[i] = strings.TrimSpace(list[i])
		}
	}
}

// newDeviceSetCmd is `gateway device set ID`: the scope flags given
// replace the device's, the rest (its tokens above all) stay.
func newDeviceSetCmd(g *gatewayConfig, stdout io.Writer) *cobra.Command {
	var given gateway.Device
	var take bool
	c := &cobra.Command{
		Use: "set ID", Short: "Change a device's scopes in place (only the flags given; its tokens stay)", Args: exactArgs(1),
	}
	deviceFlags(c.Flags(), &given)
	takeFlag(c.Flags(), &take)
	c.RunE = func(_ *cobra.Command, args []string) error {
		return setDevice(g, stdout, c.Flags(), given, take, args[0])
	}
	return c
}

// setDevice is `gateway device set ID`: each changed flag's value replaces
// the device's (--write ” clears the writes), validated like the whole
// config, under its lock.
func setDevice(g *gatewayConfig, stdout io.Writer, f *pflag.FlagSet, given gateway.Device, take bool, id string) error {
	set := func(d *gateway.Device) map[string]func() {
		return map[string]func(){
			"label": func() { d.Label = given.Label }, "read": func() { d.Read = given.Read }, "write": func() { d.Write = given.Write },
			"kg": func() { d.KG = given.KG }, "agents": func() { d.Agents = given.Agents },
			"admin": func() { d.Admin = given.Admin }, "coordinator": func() { d.Coordinator = given.Coordinator },
			"bulk-delete": func() { d.BulkDelete = given.BulkDelete },
			"trusts": func() {
				if d.Trusts = given.Trusts; len(given.Trusts) == 0 {
					d.Trusts, d.Untrusted = nil, "" // every device again: nothing is untrusted
				}
			},
			"untrusted": func() { d.Untrusted = given.Untrusted },
		}
	}
	changed := func(d *gateway.Device) (n int) {
		for name, apply := range set(d) {
			if f.Changed(name) {
				apply()
				n++
			}
		}
		return n
	}
	if changed(new(gateway.Device)) == 0 { // counted on a throwaway
		return usageError("device set %s: nothing to change; give --label, --read, --write, --kg, --agents, --admin, --coordinator, --bulk-delete, --trusts or --untrusted", id)
	}
	trimLists(&given)
	var after gateway.Device
	var took []string
	at := -1
	err := g.update(func(c *gateway.Config) error {
		d, err := g.deviceIn(c, id)
		if err != nil {
			return err
		}
		at = slices.IndexFunc(c.Devices, func(d gateway.Device) bool { return d.ID == id })
		before := d.Agents
		changed(d)
		keepDropped(c, id, before, d.Agents)
		if take {
			took = takeRemovedAgents(c, d.Agents)
		}
		after = *d
		return nil
	}, func(c *gateway.Config) bool { return unchangedBy(c, id, changed) })
	if err != nil {
		return flagNamed(err, at, f)
	}
	fmt.Fprintln(stdout, "device "+id+": "+scopes(after))
	sayTook(stdout, id, took)
	return nil
}

// unchangedBy reports whether device id is in c as apply (the flags of a
// `device set`) would make it: applied again, it changes nothing.
func unchangedBy(c *gateway.Config, id string, apply func(*gateway.Device) int) bool {
	d := c.Device(id)
	if d == nil {
		return false
	}
	x := *d
	apply(&x)
	return x.Label == d.Label && scopes(x) == scopes(*d)
}

// listDevices is `gateway device list`; an agent no session of its
// device could be is warned of on stderr, as the gateway logs it.
func listDevices(g *gatewayConfig, stdout, stderr io.Writer) error {
	c, err := g.load()
	if err != nil {
		return err
	}
	w := newTable(stdout)
	fmt.Fprintln(w, "DEVICE\tLABEL\tREAD\tWRITE\tKG\tAGENTS\tADMIN\tTRUSTS\tTOKENS")
	for _, d := range c.Devices {
		var toks []string
		for _, t := range d.Tokens {
			toks = append(toks, t.ID+":"+tokenState(t))
		}
		trusts := "all"
		if d.Trusts != nil {
			trusts = strings.Join(d.Trusts, ",") + ":" + string(cmp.Or(d.Untrusted, gateway.UntrustedMark))
		}
		agents := cmp.Or(strings.Join(d.Agents, ","), "none")
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%v\t%s\t%s\n", d.ID, d.Label, strings.Join(d.Read, ","), strings.Join(d.Write, ","), d.KG.String(), agents, d.Admin, trusts, strings.Join(toks, " "))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, why := range c.UnreachableAgents() {
		fmt.Fprintf(stderr, "warning: %s: %s\n", g.file, why)
	}
	warnNotInForce(g, stderr)
	return nil
}

// warnNotInForce warns when a gateway runs on the config but is not known
// to enforce the file as it is (it lists what the file says): it refused
// it, said nothing, or this user may not read what it said. One look, no
// wait: a listing changes nothing for the gateway to confirm, and an
// older gateway, which never records, would hold every listing up.
func warnNotInForce(g *gatewayConfig, stderr io.Writer) {
	err := gateway.ConfirmApplied(g.file, time.Time{}, 0, nil)
	var refused *gateway.RefusedError
	switch {
	case err == nil:
		return
	case errors.As(err, &refused):
		err = fmt.Errorf("the running gateway refused this file and enforces its previous config: %w", err)
	case errors.Is(err, gateway.ErrNotConfirmed):
		err = errors.New("it has recorded no read of the file as it is now (a gateway older than this release records none; its log says whether it took it)")
	}
	fmt.Fprintf(stderr, "warning: %s: this lists the file; the running gateway is not known to enforce it: %v\n", g.file, err)
}

// tokenState is a token's state for `device list`: live, revoked or
// its expiry.
func tokenState(t gateway.Token) string {
	switch {
	case t.Revoked:
		return "revoked"
	case t.Expires != nil:
		return "expires " + t.Expires.Format(time.DateOnly)
	}
	return "live"
}

// removeDevice is `gateway device remove ID`. A device another trusts
// stays until no trusted set names it: the command that drops it from
// each is the fix.
func removeDevice(g *gatewayConfig, stdout io.Writer, id string) error {
	already := false
	err := g.update(func(c *gateway.Config) error {
		if already = c.Device(id) == nil && slices.Contains(c.RemovedDevices, id); already {
			return nil // run again (after a refusal): confirmed like the first run
		}
		d, err := g.deviceIn(c, id)
		if err != nil {
			return err
		}
		agents := d.Agents // d is in c.Devices, which the removal shifts
		var by, fixes []string
		for _, d := range c.Devices {
			if d.ID == id || !slices.Contains(d.Trusts, id) {
				continue
			}
			rest := slices.DeleteFunc(slices.Clone(d.Trusts), func(t string) bool { return t == id })
			if len(rest) == 0 {
				rest = []string{d.ID} // only itself, rather than every device
			}
			by = append(by, d.ID)
			fixes = append(fixes, "'"+g.hint("device set "+d.ID+" --trusts "+strings.Join(rest, ","))+"'")
		}
		if len(by) > 0 {
			return failed(fmt.Errorf("device %s is trusted by %s: first drop it from their trusted sets (%s), then remove it", id, strings.Join(by, ", "), strings.Join(fixes, "; ")))
		}
		c.Devices = slices.DeleteFunc(c.Devices, func(d gateway.Device) bool { return d.ID == id })
		c.RemovedDevices = append(c.RemovedDevices, id) // never again silently: its records keep its id
		keepDropped(c, id, agents, nil)
		return nil
	}, func(c *gateway.Config) bool { return c.Device(id) == nil })
	if err != nil {
		return err
	}
	if already {
		fmt.Fprintf(stdout, "device %s is removed (already): its tokens do not work\n", id)
		return nil
	}
	fmt.Fprintf(stdout, "removed device %s: its tokens stop working within a second\n", id)
	return nil
}

// scopes says what a device may do, for `gateway device add` and `set`.
func scopes(d gateway.Device) string {
	list := func(globs []string) string {
		if len(globs) == 0 {
			return "none"
		}
		return strings.Join(globs, ",")
	}
	s := "read " + list(d.Read) + "; write " + list(d.Write) + "; kg " + d.KG.String() + "; agents " + list(d.Agents)
	if d.Admin {
		s += "; admin"
	}
	if d.Coordinator {
		s += "; coordinator"
	}
	if d.BulkDelete {
		s += "; bulk delete"
	}
	if d.Trusts != nil {
		s += "; trusts " + list(d.Trusts) + " (" + string(cmp.Or(d.Untrusted, gateway.UntrustedMark)) + " the rest)"
	}
	return s
}
