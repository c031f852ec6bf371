// Package outbox is the edge's durable, ordered, replay-safe queue of writes
// bound for the primary (RFC 001 §4.3). It lives in <palace>/edge/
// outbox.sqlite, beside the local palace it mirrors, on the volume that edge
// mode requires to be persisted.
//
// Enqueue commits with synchronous=FULL: the agent was already told its
// write succeeded. The flusher's bookkeeping (inflight, done) uses NORMAL on
// its own connection: in WAL mode a process crash loses nothing, and a
// power cut can at worst forget a "done", which the replay rules make safe.
//
// Its files:
//
//	store.go     the Store: the SQLite file, its schema, Open and Close, meta values
//	op.go        an op, its states, and Enqueue (op id, de-duplication, the op-id stamp)
//	query.go     reading ops (Get, List, Stats), operator commands, waiting for an op
//	flush.go     the Flusher: the lease, the drain loop, settling an attempt
//	replay.go    per record type, what is safe to send again
//	doorbell.go  waking a sleeping flusher in another process
package outbox
