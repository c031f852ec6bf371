// Package origin is the wire format of who wrote each record a
// devbox-config gateway answers with (issue 28; RFC 001 §6.1's memory
// poisoning, §7.3.2's server-side provenance). It imports nothing of the
// gateway, so an edge can import it alone; the gateway's answers and an
// edge's merged reads are written and read with it.
//
// # The origin of a record (version 1)
//
// Every record of an answer that carries records gains one member, "origin",
// added beside MemPalace's own fields (never replacing one: an answer whose
// record already has an "origin" is refused as a shape the gateway does not
// know). Its value is an object, [Origin]:
//
//	"origin": {"device":"laptop-7f3a","label":"laptop","agent":"opencode","at":"2026-11-30T12:00:00.123Z","trusted":true}
//	"origin": {"device":"oldbox-11c2","label":"oldbox","agent":"pi","at":"2026-11-30T12:00:00Z","via":"ops-0001","trusted":true}
//	"origin": {"device":"unknown","trusted":false}
//
// Members (the gateway writes them in this order; a reader must not rely
// on it), the optional ones absent when empty:
//
//   - device (always): the id of the device whose authenticated write put
//     the record on the primary (its current content, for a drawer whose
//     content update_drawer rewrote), or "unknown" ([Unknown]) for a record
//     the gateway did not stamp: written before the gateway stood in front
//     of the primary, or around it. "unknown" is never a device id (the
//     gateway's config refuses it).
//   - label: the device's label when it wrote (for humans only; never
//     compared).
//   - agent: the agent the write named: the agent segment of a drawer's
//     added_by, a diary's agent, an event's from_agent (absent for facts).
//     It is the writer's claim; only device is verified. A drawer's
//     added_by agent is any short plain name the client sent (the
//     device's agents list is not consulted); a diary's agent and an
//     event's from_agent must be one of the device's agents (or, for a
//     diary, the harness part of one), so a device cannot name another
//     device's agent there, but nothing shows which of its own spoke.
//   - at: when the gateway stamped it, RFC 3339 in UTC, to the millisecond.
//   - via: for a record a join attributed to device (an admin's join
//     with --origin-device, see below), the admin device that made it;
//     for a drawer another device moved (update_drawer with a new room
//     or wing), the mover, whose text its place then is, and stays
//     through a rewrite that leaves it there.
//   - removed: the id of device, or else of via, when the gateway's config
//     has removed that device (`gateway device remove`; its
//     removed_devices): no device trusts the record then, one that names
//     no trusted set included, so trusted is false.
//   - unlisted: the id of device, or else of via, when that device is
//     neither a device of the gateway's config nor a removed one (removed
//     by a release that kept no removed_devices, or deleted from the
//     config by hand): trusted by no device either. Records of unknown
//     origin are not unlisted.
//   - trusted (always): whether the reading device trusts device and,
//     for a record with via, the via device too (both vouch for it: the
//     one it names and the one whose credential wrote or placed it). A device
//     whose gateway config names no trusted set trusts every device and
//     records of unknown origin (true throughout: nothing changes for whoever
//     never configures it); one that names a set trusts those devices and
//     itself, never "unknown". A device set to withhold untrusted records
//     gets none, so every record it gets says true: an answer with records
//     left out says how many in "untrusted_withheld": n (a top-level
//     member, present only when n > 0, counting its first list; count, or
//     diary_read's showing, counts what is left), and a get_drawer or
//     artifact_get of a withheld record answers {"error": "withheld: ...",
//     "untrusted_withheld": 1, "origin": {...}}. Whatever an edge injects
//     on its own initiative (a wake-up summary, owed asks) takes only
//     records whose origin says trusted: true.
//   - palace: never written by a gateway. An edge that merges its own
//     palace's answer with the primary's says there which palace returned
//     the record: "primary" (the primary's origin as it came), "both" (the
//     primary's origin, palace added) or "local" (only this device's
//     palace's answer holds it; the primary may keep it all the same,
//     outside its page: {"device": <this device's id from
//     gateway/deviceinfo, or "unknown" when the primary advertises none>,
//     "label": ...,
//     "trusted": true, "palace": "local"}, written with [Set]). This
//     replaces the edge's earlier "origin": "local" | "primary" | "both"
//     string on merged search and check_duplicate hits, which a gateway's
//     origin object would otherwise collide with: the edge must neither
//     overwrite nor drop the primary's object.
//
// Where: per tool (catalogue.Records names them; Lists and Object say
// where), each object of
//
//	search           results[]
//	get_drawers      results[] (not the items that are errors)
//	check_duplicate  matches[]
//	checkpoint       duplicates[].matches[] (untrusted_withheld counts
//	                 every item's; through an edge: the local palace's
//	                 answer, each match palace "local")
//	list_drawers     drawers[]
//	get_drawer       the answer object itself
//	diary_read       entries[]
//	kg_query         facts[], active_facts[], historical_facts[], future_facts[]
//	kg_timeline      timeline[]
//	event_list       events[]
//	event_wait       events[]
//	artifact_get     artifact
//	follow_tunnels   each connection of the answer (a JSON array), its
//	                 drawer_id's; and the tunnel's (its tunnel_id's, the
//	                 writer of its label) as "tunnel_origin" ([TunnelKey])
//	list_tunnels     each tunnel of the answer (a JSON array), its id's:
//	                 the device whose create_tunnel last wrote it (its
//	                 label)
//
// A tunnel or connection is never left out: an untrusted writer's text is
// cut from it instead (a connection's drawer_preview, its drawer's; a
// label, its tunnel's) and it says how many in "untrusted_withheld" of its
// own (1, or 2 for a connection whose drawer and tunnel are both untrusted).
//
// kg_stats carries no records, but its relationship_types are the facts'
// writers' predicates: for a device that names a trusted set, one no
// trusted device gave a fact is left out (withhold; counted in
// "untrusted_withheld") or listed again in "untrusted_relationship_types"
// (mark).
//
//	GET /logstream/stream   each frame's data (one line: the event with its origin;
//	                        a withheld event's frame is left out)
//
// An answer that is an error ({"error": ...}, a JSON-RPC error) carries
// none. search's cli_compatible text (cli_output) repeats the hits without
// origins, so a device that names a trusted set is refused it. Records the gateway answers wing by wing (a palace-wide search by
// a device that reads only some wings) carry theirs the same way.
//
// Whether answers carry origins, and what the reading device trusts, the
// gateway advertises in gateway/deviceinfo (origins: [Version]; trusts;
// untrusted; instruction_wing): absent there, a primary's records carry
// no origin and none can be told from another.
//
// A record read while its write is in flight through the gateway (MemPalace
// has applied it, the gateway has not yet recorded its stamp: the time of
// one upstream answer) reads "unknown".
//
// What a reader may rely on: device is what the gateway verified, by the
// token that authenticated the write, not what the writer claimed. A
// write's metadata may not hold "origin" or "trusted" (any case; the
// gateway and the edge refuse it, -32602), so no look-alike of the stamp
// sits in a record's metadata written through either since.
// metadata.added_by (MemPalace's own, on get_drawer and list_drawers) is
// "<agent>/<label>/<device>" for a drawer filed through the gateway, the
// same device, label and agent as its origin (after another device's
// update_drawer rewrote the content, origin names the updater and
// added_by still the filer). But added_by can be written around the
// gateway with any value, and search hits, facts, diaries and events have
// none: origin says "unknown" for what the gateway did not stamp,
// whatever added_by claims.
//
// # A join's attribution
//
// A join replays a whole palace and attributes it to one device
// (--origin-device). Through a gateway it sends that device's id in every
// write's params._meta["devbox-config/origin-device"] ([MetaKey]; the edge's
// primary client puts it there for calls made with a context from
// [WithDevice]). The gateway honours it from an admin device when it names a
// device of its config (origin: that device, via: the admin; trusted only
// by a device that trusts both); from any
// device it accepts its own id (a no-op); anything else is refused
// (JSON-RPC -31003, nothing written).
//
// Every write of a join carries params._meta["devbox-config/join"] = true
// ([JoinKey]; [WithJoin] marks the context): the gateway refuses a join's
// add_drawer or diary_write that would file again a drawer or diary entry
// its trash holds as deleted and not restored (JSON-RPC
// ledger.CodeDeletedOnPrimary, -32032; to an admin device naming the
// trash's delete and `gateway trash restore N`, to any other only that it
// was deleted and the operator can restore it), and the join counts it as
// deleted on the primary. The same write without the mark (an agent's) is
// made. A drawer is matched by the id its wing, room and content give and,
// for one updated after it was filed (MemPalace keeps its first id), by
// the local id the join names in params._meta["devbox-config/join-drawer"]
// ([JoinDrawerKey]; [WithJoinDrawers]), in the add's own wing. A diary
// entry is matched by its agent, wing and text, and counted: a join's
// diary_write names which equal copy the primary lacks it is, n, in
// params._meta["devbox-config/join-copy"] ([JoinCopyKey]), and is refused
// only while the trash holds n or more such entries deleted.
//
// An edge's add_drawer its local palace answered already_exists is a
// replay of the drawer that palace holds, not a fresh write: the edge
// sends it with params._meta["devbox-config/replay"] = true ([ReplayKey])
// beside the join mark (which a gateway older than the replay mark
// checks, in a join's words), and the gateway checks its trash as for a
// join's add_drawer, wording the refusal for a replay of the device's
// local copy (rule replay:deleted-on-primary). A checkpoint's items its
// local palace listed as duplicates of the very drawer each would file
// are named by their indexes in params._meta["devbox-config/replay-items"]
// ([ReplayItemsKey]); the gateway drops those whose drawer its trash holds
// as deleted, files the others, and lists the dropped ones in the
// answer's errors.
//
// An edge's update_drawer of a drawer its local palace held carries the
// sha256 of the text it replaced there in
// params._meta["devbox-config/base"] ([BaseKey]): the gateway compares it
// with the primary's text, under the write slot, after the op-id ledger
// (a send it recorded is answered from the record), and refuses an update
// whose drawer changed on the primary since (another device's edit) with
// ledger.CodeChangedOnPrimary, naming who changed it when its provenance
// knows; a primary text equal to the update's own, byte for byte, is no
// conflict. An op the ledger holds in doubt, sent again, is answered in
// doubt instead (ledger.CodeInDoubt: it may have landed and been edited
// over). An edge's delete_drawer carries the base of the text it deleted
// and is refused alike.
package origin
