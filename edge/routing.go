package edge

import "strings"

// Class is how a tool call is routed (RFC 001 §4.2; the table).
type Class int

const (
	// Write: local first, the agent gets the local result, enqueued for the
	// primary if the wing is replicated. Unknown tools are writes: treating
	// an unclassified tool as a read would silently drop a write, as
	// upstream's classify_tool does with kg_supersede (RFC 001 §4.2).
	Write Class = iota
	// MergedRead: both in parallel, merged; local only (degraded) when the
	// primary is down.
	MergedRead
	// PrimaryFirst: the primary; the local palace on failure (degraded).
	// KG reads are not unioned: invalidate/supersede are order-dependent.
	PrimaryFirst
	// ByID: local; the primary if not found locally.
	ByID
	// LocalOnly: never proxied (§7.2: sync must never reach the primary;
	// mine would stall the single-writer primary; deletes stay local).
	LocalOnly
	// Coordination: the primary's log only, never the local one; writes go
	// through the outbox and are sent at once.
	Coordination
)

func (c Class) String() string {
	return [...]string{"write", "merged-read", "primary-first", "by-id", "local-only", "coordination"}[c]
}

// routes is the explicit table, keyed by tool name without "mempalace_".
var routes = map[string]Class{
	"search": MergedRead, "check_duplicate": MergedRead, "diary_read": MergedRead, "list_drawers": MergedRead,

	"kg_query": PrimaryFirst, "kg_timeline": PrimaryFirst, "kg_stats": PrimaryFirst, "status": PrimaryFirst,
	"list_wings": PrimaryFirst, "list_rooms": PrimaryFirst, "get_taxonomy": PrimaryFirst, "get_aaak_spec": PrimaryFirst,
	"traverse": PrimaryFirst, "find_tunnels": PrimaryFirst, "graph_stats": PrimaryFirst, "list_tunnels": PrimaryFirst,
	"list_hallways": PrimaryFirst, "follow_tunnels": PrimaryFirst, "find_duplicates": PrimaryFirst,

	"get_drawer": ByID,

	"add_drawer": Write, "checkpoint": Write, "update_drawer": Write, "diary_write": Write,
	"kg_add": Write, "kg_invalidate": Write, "kg_supersede": Write, "create_tunnel": Write,

	"mine": LocalOnly, "sync": LocalOnly, "reconnect": LocalOnly, "hook_settings": LocalOnly,
	"memories_filed_away": LocalOnly, "delete_drawer": LocalOnly, "delete_drawers": LocalOnly,
	"delete_by_source": LocalOnly, "delete_tunnel": LocalOnly, "delete_hallway": LocalOnly,
	"mesh_peers": LocalOnly,

	"event_append": Coordination, "event_list": Coordination, "event_wait": Coordination, "event_ack": Coordination,
	"artifact_put": Coordination, "artifact_get": Coordination, "patch_submit": Coordination, "task_create": Coordination,
}

// Route classifies a tool. Unknown tools are writes.
func Route(tool string) Class {
	if c, ok := routes[strings.TrimPrefix(tool, "mempalace_")]; ok {
		return c
	}
	return Write
}

// coordinationWrites are the coordination tools that append to the log.
var coordinationWrites = map[string]bool{"event_append": true, "event_ack": true, "artifact_put": true, "patch_submit": true, "task_create": true}

// IsCoordinationWrite reports whether a coordination tool writes.
func IsCoordinationWrite(tool string) bool {
	return coordinationWrites[strings.TrimPrefix(tool, "mempalace_")]
}

// IsRead reports a tool that only reads (safe to send twice): merged,
// primary-first and by-id reads, and coordination reads. Unknown tools are
// writes.
func IsRead(tool string) bool {
	switch Route(tool) {
	case MergedRead, PrimaryFirst, ByID:
		return true
	case Coordination:
		return !IsCoordinationWrite(tool)
	}
	return false
}
