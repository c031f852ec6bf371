package catalogue

import "sync"

// Parameter lists shared by several tools.
var (
	eventFilter = []string{"stream", "room", "type", "to_agent", "from_agent", "correlation_id", "status", "since_event_id", "since_created_at", "limit", "topic", "writer"}
	// topic310 is the logstream's topic routing (3.10.0).
	topic310 = map[string]string{"topic": "3.10.0"}
)

// tools is the catalogue: every tool of mempalace-surface §1 (3.6.0, 3.7.0,
// 3.9.0 and the dev schema) and of 3.11.0's own tools/list, in the
// reference's order, then the later ones. Params are the union over
// releases (§1.1, §1.3, 3.11.0); ParamSince dates the later ones: the
// reference's release where it names one, else 3.11.0, the first served
// release seen with it.
var tools = [...]Tool{
	{Name: "status", Since: "3.6.0", Reads: true, Route: PrimaryFirst, Gate: ReadWing, Filter: FilterWingCounts},
	{Name: "list_wings", Since: "3.6.0", Reads: true, Route: PrimaryFirst, Gate: ReadWing, Filter: FilterWingCounts},
	{Name: "list_rooms", Since: "3.6.0", Params: []string{"wing"}, Reads: true, Route: PrimaryFirst, Wings: ArgWing, Gate: ReadWing, Filter: FilterRooms},
	{Name: "get_taxonomy", Since: "3.6.0", Reads: true, Route: PrimaryFirst, Gate: ReadWing, Filter: FilterWingCounts},
	{Name: "get_aaak_spec", Since: "3.6.0", Reads: true, Route: PrimaryFirst, Gate: ReadStatic,
		Why: "upstream READ_TOOLS; the answer is the AAAK dialect's text and holds no palace data, so any read scope may have it (the gateway used to require admin)"},
	{Name: "kg_query", Since: "3.6.0", Params: []string{"entity", "as_of", "direction"}, Reads: true, Route: PrimaryFirst, Wings: KnowledgeGraph, Gate: KGRead, Records: RecordFacts},
	{Name: "kg_add", Since: "3.6.0", Params: []string{"subject", "predicate", "object", "valid_from", "valid_to", "source_closet", "source_file", "source_drawer_id"}, Route: Write, Wings: KnowledgeGraph, Replay: FactAdd, Gate: KGWrite},
	{Name: "kg_invalidate", Since: "3.6.0", Params: []string{"subject", "predicate", "object", "ended"}, Route: Write, Wings: KnowledgeGraph, Replay: FactClose, Gate: KGWrite},
	{Name: "kg_supersede", Since: "3.6.0", Params: []string{"subject", "predicate", "old_object", "new_object", "at"}, Route: Write, Wings: KnowledgeGraph, Replay: FactClose, Gate: KGWrite,
		Why: "absent from upstream's classify_tool sets (it would be 'unknown'): it is a write"},
	{Name: "kg_timeline", Since: "3.6.0", Params: []string{"entity", "limit", "offset"}, ParamSince: map[string]string{"limit": "3.10.0", "offset": "3.10.0"}, Reads: true, Route: PrimaryFirst, Wings: KnowledgeGraph, Gate: KGRead, Records: RecordTimeline},
	{Name: "kg_stats", Since: "3.6.0", Reads: true, Route: PrimaryFirst, Wings: KnowledgeGraph, Gate: KGRead},
	{Name: "traverse", Since: "3.6.0", Params: []string{"start_room", "max_hops"}, Reads: true, Route: PrimaryFirst, Gate: ReadAllWings, Why: graphWhy},
	{Name: "find_tunnels", Since: "3.6.0", Params: []string{"wing_a", "wing_b"}, Reads: true, Route: PrimaryFirst, Gate: ReadAllWings, Why: graphWhy},
	{Name: "graph_stats", Since: "3.6.0", Reads: true, Route: PrimaryFirst, Gate: ReadAllWings, Why: graphWhy},
	{Name: "mesh_peers", Since: "3.7.0", Reads: true, Route: LocalOnly, Gate: Admin,
		Why: "this palace's own replica estate (RFC 004): asked of the local palace; on the gateway it describes the primary's estate, an operator's concern"},
	{Name: "create_tunnel", Since: "3.6.0", Params: []string{"source_wing", "source_room", "target_wing", "target_room", "label", "source_drawer_id", "target_drawer_id"}, Route: Write, Wings: TunnelWings, Replay: Resend, Gate: WriteWing},
	{Name: "list_tunnels", Since: "3.6.0", Params: []string{"wing"}, Reads: true, Route: PrimaryFirst, Wings: ArgWing, Gate: ReadAllWings, Why: graphWhy, Records: RecordTunnels},
	{Name: "delete_tunnel", Since: "3.6.0", Params: []string{"tunnel_id"}, Route: Destructive, Gate: Admin},
	{Name: "list_hallways", Since: "3.6.0", Params: []string{"wing", "limit", "offset"}, ParamSince: map[string]string{"limit": "3.11.0", "offset": "3.11.0"}, Reads: true, Route: PrimaryFirst, Wings: ArgWing, Gate: ReadAllWings, Why: graphWhy},
	{Name: "delete_hallway", Since: "3.6.0", Params: []string{"hallway_id"}, Route: Destructive, Gate: Admin},
	{Name: "follow_tunnels", Since: "3.6.0", Params: []string{"wing", "room"}, Reads: true, Route: PrimaryFirst, Wings: ArgWing, Gate: ReadAllWings, Why: graphWhy, Records: RecordConnections},
	{Name: "search", Since: "3.6.0", Params: []string{"query", "limit", "wing", "room", "source_file", "since", "before", "max_distance", "context", "candidate_strategy", "cli_compatible", "include_media", "query_task"},
		ParamSince: map[string]string{"cli_compatible": "3.9.0", "candidate_strategy": "3.11.0", "include_media": "3.11.0", "query_task": "3.11.0"}, Reads: true, Route: MergedRead, Wings: ArgWing, Gate: ReadWing, Filter: FilterHits, Records: RecordHits},
	{Name: "check_duplicate", Since: "3.6.0", Params: []string{"content", "threshold"}, Reads: true, Route: MergedRead, Gate: ReadWing, Filter: FilterMatches, Records: RecordMatches},
	{Name: "add_drawer", Since: "3.6.0", Params: []string{"wing", "room", "content", "source_file", "added_by"}, Route: Write, Wings: ArgWing, Replay: ServerDeduped, Gate: WriteWing},
	{Name: "checkpoint", Since: "3.6.0", Params: []string{"items", "diary", "dedup_threshold", "added_by"}, Route: Write, Wings: CheckpointWings, Replay: ServerDeduped, Gate: WriteWing, Filter: FilterCheckpoint, Records: RecordCheckpoint,
		Why: "its diary half has no server guard (§7.6); the items are content-addressed: after ambiguity the edge looks the diary up by its suffix and, if it landed, resends the items alone"},
	{Name: "delete_drawer", Since: "3.6.0", Params: []string{"drawer_id"}, Route: Destructive, Gate: Admin},
	{Name: "mine", Since: "3.6.0", Params: []string{"source", "mode", "wing", "agent", "limit", "dry_run", "extract", "include_ignored", "include_subagents"},
		ParamSince: map[string]string{"include_ignored": "3.11.0", "include_subagents": "3.11.0"}, Route: Maintenance, Gate: Never, LongJob: "mining",
		Why: "§6.2 (no remote mine): a mine holds the primary's single write slot for its whole run, and reads files on the primary's host, not the caller's; the gateway refuses it for every device, admin included (stricter than §6.2's admin exception)"},
	{Name: "delete_by_source", Since: "3.6.0", Params: []string{"source_file", "dry_run"}, Route: Destructive, Gate: Admin},
	{Name: "sync", Since: "3.6.0", Params: []string{"project_dir", "wing", "apply"}, Route: Maintenance, Gate: Never, LongJob: "syncing",
		Why: "§7.2: sync prunes against this machine's files; on a shared primary it deletes every other machine's drawers. The gateway refuses it for every device, admin included (stricter than §6.2's admin exception)"},
	{Name: "get_drawer", Since: "3.6.0", Params: []string{"drawer_id"}, Reads: true, Route: ByID, Wings: DrawerWing, Gate: ReadByID, Records: RecordDrawer},
	{Name: "list_drawers", Since: "3.6.0", Params: []string{"wing", "room", "since", "before", "limit", "offset"}, Reads: true, Route: MergedRead, Wings: ArgWing, Gate: ReadWing, Filter: FilterDrawers, Records: RecordDrawers},
	{Name: "update_drawer", Since: "3.6.0", Params: []string{"drawer_id", "content", "wing", "room"}, Route: Write, Wings: DrawerWing, Replay: Resend, Gate: WriteWing},
	{Name: "diary_write", Since: "3.6.0", Params: []string{"agent_name", "entry", "topic", "wing", "content"}, Route: Write, Wings: DiaryWing, Replay: DiarySuffix, Gate: WriteWing, Identity: "agent_name"},
	{Name: "diary_read", Since: "3.6.0", Params: []string{"agent_name", "last_n", "wing"}, Reads: true, Route: MergedRead, Wings: DiaryWing, Gate: ReadWing, Identity: "agent_name", Filter: FilterDiary, Records: RecordDiary},
	{Name: "hook_settings", Since: "3.6.0", Params: []string{"silent_save", "desktop_toast"}, Route: LocalOnly, Gate: Admin},
	{Name: "memories_filed_away", Since: "3.6.0", Route: LocalOnly, Gate: Admin,
		Why: "consumes this machine's hook marker: a write (the dev release moved it to WRITE_TOOLS)"},
	{Name: "reconnect", Since: "3.6.0", Route: Maintenance, Gate: Admin,
		Why: "3.11 keeps it in read-only mode (it changes no palace data, it reopens the palace), but it acts on the server process: the edge keeps it local, the gateway admin-only"},
	{Name: "event_append", Since: "3.7.0", Params: []string{"type", "stream", "room", "from_agent", "to_agent", "correlation_id", "branch", "base_commit", "status", "body", "metadata", "artifact_ids", "topic"}, ParamSince: topic310, Route: CoordinationWrite, Replay: EventLookup, OpStamp: true, Gate: AgentWrite, Identity: "from_agent"},
	{Name: "event_list", Since: "3.7.0", Params: append(eventFilter, "preview", "before_event_id", "order", "slim"),
		ParamSince: map[string]string{"topic": "3.10.0", "before_event_id": "3.10.0", "order": "3.10.0", "writer": "3.11.0", "slim": Dev}, Reads: true, Route: CoordinationRead, Gate: CoordinationGrant, Filter: FilterEvents, Records: RecordEvents},
	{Name: "event_wait", Since: "3.7.0", Params: append(eventFilter, "timeout_ms"), ParamSince: map[string]string{"topic": "3.10.0", "writer": "3.11.0"}, Reads: true, Route: CoordinationRead, Gate: CoordinationGrant, Filter: FilterEvents, Records: RecordEvents},
	{Name: "event_ack", Since: "3.7.0", Params: []string{"event_id", "from_agent", "status", "body", "topic"}, ParamSince: topic310, Route: CoordinationWrite, Replay: AckLookup, Gate: AgentWrite, Identity: "from_agent"},
	{Name: "artifact_put", Since: "3.7.0", Params: []string{"kind", "content", "created_by", "metadata"}, Route: CoordinationWrite, Replay: Unrepeatable, OpStamp: true, Gate: AgentWrite, Identity: "created_by",
		Why: "no MemPalace tool lists artifacts, so a lost answer cannot be looked up (its edge_op_id is stamped all the same): only the gateway's op-id ledger makes a resend exactly-once"},
	{Name: "artifact_get", Since: "3.7.0", Params: []string{"artifact_id"}, Reads: true, Route: CoordinationRead, Gate: CoordinationGrant, Records: RecordArtifact},
	{Name: "patch_submit", Since: "3.7.0", Params: []string{"content", "from_agent", "stream", "room", "to_agent", "correlation_id", "branch", "base_commit", "body", "metadata", "topic"}, ParamSince: topic310, Route: CoordinationWrite, Replay: EventLookup, OpStamp: true, Gate: AgentWrite, Identity: "from_agent"},
	{Name: "task_create", Since: "3.9.0", Params: []string{"project", "from_agent", "to_agent", "goal", "branch", "base_commit", "done"}, Route: CoordinationWrite, Replay: Unrepeatable, Gate: AgentWrite, Identity: "from_agent",
		Why: "no metadata argument, so no edge_op_id can ride in it (MemPalace refuses unknown arguments): without the gateway's op-id ledger a lost answer may repeat it"},
	{Name: "find_duplicates", Since: Dev, Params: []string{"wing", "room", "threshold", "max_clusters"}, Reads: true, Route: PrimaryFirst, Wings: ArgWing, Gate: ReadAllWings, Why: graphWhy},
	{Name: "get_drawers", Since: "3.11.0", Params: []string{"drawer_ids"}, Reads: true, Route: ByID, Gate: ReadWing, Filter: FilterByID,
		Why: "a batch by id: the local palace answers, and the primary, in one get_drawers, for the ids the local palace lacks; the gateway forwards it once and answers each drawer of a wing the device cannot read as an id that names none", Records: RecordHits},
	{Name: "delete_drawers", Since: "3.11.0", Params: []string{"drawer_ids"}, Route: Destructive, Gate: Admin},
}

// graphWhy is the decision for the room-graph and audit reads, which the
// edge treated as reads and the gateway as admin-only writes.
const graphWhy = "a read (upstream READ_TOOLS), so the edge asks the primary first and never queues it; its answer describes rooms, tunnels or clusters across wings in shapes the gateway cannot cut to a device's wings, so the gateway lets only a device that reads every wing call it, instead of admin only"

var index = sync.OnceValue(func() map[string]Tool {
	m := make(map[string]Tool, len(tools))
	for _, t := range tools {
		m[t.Name] = t
	}
	return m
})
