// Package gateway is `devbox-config gateway`: per-device authorization in
// front of a MemPalace primary (RFC 001 Phase 4, §6.2, §7.3.2). Each device
// has its own token; every request is authorized by wing, knowledge-graph
// grant, coordination identity and admin scope, by each tool's record in
// the catalogue package; provenance is stamped from the credential; every
// request is written to a hash-chained audit log. The upstream
// `mempalace serve` is unchanged and sees one shared token.
//
// A request goes through named steps, each a function of its own:
// source (refusals.go: a request that names no device is counted against
// its address, and past its rate answered 429 with no line; a device's
// refusals by its rates, its requests in flight and its share of streams
// past its first few are counted, not lined), authenticate (handler.go, token.go), parse (parse.go: once, strictly;
// the upstream receives the re-encoding of this parse, never the client's
// bytes, under an id of the gateway's own), arguments (parse.go: the
// catalogue's allow-list; names and id lists strings, integers bounded),
// limit (limits.go), authorize (authz.go, objects.go), replayed items
// (replayitems.go: a checkpoint's items an edge names replays of its local
// copies are left out when the trash holds them deleted, and its answer
// lists them among its errors), narrow (narrow.go),
// author (origins.go: who a write is attributed to, a join's
// --origin-device), join (jointrash.go: a join's replay of what the trash
// holds as deleted is refused, and an edge's replay of its local copy; an
// update of a drawer it holds so is told it, updateStep, and an update or
// delete of a drawer restored under another id the new id, restoredStep), audit (audit.go: ahead of a write, and one line per
// request), keep (keep.go, doomed.go: what a delete removes goes to the
// trash first, under the write slot; an update_drawer's text read there
// is compared with the edge's base, origin.BaseKey: staleBase), forward (upstream.go, through an
// optional Ledger; sendwrite.go, under the write slot: diarysettle.go, a
// diary entry's write (diary_write, a checkpoint's diary) whose answer was
// lost, settled; lostanswer.go, the other writes' lost answers, so that no
// record keeps a stamp its text no longer bears; a checkpoint's items
// looked up around it; an update whose base is not the primary's text
// is refused, ledger.CodeChangedOnPrimary; kgorigin.go, a device that is not admin ends only
// the facts it wrote, checked here so no write lands between check and
// send, a kg_add of a fact held current stamps nothing, a kg_supersede of a
// closed fact while another value is current is not sent, a closed fact's
// stamp moved to its closed key) and filter (filter.go, fanout.go; origins.go adds each
// record's origin, record.go stamps the provenance index after a write;
// unread.go answers a filing of what a wing the device does not read
// holds already as a new one).
// evpage.go fills an event_list page the filter cut; refill.go a diary_read's or search's page a withheld record thinned. Beside the steps: restore.go (gateway trash restore), stream.go (the
// /logstream relay, events with their origins), advertise.go (what a
// device is told about itself). The server's lifecycle (Open, Reload, Watch) is server.go,
// and applied.go its record of what each did with the config, which an
// operator's config change waits for (ConfirmApplied);
// what the running gateway learns (a token's first use) lives in a state
// file apart from the config (state.go), which only operators write. The
// config's relative paths are relative to its own directory (config.go),
// and a gateway that has served does not start on kept state that is
// missing (state.go, CheckKept).
package gateway
