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
		Origins: origin.Version, Trusts: trustedSet(d), Untrusted: string(cmp.Or(d.Untrusted, UntrustedMark)), Removed: c.RemovedDevices, InstructionWing: c.InstructionWing,
	}
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
