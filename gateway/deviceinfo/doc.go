// Package deviceinfo is what a devbox-config gateway tells a client about
// the device its token names: the device's identity, its scopes, what the
// gateway refuses every device, and whether its deletes are kept in the
// gateway's trash (issue 27). An edge reads it to decide whether a delete
// may be queued for the primary (an admin device's is kept there as a
// recoverable tombstone) or stays local; doctor reads it to know that sync
// cannot reach the primary; an edge reads the identity and trust settings
// to mark its own records and to know what it may inject (gateway/origin). It
// imports nothing of the gateway, so the edge can import it alone.
//
// # Wire format (version 1)
//
// The same JSON object, [Info], in two places, both written by this
// package so they cannot drift apart:
//
//   - the initialize result's capabilities.experimental["devbox-config/device"]
//     ([AdvertiseInitialize]; read back with [FromInitialize]), where an MCP
//     client looks;
//   - the header "Devbox-Config-Device" on every authenticated /mcp answer,
//     refusals and replays included ([Advertise]; read back with
//     [FromHeader]), the object as compact JSON with every character
//     outside printable ASCII written as a \uXXXX escape (a label may be
//     any text; a header value may not).
//
// For example, for an admin device with the default settings:
//
//	{"version":1,"id":"ops-0001","label":"ops","admin":true,"bulk_delete":false,
//	 "delete_cap":10,"read":["*"],"write":["*"],"kg":"write","agents":["pi@ops"],
//	 "coordinator":false,"refuses":["mine","sync"],"trash":true,"trash_retention_days":30,
//	 "origins":1,"trusts":null,"untrusted":"mark","instruction_wing":"wing_instructions"}
//
// Fields: version (this format's, 1; a reader accepts a later one and reads
// the fields it knows); id (the device's opaque id) and label (for humans);
// admin (it may delete drawers, and the deletes are kept in the trash);
// bulk_delete (one delete may remove more than delete_cap drawers; without
// it a larger delete is refused); read, write (wing globs, path.Match),
// kg ("none", "read" or "write"), agents (the from_agent names it may use)
// and coordinator (it sees every coordination event); refuses (bare tool
// names the gateway refuses for every device, admin included: "sync" and
// "mine"); trash (deletes through this gateway are kept and can be
// restored by the operator) and trash_retention_days (for how long);
// origins (the version of gateway/origin's format every record of this
// gateway's answers carries: each says who wrote it and whether this
// device trusts the writer; absent or 0 from a gateway older than that),
// trusts (the device ids whose records this device trusts, its own
// included; null: every device's, records of unknown origin included),
// untrusted ("mark": an untrusted record's origin says "trusted": false;
// "withhold": answers leave such records out), removed (the ids of the devices
// the operator removed last, at most 32, absent when none: no device
// trusts their records, whatever trusts says; the gateway marks every
// removed device's records in its answers, named here or not) and instruction_wing (the
// wing every device reads and only admin devices whose write globs match
// it write, "" for none: an edge should not queue another device's write
// to it, which the gateway refuses).
//
// Absent (a plain `mempalace serve`, or a gateway older than this), a
// client knows nothing of the device and must assume the primary deletes
// for good and runs sync.
package deviceinfo
