package catalogue

import (
	"slices"
	"strconv"
	"strings"
)

// Prefix is the namespace every MemPalace tool name carries.
const Prefix = "mempalace_"

// Route is how the edge answers a tool call (RFC 001 §4.2).
type Route int

const (
	// Write: the local palace first; the agent gets the local result, and
	// the call is queued for the primary when its wing replicates. Unknown
	// tools are writes.
	Write Route = iota
	// MergedRead: both palaces in parallel, merged; local only (degraded)
	// while the primary is down.
	MergedRead
	// PrimaryFirst: the primary; the local palace on failure (degraded).
	// KG reads are not unioned: invalidate/supersede are order-dependent.
	PrimaryFirst
	// ByID: the local palace; the primary for an id it does not have.
	ByID
	// LocalOnly: this machine's own settings and state; never proxied.
	LocalOnly
	// Maintenance: jobs on the local palace (mine, sync, reconnect); never
	// proxied (§7.2: sync must never reach the primary, mine would stall
	// the single-writer primary).
	Maintenance
	// Destructive: deletes apply locally; the edge queues a drawer delete
	// for the primary only when the gateway says the device is admin
	// (edge/tombstone.go), and the gateway keeps it in its trash.
	Destructive
	// CoordinationRead: the primary's coordination log only.
	CoordinationRead
	// CoordinationWrite: an append to the primary's log, durable through
	// the outbox and sent at once.
	CoordinationWrite
)

func (r Route) String() string {
	return [...]string{"write", "merged-read", "primary-first", "by-id", "local-only", "maintenance", "destructive", "coordination-read", "coordination-write"}[r]
}

// Local reports a route the local palace alone answers.
func (r Route) Local() bool { return r == LocalOnly || r == Maintenance || r == Destructive }

// Wings says where a call's wing(s) come from in its arguments.
type Wings int

const (
	// NoWing: the call names no wing (KG, coordination, palace-wide).
	NoWing Wings = iota
	// ArgWing: the "wing" argument (optional for reads).
	ArgWing
	// DiaryWing: "wing", else the agent's diary wing (DiaryWingOf).
	DiaryWing
	// DrawerWing: the wing of the drawer "drawer_id" names (a look-up),
	// plus "wing" when the call moves it.
	DrawerWing
	// TunnelWings: "source_wing" and "target_wing".
	TunnelWings
	// CheckpointWings: every item's "wing", and the diary's wing.
	CheckpointWings
	// KnowledgeGraph: no wing; the policy's kg rule decides.
	KnowledgeGraph
)

// Replay is how the outbox sends a queued write again after a failure
// without making a second copy on the primary.
type Replay int

const (
	// Verbatim: exactly the call the agent made, under its own name
	// (unknown tools: the edge needs no MemPalace internals for them).
	Verbatim Replay = iota
	// Resend: safe to repeat as is.
	Resend
	// ServerDeduped: the server dedupes by content id; identical copies in
	// the queue are one op.
	ServerDeduped
	// FactAdd: an open fact is guarded by the server; a closed fact
	// (valid_to set) is looked up by (subject, predicate, object,
	// valid_from, valid_to) first.
	FactAdd
	// FactClose: in order; after ambiguity or "no open fact", confirm on
	// the primary that the fact is closed.
	FactClose
	// DiarySuffix: §7.6, no server guard: after ambiguity, landed if an
	// entry with its sha256[:12] id suffix is in the primary's diary wing
	// newer than the last entry this outbox knows it wrote there; in a
	// replay of history (join), the n-th of n equal local entries is
	// landed when the primary holds n.
	DiarySuffix
	// EventLookup: after ambiguity, the event carrying this op's
	// metadata.edge_op_id is looked up first (RFC 003 §7.1).
	EventLookup
	// AckLookup: after ambiguity, this sender's ack of the target event is
	// looked up first.
	AckLookup
	// Unrepeatable: a resend would make a second copy and nothing can look
	// the first up (no MemPalace tool lists artifacts; a task carries no
	// op id): after ambiguity it waits in doubt for an operator, unless a
	// gateway's op-id ledger answers the resend from its record.
	Unrepeatable
)

func (r Replay) String() string {
	return [...]string{"verbatim", "resend", "server-deduped", "fact-add", "fact-close", "diary-suffix", "event-lookup", "ack-lookup", "unrepeatable"}[r]
}

