package edge

import "github.com/joakimp/devbox-config/catalogue"

// stamp sets added_by = "<agent>/<label>/<device>" on a write bound for
// the primary, only when MEMPALACE_ORIGIN_DEVICE is set (RFC 001 §7.3.4,
// §7.3.5): never a hostname, container id or placeholder; the local palace
// is never stamped.
func (e *Edge) stamp(args map[string]any) {
	if e.cfg.OriginDevice == "" {
		return
	}
	label := e.cfg.OriginLabel
	if label == "" {
		label = "-"
	}
	agent := e.cfg.Agent
	if agent == "" {
		agent = "mcp"
	}
	args["added_by"] = agent + "/" + label + "/" + e.cfg.OriginDevice
}

// stamps reports a write whose payload gets added_by: a tool that takes
// it (add_drawer, checkpoint), with an origin device configured.
func (e *Edge) stamps(rec catalogue.Tool) bool {
	return e.cfg.OriginDevice != "" && rec.Accepts("added_by")
}
