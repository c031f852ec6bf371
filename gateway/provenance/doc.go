// Package provenance is the gateway's provenance index (issue 28; RFC 001
// §6.1, §7.3.2): who wrote each record that reached the primary through
// the gateway, stamped from the credential that authenticated the write,
// so that every answer carrying records can say who wrote each
// (gateway/origin is that wire format).
//
// # What is indexed
//
// A record is found again by what a read returns of it, so each kind has
// its own key (Key):
//
//   - drawers (and diary entries, which search and get_drawer return as
//     drawers) by their logical id;
//   - coordination events and artifacts by id;
//   - knowledge-graph facts by subject, predicate, object and validity
//     (valid_from, and valid_to once closed), as MemPalace normalizes
//     them (kg_query and kg_timeline return no ids): a fact closed and
//     the same triple filed again are two facts, each its writer's. A
//     kg_invalidate or kg_supersede through the gateway (its answer given
//     or lost) moves the closed fact's stamp to its closed key, as the
//     primary then holds it; a kg_add first reads the subject's facts:
//     of a fact the primary holds open it files nothing and stamps
//     nothing (the open fact keeps its stamp, or none), and a stamp on
//     a fact closed around the gateway moves to its closed key;
//   - diary entries by agent, timestamp and the sha256 of the text
//     (diary_read returns no ids; a long entry's chunks each by its own
//     text).
//   - tunnels by id (MemPalace's, from the two rooms): a create_tunnel
//     of the same rooms rewrites the label, so its stamp replaces the one
//     before; a delete_tunnel through the gateway forgets it.
//
// Facts' stamps are also counted by predicate and writer, in memory
// (PredicateWrittenBy), so the gateway tells a kg_stats answer's
// predicates apart by who gave them a fact without reading the primary.
//
// Each maps to a Stamp: the device id and its label when it wrote, the
// agent the write named, when the gateway stamped it, and, for a record a
// join attributed to another device, the admin device that made the join.
// The first stamp of a record stays (a drawer filed twice with the same
// content is its first filer's); an update that rewrites a drawer's
// content replaces it (the new content is the updater's, via the device
// that placed it where it stays, if another; one that sends the drawer's
// own text, a touch, leaves it); a move by another device
// names the mover as Via (its place is the mover's text), or, when the
// stamp names another Via already, leaves none; while it is in
// flight the drawer (a tunnel being re-created, too) has no stamp, so a
// write whose answer is lost, or a gateway stopped mid-forward, never
// leaves the old writer's stamp on the new text; one the primary refuses
// (nothing written) gets it back as it was (gateway/sendwrite.go
// withdrawStep, gateway/lostanswer.go).
// A delete the primary confirmed through the gateway forgets its drawers'
// stamps (the trash keeps them, and a restore records them again), so the same id
// filed again after it (ids come from wing, room and content) is its new
// filer's; a delete not confirmed keeps them (the drawers may still be
// there). A drawer add_drawer answers it filed (not already_exists) was
// not there, so its stamp replaces one the index still holds (of a
// drawer deleted around the gateway, or by a delete whose answer was
// lost); an answer the op-id ledger replays replaces nothing (its records
// were stamped when it was first made). A diary entry filed again is
// another entry (a new id and timestamp), stamped on its own.
//
// # Limits
//
// What a read returns must find the key, so:
//
//   - Two facts with the same subject, predicate, object, valid_from
//     and valid_to (a retired fact and one filed closed with its dates)
//     share one key: both read as the first writer's (the same text).
//   - A record an op the ledger held in doubt (its answer lost) would
//     have made, found when the op is sent again, is taken for that op's
//     when nothing stamped it: a drawer filed around the gateway with an
//     added_by forged to the device's (operator access) reads as that
//     device's.
//   - A fact closed and filed again both around the gateway, with the
//     same valid_from as before, is not told apart from the one the
//     gateway stamped (a read shows no ids): the open fact keeps the
//     stamp.
//   - A long diary entry's chunks are found by 800-character slices of
//     its text (MemPalace's default chunk_size); a palace configured with
//     another size reads its long entries' chunks as of unknown origin in
//     diary_read (search and get_drawer find the entry by id).
//   - A diary entry whose text update_drawer rewrote reads as of unknown
//     origin in diary_read (its id, in search and get_drawer, names the
//     updater).
//   - A drawer deleted where the gateway did not see it go (around it,
//     or by a delete whose answer was lost) keeps its stamp until it is
//     filed again through the gateway: filed again around it, it reads
//     as the deleted drawer's writer's, not of unknown origin.
//   - A kg_supersede without "at" is stamped by the valid_from kg_query
//     then reports for the open fact it opened (one more upstream call);
//     if none is found the fact stays of unknown origin (logged).
//
// # Where it lives
//
// provenance.sqlite beside the audit log unless provenance_file names
// another; mode 0600, WAL, synchronous=NORMAL: a stamp a power cut loses
// leaves its record of unknown origin, the fail-safe direction. The whole
// index is read into memory when it is opened, and every stamp is written
// to both, so an answer's records are looked up without touching SQLite
// (a drawer's stamp is about 230 bytes in memory: 100,000 take 23 MB).
// Another process's stamps (a `trash restore`) are read again when the
// index's write-ahead log changed (Fresh, one stat before an answer's
// records; and the config poll). Nothing else is pruned: a record keeps its
// origin for as long as the palace keeps it.
//
// The file records its schema version (PRAGMA user_version, 1): one an
// older build made is migrated at Open with one line on the log, and one a
// newer release made is refused (sqlitewal.Versioned), so a rollback is
// told, not misread.
package provenance