// Gate is what the gateway requires of a device for a call (RFC 001 §6).
type Gate int

const (
	// Deny: unknown tools.
	Deny Gate = iota
	// Admin: the admin scope (local-only, maintenance, destructive tools),
	// inside the device's globs: the gateway checks a delete by id against
	// its drawers' wings, and lets the tools with no wing to check only a
	// device whose globs are "*".
	Admin
	// ReadWing: read scope; a named wing must be readable, and answers are
	// filtered to the readable wings.
	ReadWing
	// ReadByID: the named drawer's wing must be readable.
	ReadByID
	// ReadStatic: any read scope; the answer holds no palace data.
	ReadStatic
	// ReadAllWings: answers span wings in shapes the gateway cannot cut,
	// so only a device that may read every wing ("*") may call it.
	ReadAllWings
	// WriteWing: every wing the call touches must be writable.
	WriteWing
	// KGRead, KGWrite: the knowledge-graph grant.
	KGRead
	KGWrite
	// AgentWrite: the identity argument (Tool.Identity) must be one of the
	// device's agents.
	AgentWrite
	// CoordinationGrant: a coordination identity; answers cut to the
	// device's agents unless it is a coordinator.
	CoordinationGrant
	// Never: no device, admin included (mine and sync on a shared primary:
	// RFC 001 §7.2, §6.2's "no remote mine"); the gateway's refusal says
	// where to run them instead.
	Never
)

func (g Gate) String() string {
	return [...]string{"deny", "admin", "read-wing", "read-by-id", "read-static", "read-all-wings", "write-wing", "kg-read", "kg-write", "agent-write", "coordination-read", "never"}[g]
}

// Filter names the answer shape the gateway cuts to what a device may see.
type Filter string

const (
	NoFilter         Filter = ""
	FilterHits       Filter = "hits"        // search: results[].wing
	FilterMatches    Filter = "matches"     // check_duplicate: matches[].wing
	FilterDrawers    Filter = "drawers"     // list_drawers: drawers[].wing
	FilterWingCounts Filter = "wing-counts" // list_wings, status, get_taxonomy: maps keyed by wing
	FilterRooms      Filter = "rooms"       // list_rooms: rooms recomputed over readable wings
	FilterDiary      Filter = "diary"       // diary_read: entries of readable wings
	FilterCheckpoint Filter = "checkpoint"  // checkpoint: duplicates[].matches[].wing
	FilterEvents     Filter = "events"      // event_list, event_wait: events[] to or from the device's agents
	FilterByID       Filter = "by-id"       // get_drawers: results[i] answers drawer_ids[i], an unreadable wing's drawer as an id that names none
)

// Records says where a tool's answer carries records, each of which the
// gateway gives an "origin" (who wrote it: gateway/origin) and the edge
// keeps through a merged read.
type Records string

const (
	NoRecords Records = ""
	// RecordHits: results[], a drawer each (drawer_id): search, get_drawers.
	RecordHits Records = "hits"
	// RecordMatches: matches[], a drawer each (id): check_duplicate.
	RecordMatches Records = "matches"
	// RecordDrawers: drawers[] (drawer_id): list_drawers.
	RecordDrawers Records = "drawers"
	// RecordDrawer: the answer itself is one drawer (drawer_id): get_drawer.
	RecordDrawer Records = "drawer"
	// RecordDiary: entries[] of the answer's agent (timestamp and content
	// identify one): diary_read.
	RecordDiary Records = "diary"
	// RecordFacts: facts[] and its active_facts[], historical_facts[] and
	// future_facts[] (subject, predicate, object, valid_from): kg_query.
	RecordFacts Records = "facts"
	// RecordTimeline: timeline[], facts as RecordFacts: kg_timeline.
	RecordTimeline Records = "timeline"
	// RecordEvents: events[] (id): event_list, event_wait.
	RecordEvents Records = "events"
	// RecordArtifact: the answer's artifact object (id): artifact_get.
	RecordArtifact Records = "artifact"
	// RecordCheckpoint: matches[] of each of duplicates[], a drawer each
	// (id), the matched drawers' text: checkpoint.
	RecordCheckpoint Records = "checkpoint"
	// RecordConnections: the answer itself is a list of connections, each
	// naming the drawer at a tunnel's other end (drawer_id) and repeating
	// its text's first 300 characters (drawer_preview): follow_tunnels.
	RecordConnections Records = "connections"
	// RecordTunnels: the answer itself is a list of tunnels (id), each
	// with the label its writer chose: list_tunnels.
	RecordTunnels Records = "tunnels"
)

