// Package outbox is the edge's durable, replay-safe queue of writes bound
// for the primary (RFC 001 §4.3), ordered per object (the catalogue's
// causal keys) on two lanes. It lives in <palace>/edge/outbox.sqlite,
// beside the local palace it mirrors, on the volume that edge mode
// requires to be persisted. docs/replication.md says what it promises:
// op identity, the failure table, look-ups and their limits, in doubt,
// held, fencing, retention.
//
// Enqueue commits with synchronous=FULL: the agent was already told its
// write succeeded. The flusher's bookkeeping (inflight, done) uses NORMAL on
// its own connection: in WAL mode a process crash loses nothing, and a
// power cut can at worst forget a "done", which the replay rules make safe.
//
// Its files:
//
//	store.go     the Store: the SQLite file, its schema, Open and Close, meta values
//	migrate.go   an older file brought up to the schema (logged), a newer one refused; the outbox's identity
//	copy.go      a copy of another outbox's file seen, and kept on record (edge status, doctor) until the operator says it is the same machine; the device its ops are made under
//	op.go        an op, its states, and Enqueue (op id, the size cap, the op-id stamp, an update's base: meta base:<op id>)
//	intent.go    a write (or delete) in the outbox before the local palace has it, settled by its answer
//	query.go     reading ops (the next to send, Get, List, Stats), operator commands
//	failure.go   the failure kinds and their rules (Rules), classifying an attempt
//	lease.go     the fenced flush lease
//	live.go      which edge processes on the palace still run (a file lock each)
//	flush.go     the Flusher: a round on two lanes, Run and Drain
//	otherdevice.go an op queued while the gateway named the token another device than now: held, dead, never sent
//	settle.go    recording an attempt's outcome, only over the op as the flusher left it (an operator's drop, delivered or retry meanwhile stands) (a checkpoint's items left out noted; an end of a fact closed already, meta closed:<op id>), the backoff
//	replay.go    per record type, what is safe to send again; the marks a send carries (op id, replay, an update's base)
//	diary.go     diary entries counted: the fences, a join's count; the entries not yet settled (PendingDiaries), which a join leaves to the edge, or on a copy, those queued before it to the original
//	upkeep.go    retention: pruning done ops, giving their space back
//	doorbell.go  waking a sleeping flusher in another process
//	theirs.go    a dropped update refused as changed on the primary: the note that makes the edge's palace take the primary's text; Kicked
//	heldfacts.go the KG writes a gateway held (not filed) that a local KG read names, and those a later write settled (told no more)
//	tombstone.go what this device deleted (merged reads hide the primary's copy)
//	stayedlocal.go the writes an edge could not put here (a full disk): their count, in a file beside it a full disk does not stop
//	storage.go   an Open its file system refused (full, read-only, permissions) told from a damaged file, naming the mount mountinfo lists (a bind mount too); Peek, a read-only count
package outbox
