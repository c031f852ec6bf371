// Package trash is the gateway's trash (issue 27; RFC 001 §4.2 "tombstone,
// never hard-delete remotely", §6.2 "deletes as tombstones"): the drawers
// a delete through the gateway removes from the shared primary, read from
// the primary just before the delete is forwarded and kept here with
// their metadata and who deleted them, so that an operator can put them
// back (`devbox-config gateway trash list|restore|prune`).
//
// # What is kept
//
// One Delete per request (delete_drawer, delete_drawers, delete_by_source
// with dry_run false, and update_drawer, whose replaced version is kept
// as well): the device id and label, the time, the tool, the source file
// a delete_by_source named, and the hash of the request's audit line
// written before the delete was forwarded (Delete.Audit: grep the audit
// log for it). Each Drawer is what MemPalace reported of it: id, wing,
// room, the whole content (chunks joined) and the metadata (filed_at,
// added_by, source_file, ...).
//
// A Delete is kept (state pending, fsynced: synchronous=FULL) before the
// delete goes to the primary; the primary's answer settles it: deleted,
// or dropped from the trash when the primary refused (nothing was
// removed), or unconfirmed when no answer came. The device hanging up
// does not stop it; a gateway that stops before it leaves the Delete
// pending for good (docs/trash.md says what an operator does).
//
// # What a restore makes
//
// MemPalace derives most ids from what a drawer holds or when it was
// written, so a drawer comes back as its Kind says (Classify, decided
// when it is kept, shown by `trash list`):
//
//   - KindFiled, a drawer filed over MCP (add_drawer, checkpoint): its id
//     is drawer_<wing>_<room>_<hash of wing, room, content>, so add_drawer
//     files it again under the same id, with the same content, added_by
//     and source_file.
//   - KindRefiled, any other drawer (a mined one, whose id came from its
//     source file and chunk index; one whose content update_drawer changed
//     after filing, which keeps its first id): add_drawer files the same
//     content under the id wing, room and content give (RefiledID).
//   - KindDiary, a diary entry: diary_write writes the text again for the
//     same agent, topic and wing, as a new entry with a new id and the
//     restore's timestamp (MemPalace ids and dates an entry by when it is
//     written), which diary_read lists again.
//   - KindPrior, the version an update_drawer replaced: update_drawer puts
//     content, wing and room back in place under the same id; when the
//     drawer has been deleted since, add_drawer files it again, as
//     KindRefiled.
//
// A restore never replaces other content: when the id it comes back
// under holds other content (a later version; a deleted drawer's content
// filed again, then changed), that is kept first, as a Delete of its own
// (tool update_drawer, device "operator"), and restoring it puts it back.
//
// Lost lists what no restore brings back (filed_at among it).
//
// # Retention
//
// A Delete is kept for the retention (trash_retention_days, default 30)
// from its time, restored or not, then pruned: by Prune (the gateway's
// start, `gateway trash prune`) and with every new Delete; opening the
// trash prunes nothing, so `gateway trash list` shows what is past it. What it keeps of
// a device's own text (drawers whose origin names the device that
// replaced or deleted them) is bounded by Store.OwnQuota: a new Delete of
// its own text drops, and logs, that device's oldest settled ones past it
// older than OwnQuotaFloor, counted by the size recorded at Keep (no
// content read); another device's text, or of unknown origin, a purged
// drawer and one a restore holds stay for the retention. Purge (`gateway
// trash purge`) removes one delete's or one drawer's content and metadata
// at once, for good (secure_delete, and the WAL truncated), keeping the
// drawer's id marked purged (a diary entry, the digest of its agent,
// wing and text under Store.Key, by which DeletedEntry still finds it),
// and a restore's record of it: a restore
// takes a drawer (Claim) before it files it, so a purge is before it or
// names it, and says where the content still is (Drawer.Live). The file is
// trash.sqlite beside the audit log unless trash_file names another; mode
// 0600, as it holds deleted content.
//
// The file records its schema version (PRAGMA user_version, 1): one an
// older build made is migrated at Open with one line on the log, and one a
// newer release made is refused (sqlitewal.Versioned), so a rollback is
// told, not misread.
package trash
