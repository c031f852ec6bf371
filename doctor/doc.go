// Package doctor checks a devbox for the traps of RFC 001 before they bite:
// the §7 landmines (a split knowledge graph, a shared sync, an unchecked
// embedder), the opt-in's own pitfalls (an edge palace on an un-persisted
// volume, a palace whose vector index is lost, a token in a readable .env or a harness config, a proposal
// nobody merged, a harness's MemPalace entry whose command cannot start, or that the harness would not use, a harness config the harness ignores, a mempalace-mcp on the edge's palace that no edge started) and the primary's reachability and policy (§6.2: the
// token, the Host pin behind a proxy, an Origin-adding proxy).
//
// Each check is a small function that returns findings; a finding has a
// stable id for scripts, a severity, the RFC section, what is wrong and the
// exact fix; Catalogue lists every id, with its section and meaning, and
// is what `doctor --help` prints. Checks only read: nothing is created, not even an outbox that
// does not exist yet. An existing outbox is opened read-only
// (outbox.Options.ReadOnly): nothing in it or beside it is written (its
// -wal is read, not checkpointed into it; a copy keeps the identity it
// came with, one an older build left is reported, not brought to this
// build's schema), though SQLite may make its -shm. One
// its file system refuses (full, read-only, not this user's:
// outbox.StorageError) is only counted, read only (outbox.Peek), and never
// called damaged. The one exception is FixSplit (doctor --fix), which
// converges a split store onto one inode by the RFC's symlink, after a
// backup, and only when one side holds no data.
//
// The environment comes in as a lookup function and read through the
// ladder (ladder.Resolve, ladder.CheckNames), the one reader: every
// fall-back the ladder takes and every name nobody reads is a finding. The
// token is read only to authenticate and to look for copies of itself, and
// is never formatted into a finding; text that comes from outside (a
// server's answer, the outbox's record of one) has it masked when it is
// long enough to be a secret (MinTokenLen), and a shorter one is a finding
// of its own, so words that contain it stay intact. Every network call is
// bounded by a context deadline, so a blackholed primary costs at most
// Options.Timeout.
package doctor
