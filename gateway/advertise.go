package gateway

import (
	"cmp"
	"slices"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/gateway/origin"
)

// deviceInfo is what the gateway tells a device about itself
// (deviceinfo: every authenticated /mcp answer's header, and the
// initialize result's capability).
func (c *Config) deviceInfo(d *Device) deviceinfo.Info {
	return deviceinfo.Info{
		ID: d.ID, Label: d.Label, Admin: d.Admin, BulkDelete: d.BulkDelete, DeleteCap: c.DeleteCapOrDefault(),
		Read: d.Read, Write: d.Write, KG: string(cmp.Or(d.KG, KGNone)), Agents: d.Agents, Coordinator: d.Coordinator,
		Refuses: catalogue.NeverNames(), Trash: true, TrashRetentionDays: int(c.TrashRetention().Hours() / 24),
		Origins: origin.Version, Trusts: trustedSet(d), Untrusted: string(cmp.Or(d.Untrusted, UntrustedMark)), Removed: recentlyRemoved(c.RemovedDevices), InstructionWing: c.InstructionWing,
	}
}

// headerRemoved is how many removed devices a device header names at most.
const headerRemoved = 32

// recentlyRemoved is the last headerRemoved of removed (`device remove`
// appends): the header rides on every answer, and every removed id in it
// grew it past what Node's HTTP client takes (16 KiB, ~450 uuid ids;
// attack85 F13). The bound is safe: the gateway decides trust for every
// record it answers with (Device.trusts: every removed device, named here
// or not), and the list only narrows what an edge kept from earlier: its
// wake-up view, which the next session that reaches the gateway reads
// again, its records marked, and the writers of the drawers its palace
// took from the primary (edge marks). A view kept across 32 later
// removals without one such session, and a drawer taken before its writer
// was removed with 32 removals since, are the window left.
func recentlyRemoved(removed []string) []string {
	return removed[max(0, len(removed)-headerRemoved):]
}

// trustedSet is the devices d trusts, itself included (nil: every one).
func trustedSet(d *Device) []string {
	if d.Trusts == nil {
		return nil
	}
	if slices.Contains(d.Trusts, d.ID) {
		return d.Trusts
	}
	return append([]string{d.ID}, d.Trusts...)
}
