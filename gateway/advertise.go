package gateway

import (
	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
)

// deviceInfo is what the gateway tells a device about itself
// (deviceinfo: every authenticated /mcp answer's header, and the
// initialize result's capability).
func (c *Config) deviceInfo(d *Device) deviceinfo.Info {
	return deviceinfo.Info{
		ID: d.ID, Label: d.Label, Admin: d.Admin, BulkDelete: d.BulkDelete, DeleteCap: c.DeleteCapOrDefault(),
		Read: d.Read, Write: d.Write, KG: string(kgOrNone(d.KG)), Agents: d.Agents, Coordinator: d.Coordinator,
		Refuses: catalogue.NeverNames(), Trash: true, TrashRetentionDays: int(c.TrashRetention().Hours() / 24),
	}
}

func kgOrNone(g KGGrant) KGGrant {
	if g == "" {
		return KGNone
	}
	return g
}