func (r Records) String() string { return string(r) }

// Lists names the answer's lists of records ("" for none; the first is
// the one its count counts).
func (r Records) Lists() []string {
	switch r {
	case RecordHits:
		return []string{"results"}
	case RecordMatches, RecordCheckpoint:
		return []string{"matches"}
	case RecordDrawers:
		return []string{"drawers"}
	case RecordDiary:
		return []string{"entries"}
	case RecordFacts:
		return []string{"facts", "active_facts", "historical_facts", "future_facts"}
	case RecordTimeline:
		return []string{"timeline"}
	case RecordEvents:
		return []string{"events"}
	}
	return nil
}

// IsList reports whether the answer itself is the list of records (a
// JSON array): follow_tunnels', list_tunnels'.
func (r Records) IsList() bool { return r == RecordConnections || r == RecordTunnels }

// Within is the answer's list of objects each of which holds the lists
// of records (Lists), "" when the answer itself holds them: a
// checkpoint's duplicates[].
func (r Records) Within() string {
	if r == RecordCheckpoint {
		return "duplicates"
	}
	return ""
}

// Object is the member holding the answer's one record ("." for the
// answer itself, "" when the records are in lists or there are none).
func (r Records) Object() string {
	switch r {
	case RecordDrawer:
		return "."
	case RecordArtifact:
		return "artifact"
	}
	return ""
}

// Tool is one MemPalace tool's record.
type Tool struct {
	// Name without the "mempalace_" prefix.
	Name string
	// Since is the first release that has it ("3.6.0" ... "3.11.0"), or
	// Dev for a tool only upstream's development code has.
	Since string
	// Params is every argument name any release's schema lists; MemPalace
	// rejects the rest (-32602).
	Params []string
	// ParamSince is the release of each parameter added after Since (Dev:
	// not in any served release yet); the others came with the tool.
	// ParamsIn gives one release's list.
	ParamSince map[string]string
	// Reads: the call changes nothing (safe to send twice).
	Reads bool
	Route Route
	Wings Wings
	// Replay applies to writes the edge queues.
	Replay Replay
	// OpStamp: the queued payload carries metadata.edge_op_id, so a lost
	// answer can be looked up (the tool has a metadata argument).
	OpStamp bool
	Gate    Gate
	// Identity is the argument naming the acting agent ("from_agent",
	// "created_by", "agent_name"), for AgentWrite and the diary's checks.
	Identity string
	Filter   Filter
	// Records: where its answer carries records that get an origin.
	Records Records
	// LongJob says what the local palace is doing while at the call
	// ("mining"), for a job of minutes there: mempalace-mcp answers one
	// call at a time, so the edge's reads sent while one is in flight do
	// not ask it. A mine and a sync (which walks every drawer's source file,
	// under the mine lock) are; a reconnect (reopening the palace) is not.
	LongJob string
	// Why records a deliberate decision where the edge, the gateway or
	// upstream's own sets once disagreed.
	Why string
}

// Known reports a record of the catalogue (false for Unknown's answer).
func (t Tool) Known() bool { return t.Since != "" }

// Dev is the release of what only upstream's development code has
// (mempalace-surface §0): later than every numbered release.
const Dev = "dev"

// Checked is the newest release whose own tools/list the catalogue has
// been compared with, by test (testdata/tools-3.11.0.json, and the real
// server in the integration tier).
const Checked = "3.11.0"

// EmbeddingModels are the embedding_model values MemPalace (Checked)
// knows: mempalace/embedding.py's _KNOWN_EMBEDDING_MODELS. It trims and
// lowercases a value before it looks, embeds with minilm for any other
// value, and refuses every write for a near miss of one of these.
func EmbeddingModels() []string {
	return []string{"embeddinggemma", "embeddinggemma2", "minilm", "openai-compat"}
}

// KnownEmbeddingModel reports whether MemPalace takes model as it is
// written (EmbeddingModels, after its trimming and lowercasing).
func KnownEmbeddingModel(model string) bool {
	return slices.Contains(EmbeddingModels(), strings.ToLower(strings.TrimSpace(model)))
}

// In reports whether release has the tool.
func (t Tool) In(release string) bool { return t.Known() && !ReleaseAfter(t.Since, release) }

