package edge

import "cmp"

// Stamp is the added_by a write bound for the primary carries:
// "<agent>/<label>/<device>", only when MEMPALACE_ORIGIN_DEVICE is set
// (RFC 001 §7.3.4, §7.3.5): never a hostname, container id or
// placeholder; "" (nothing stamped) without one. The local palace is
// never stamped; a tool that takes no added_by is never stamped (decide).
func (c Config) Stamp() string {
	if c.OriginDevice == "" {
		return ""
	}
	return cmp.Or(c.Agent, "mcp") + "/" + cmp.Or(c.OriginLabel, "-") + "/" + c.OriginDevice
}
