// Package join brings an existing palace into a primary (RFC 001 §4.4,
// §7.6): `devbox-config join`. A join is idempotent replay of local
// history through the edge's own machinery, never a file copy:
//
//   - The local palace is read through the same local server the edge
//     starts (edge.Child): list_wings, list_drawers paging, get_drawers for
//     full content, 500 ids a call (get_drawer one by one from a palace
//     before 3.11.0; list_drawers gives 200-character previews), diaries as
//     the drawers of each agent's diary wing (room "diary"), facts by
//     kg_timeline, or read-only from knowledge_graph.sqlite3 where
//     kg_timeline cannot page (capped at 100 before 3.10). A palace that
//     holds no drawers yet (palacefiles.Empty: MemPalace answers its
//     list_wings with an error, as it does for a broken backend) has no
//     drawers or diaries to read; its facts are read as always.
//   - Every record is queued in a join outbox of its own
//     (<palace>/edge/join-outbox-<target>.sqlite) and drained by the
//     outbox's Flusher, so the per-type replay rules apply: drawers and
//     open facts by the server's own guards, closed facts looked up first
//     by (subject, predicate, object, valid_from, valid_to), diaries
//     counted: the n-th of n equal local entries (one wing, one text) is on
//     the primary when the primary's wing, listed once, holds n whose
//     text now hashes as its (catalogue.ListedEntrySuffix: an edited entry
//     keeps the id of the text it was filed with; two equal entries are
//     two writes); the
//     op id rides in _meta for a gateway's ledger, and a kill at any point
//     leaves ops the next run resumes.
//   - Every write carries _meta["devbox-config/join"] (origin.JoinKey): a
//     gateway refuses one that would file again what an admin deleted on
//     the primary (its trash holds it, not restored; of equal diary
//     entries, as many as it holds: each write names which copy the
//     primary lacks it is), and the op settles
//     done as deleted there, counted apart (Report.DeletedOnPrimary), no
//     failure and never verified. Later runs never send it again; they
//     look for it on the primary (a drawer by its id, an entry by its
//     wing's count), and one restored from the trash is skipped. An entry
//     an earlier join sent is counted by its wing alike: one the primary
//     lacks since counts deleted, never sent again. A drawer updated after it was filed
//     (MemPalace keeps its first id; its content's id is another) is
//     asked of the primary by its local id first (present: get_drawers,
//     500 ids a call; get_drawer one by one from a primary before 3.11.0
//     or an older gateway that refuses the batch to a device not reading
//     every wing): there with the same content, it is skipped, not filed again
//     as a second copy; with other content, named edited. A drawer whose
//     op an earlier run saw refused (dead) or an operator dropped is asked
//     likewise: there, its op is settled found and never sent again. Queued, its add names the local id
//     (origin.JoinDrawerKey) for the gateway's trash. A dry run with a
//     token asks so too and reports alike, writing nothing (its primary
//     notes no protection in an earlier join's outbox); the trash it
//     cannot ask (the gateway reads it only for a join's write). It asks
//     about every drawer it is to queue, not only the updated ones: a
//     real run learns only as it sends that the primary holds one an
//     edge replicated, and the dry run counts what the real run sends.
//   - The primary is asked first: a dry run with a token fails its report
//     with doctor's finding and fix (doctor.DiagnosePrimary) when the
//     primary cannot be used (down, hung, refusing the token, no MCP
//     endpoint at the URL); a real run refuses, before queuing anything
//     (the join outbox it made for the URL is removed),
//     a URL that answers as no primary (a 404 without /mcp, https to
//     plain HTTP, not MCP), and queues for a primary that is down.
//   - A local palace that cannot be read ends the join (a dry run too,
//     its report still a dry run's); one whose SQLite is damaged fails
//     with doctor's palace-damaged finding and fix
//     (doctor.CheckPalaceIntegrity).
//   - A join refuses, queuing nothing (a dry run says the real run would),
//     while the edge's outbox has not settled an op writing a diary entry
//     it would send (one wing, one text; queued, in flight, held, dead or
//     in doubt): the edge's first send of it looks nothing up, so both
//     would file it (attack74 F6). The refusal names the ops and says to
//     run `devbox-config edge flush` first. The outbox is read after the
//     local palace: the edge queues a write before its palace takes it.
//     In an outbox recorded as a copy, the entries of the ops queued
//     before the copy (held or dropped) are the original's: not sent, not
//     refused for, counted in LeftToOriginal (attack76 F1).
//   - Search is never used (3.6.0 hits carry no drawer_id): ids come from
//     list_drawers, content from get_drawers.
//   - Wings the policy marks local are never read for sending; --wing
//     globs narrow further.
//   - The state of each target is checkpointed in <palace>/edge/
//     bootstrap.json ({target_url: {joined_at, high_water, counts}}).
//   - A join complete for every replicated wing (no --wing, --resume or
//     --dry-run) clears the edge outbox's record of writes it could not
//     queue (outbox.StayedLocal) for its target primary only, unless one
//     came after the join began.
//   - Verification is by content: both sides read 500 ids a get_drawers
//     call (get_drawer one by one from a side that refuses it, as present
//     does), reassembled content compared, an edit told from truncation by
//     the prefix test and the final-chunk arithmetic (§4.4, §9.3). Counts
//     prove nothing. A record a batch answer leaves out is missing.
//   - A get_drawers batch whose call fails (reading the local palace,
//     looking up, verifying) is read again in halves, and the batches
//     after it are half as large: an answer over what the client takes
//     (the edge's 64 MiB, passed by 500 drawers of 130 KB) fails the call,
//     and its size is not known before (list_drawers gives previews). One
//     id that fails, or a side not reached, refusing the token or out of
//     time, fails its records with the error.
//   - Every read of the primary waits out a gateway's read rate (-32029),
//     and the primary's breaker a failed call tripped (an answer too large
//     trips it), for up to Options.Stall (callerOf): a look-up or a
//     verification past the device's burst or after a batch too large is
//     slower, never failed.
//   - The drain's writes are paced once a gateway refuses one for the
//     device's write rate (edge.FlushTarget's, as every flush's: it names
//     no rate, so the gap is found), so a join meets the rate about once
//     per hundred writes, not several times a write, at about the rate's
//     pace.
package join