// ParamsIn lists the arguments release's schema lists for the tool (nil
// if release does not have it).
func (t Tool) ParamsIn(release string) []string {
	if !t.In(release) {
		return nil
	}
	var out []string
	for _, p := range t.Params {
		if since, ok := t.ParamSince[p]; !ok || !ReleaseAfter(since, release) {
			out = append(out, p)
		}
	}
	return out
}

// ReleaseAfter reports whether release a is later than b ("3.10.0" is
// after "3.9.0"; Dev after every numbered release).
func ReleaseAfter(a, b string) bool {
	if a == Dev || b == Dev {
		return a == Dev && b != Dev
	}
	x, y := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(x), len(y)) {
		var m, n int
		if i < len(x) {
			m, _ = strconv.Atoi(x[i])
		}
		if i < len(y) {
			n, _ = strconv.Atoi(y[i])
		}
		if m != n {
			return m > n
		}
	}
	return false
}

// Accepts reports an argument name the tool's schema lists.
func (t Tool) Accepts(arg string) bool { return slices.Contains(t.Params, arg) }

// Lookup finds a tool by its full or bare name. An unknown name gets
// Unknown's record and ok == false.
func Lookup(name string) (Tool, bool) {
	if t, ok := index()[strings.TrimPrefix(name, Prefix)]; ok {
		return t, true
	}
	return Unknown(name), false
}

// QueryLanguage are the tools of mempalace-light-mcp (palace_query,
// palace_exec, palace_coordinate): each takes one query string that can
// carry any palace operation (reads of every wing, writes, deletes, sync,
// mine), so no per-wing grant can authorize one. They have no record:
// the edge treats them as any tool it does not know (a write: local
// first, then the outbox), and the gateway refuses them to every device,
// admins included, naming this reason.
var QueryLanguage = []string{"palace_query", "palace_exec", "palace_coordinate"}

// Unknown is the record for a tool the catalogue does not know: a write
// to the edge, replayed verbatim, denied by the gateway.
func Unknown(name string) Tool {
	return Tool{Name: strings.TrimPrefix(name, Prefix), Route: Write, Replay: Verbatim, Gate: Deny}
}

// All lists every record, in the reference's order.
func All() []Tool { return slices.Clone(tools[:]) }

// DiaryWingOf is MemPalace's default diary wing for an agent: "wing_" and
// the agent name lower-cased (PythonLower), spaces to underscores
// (mempalace-surface §3.6; tools_diary.py: f"wing_{agent_name.replace(' ', '_')}").
func DiaryWingOf(agent string) string {
	return "wing_" + strings.ReplaceAll(PythonLower(agent), " ", "_")
}

// InputSchema is an object schema naming the tool's arguments, for when
// the edge must list the tool without having seen MemPalace's own schema.
func (t Tool) InputSchema() map[string]any {
	props := map[string]any{}
	for _, p := range t.Params {
		props[p] = map[string]any{}
	}
	return map[string]any{"type": "object", "properties": props}
}

// Description is a short text for a tool listed from the catalogue.
func (t Tool) Description() string {
	return "MemPalace " + t.Name + " (" + t.Route.String() + "; listed from devbox-config's catalogue while no MemPalace server has answered)"
}

// NeverNames lists the tools no device may call through the gateway
// (Gate Never), by their bare names, in the catalogue's order.
func NeverNames() []string {
	var out []string
	for _, t := range tools {
		if t.Gate == Never {
			out = append(out, t.Name)
		}
	}
	return out
}

// ParamType is the JSON Schema type MemPalace's tools/list gives an
// argument of that name: "integer", "number", "boolean", "array",
// "object", or "string" for every other name. Every release's schema
// types a name alike in every tool that takes it (a test holds this to
// the Checked release's tools/list, and to the real server's).
func ParamType(name string) string {
	switch name {
	case "limit", "offset", "max_hops", "last_n", "timeout_ms", "max_clusters":
		return "integer"
	case "max_distance", "threshold", "dedup_threshold":
		return "number"
	case "cli_compatible", "include_media", "dry_run", "include_subagents", "apply", "desktop_toast", "silent_save", "preview", "slim":
		return "boolean"
	case "items", "drawer_ids", "include_ignored", "artifact_ids":
		return "array"
	case "diary", "metadata":
		return "object"
	}
	return "string"
}
