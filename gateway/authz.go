package gateway

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// Decision is the outcome of authorizing one tools/call.
type Decision struct {
	Allow bool
	Rule  string // the rule that decided, for the denial's data and the audit log
	Wing  string // the wing the call is about ("" if none)
	// Filter: results must be cut to the device's readable wings.
	Filter bool
	// Events: event results must be cut to the device's agents.
	Events bool
}

var (
	writeTools   = map[string]bool{"add_drawer": true, "checkpoint": true, "diary_write": true, "update_drawer": true, "create_tunnel": true}
	readWingless = map[string]bool{"search": true, "check_duplicate": true, "list_drawers": true, "list_wings": true,
		"list_rooms": true, "get_taxonomy": true, "status": true, "diary_read": true}
	kgRead     = map[string]bool{"kg_query": true, "kg_timeline": true, "kg_stats": true}
	kgWrite    = map[string]bool{"kg_add": true, "kg_invalidate": true, "kg_supersede": true}
	coordWrite = map[string]bool{"event_append": true, "event_ack": true, "patch_submit": true, "task_create": true, "artifact_put": true}
	coordRead  = map[string]bool{"event_list": true, "event_wait": true, "artifact_get": true}
	plainAgent = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.-]{1,32}$`) })
)

func allow(rule, wing string) Decision { return Decision{Allow: true, Rule: rule, Wing: wing} }

func deny(rule, wing string) Decision { return Decision{Rule: rule, Wing: wing} }

// Authorize decides a tools/call by the table, deny by default.
// drawerWing is the wing of the drawer a by-id call names (looked up on
// the upstream first; "" if not found).
func Authorize(d *Device, tool string, args map[string]any, drawerWing string) Decision {
	t := strings.TrimPrefix(tool, "mempalace_")
	str := func(k string) string { s, _ := args[k].(string); return s }
	switch {
	case t == "get_drawer":
		if drawerWing == "" {
			return allow("read:by-id(not found)", "") // nothing to leak
		}
		if match(d.Read, drawerWing) {
			return allow("read:"+drawerWing, drawerWing)
		}
		return deny("read globs do not match the drawer's wing", drawerWing)
	case writeTools[t]:
		var wings []string
		switch t {
		case "diary_write":
			w := str("wing")
			if w == "" {
				w = "wing_" + strings.ToLower(str("agent_name"))
			}
			wings = []string{w}
		case "update_drawer":
			wings = []string{drawerWing}
			if w := str("wing"); w != "" {
				wings = append(wings, w) // moving a drawer needs both
			}
		case "create_tunnel":
			wings = []string{str("source_wing"), str("target_wing")}
		case "checkpoint":
			items, _ := args["items"].([]any)
			for _, it := range items {
				m, _ := it.(map[string]any)
				w, _ := m["wing"].(string)
				wings = append(wings, w)
			}
			if dm, ok := args["diary"].(map[string]any); ok {
				w, _ := dm["wing"].(string)
				if w == "" {
					a, _ := dm["agent_name"].(string)
					w = "wing_" + strings.ToLower(a)
				}
				wings = append(wings, w)
			}
		default:
			wings = []string{str("wing")}
		}
		for _, w := range wings {
			if w == "" || !match(d.Write, w) {
				return deny("write globs do not match the target wing", w)
			}
		}
		return allow("write:"+strings.Join(wings, ","), wings[0])
	case readWingless[t]:
		if len(d.Read) == 0 {
			return deny("no read scope", "")
		}
		w := str("wing")
		if t == "diary_read" && w == "" {
			w = "wing_" + strings.ToLower(str("agent_name"))
		}
		if w != "" {
			if !match(d.Read, w) {
				return deny("read globs do not match the wing", w)
			}
			return Decision{Allow: true, Rule: "read:" + w, Wing: w, Filter: true}
		}
		return Decision{Allow: true, Rule: "read:filtered", Filter: true}
	case kgRead[t]:
		if d.KG == "read" || d.KG == "write" {
			return allow("kg:read", "")
		}
		return deny("no knowledge-graph read grant", "")
	case kgWrite[t]:
		if d.KG == "write" {
			return allow("kg:write", "")
		}
		return deny("no knowledge-graph write grant", "")
	case coordWrite[t]:
		from := str("from_agent")
		if t == "artifact_put" {
			from = str("created_by")
		}
		for _, a := range d.Agents {
			if a == from {
				return allow("agent:"+from, "")
			}
		}
		return deny(fmt.Sprintf("%q is not one of this device's agents", from), "")
	case coordRead[t]:
		if len(d.Agents) == 0 && !d.Coordinator {
			return deny("no coordination identity", "")
		}
		return Decision{Allow: true, Rule: "coordination:read", Events: !d.Coordinator}
	}
	// mine, sync, delete_*, hook_settings, reconnect and unknown tools.
	if d.Admin {
		return allow("admin", "")
	}
	return deny("admin only", "")
}

// StampProvenance sets added_by = "<agent>/<label>/<device id>" from the
// credential on add_drawer and checkpoint, whatever the client sent. The
// agent segment is kept from the client's own value only if it is a short
// plain name; anything else is untrusted and becomes "mcp".
func StampProvenance(d *Device, tool string, args map[string]any) {
	t := strings.TrimPrefix(tool, "mempalace_")
	if t != "add_drawer" && t != "checkpoint" {
		return
	}
	agent := "mcp"
	if a, ok := args["added_by"].(string); ok {
		first, _, _ := strings.Cut(a, "/")
		if plainAgent().MatchString(first) {
			agent = first
		}
	}
	label := d.Label
	if label == "" || strings.Contains(label, "/") {
		label = "-"
	}
	args["added_by"] = agent + "/" + label + "/" + d.ID
}
