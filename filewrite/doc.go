// Package filewrite is the one way devbox-config replaces a file on disk:
// render's harness configs and records, the gateway's config save and the
// edge's tool cache all go through Write.
//
// Write's guarantees, in order:
//
//   - Only regular files are written. A target that is a device, FIFO,
//     socket or directory (after following symlinks) is refused with a
//     *NotRegularError naming it, without opening it.
//   - A symlink is followed: the real file is replaced, the link stays.
//     With Owned (render's own sidecars, records and backups) a symlink is
//     refused instead, and a hard-linked file is replaced, never written
//     in place: nothing is written through a link the caller owns, and an
//     existing file's mode is narrowed to perm (never widened). The
//     rename replaces the name itself, so a link swapped in after the check
//     is replaced, not followed.
//   - The bytes go to a temp file in the same directory, named
//     ".<base>.tmp-<16 hex digits>" (TempName), which is fsynced, given the
//     existing file's mode and owner (a new file gets perm and, when run as
//     root, its directory's owner), renamed over the target, and the
//     directory is fsynced. A reader sees the old bytes or the new ones.
//   - A file whose owner (or group) the process could not give back to
//     the temp file (not root, and not its owner or not in its group) is
//     left alone with a *NotWritableError naming it, its owner and the
//     fix, whatever its mode: a rename would make it the process's user's.
//     CheckOwner makes that decision alone, so a caller can leave the file
//     alone before it writes anything else for it (render's plan).
//   - The temp file is created with O_CREAT|O_EXCL, which fails on any
//     existing name, a symlink included: a temp file is never a link.
//   - When the rename cannot work (EBUSY or EXDEV: a single file
//     bind-mounted into a container) or would break a hard link (link
//     count > 1), the same inode is overwritten in place: written,
//     truncated to the new length and fsynced. This is not atomic, so the
//     caller keeps a backup first; Result.InPlace says it happened.
//   - With IfUnchanged(old), just before the rename (or the in-place
//     write) the file is looked at again: one that no longer holds old,
//     byte for byte (a save by an editor or by the harness itself since the
//     caller read it), is left as it is with a *ChangedError, and nothing
//     is written. What is saved after that look is replaced: no lock
//     excludes a writer that takes none.
//   - Every error is returned, never dropped; a failed write removes its
//     temp file.
//
// A temp file left behind by a killed process is removed by CleanStale,
// which touches only names of the exact TempName pattern (or the
// ".<base>.tmp<digits>" of render's earlier writer) for one target that
// are older than a given age (so a concurrent writer's temp file is left
// alone).
//
// Narrow is Owned's narrowing alone, in place, for a file that is kept
// open rather than replaced (the edge's outbox, a SQLite database).
//
// ReadRegular is the matching read: it refuses special files without
// blocking on a FIFO and refuses files larger than a bound.
package filewrite
