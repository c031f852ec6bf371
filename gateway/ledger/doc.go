// Package ledger is the gateway's op-id ledger (issue 13; RFC 001 §4.3,
// "the primary de-dupes on op_id"): a durable record, per device, of the
// answer the upstream gave to each outbox op the edge sent, so that a
// retried send is answered from the record instead of being applied twice.
//
// # Wire protocol
//
// The edge puts each outbox op's id into its tools/call request:
//
//	{"jsonrpc":"2.0","id":7,"method":"tools/call",
//	 "params":{"name":"mempalace_diary_write","arguments":{…},
//	           "_meta":{"devbox-config/op-id":"<64 lowercase hex>"}}}
//
// The edge puts it there; [OpIDOf] reads and validates it (a
// malformed one is an error, so the gateway can refuse the call rather
// than forward it unprotected).
//
// The gateway tells the edge the ledger is there in two ways, both set by
// this package so they cannot drift apart:
//
//   - every /mcp answer carries the header "Devbox-Config-Ledger: op-id/1"
//     ([Advertise]; read back with [Advertised]);
//   - the initialize result carries
//     capabilities.experimental["devbox-config/op-id-ledger"] = {"version":1}
//     ([AdvertiseInitialize]; read back with [AdvertisedIn]).
//
// The header is what `edge status` can check on any answer (even a
// replayed one); the capability is where an MCP client looks first. An
// edge that sees neither is not protected by a ledger and keeps its
// per-type look-ups.
//
// # What is recorded
//
// The key is (device, op id): two devices' equal op ids never meet (and an
// edge's op ids cover its outbox's own random identity, so two palaces of
// one device never make the same one), and a row is always the calling
// device's. A send that says its op was queued as another device
// (params._meta[QueuedAsKey], kept on its row: an edge's retry of an op
// it held as queued under another device, on a renamed devbox or a copy
// of one) is answered from that device's record of the same write (tool
// and digest), and a send of that device's is answered from this row's:
// filed once whichever sends first. Another write under the op id is not
// looked at (the send is the caller's own), so the name refuses no
// device's write, answers none with another's, and tells nothing of
// another device's ops. The first call with a key claims it
// (a row in state "inflight"), is forwarded upstream, and, if the
// upstream's answer says the write was applied, that answer's JSON-RPC
// result is recorded (state "done"). A later call with the key gets the
// recorded result back under its own JSON-RPC id ([OutcomeReplayed]) and
// never reaches the upstream; the gateway marks that answer, after its
// filter, result._meta[ReplayedKey] = true (the write landed when the op
// id was first sent: a join tells it from one it sends now). A duplicate that arrives while the first is
// in flight (in this process or another sharing the file) is answered at
// once with [ErrInFlight], a retryable refusal (JSON-RPC [CodeInFlight]):
// it holds nothing while it waits, not even the gateway's write slot,
// which the forward takes after the claim.
//
// A claim older than StaleAfter plus StaleGrace outlived its holder (a
// gateway killed mid-forward: the upstream may or may not have applied
// the write); so did, StaleGrace after it was taken (serve may still be
// applying it), a claim whose process no longer runs
// (each Ledger holds a flock on <ledger>.live/<instance>, and a claim
// names its instance: live.go). The op is then in doubt (Applied, an
// operator's restore, settles it, by the same two tests): a call for it is answered
// [ErrInDoubt] ([CodeInDoubt]) and it is never forwarded again on its
// own. The edge looks the write up where its record type has a look-up
// and sends it again, with params._meta[ResendKey] = "looked-up", only if
// it is not there; for one without a look-up (an artifact, a task) it
// waits in doubt for an operator, whose "send it again" carries
// ResendKey = "operator". Such a call takes the stale claim over and is
// forwarded ([OutcomeResent]).
// The forward is told so ([Resent]), unless the op's first send found
// its record on the upstream already: a forward says that before the
// send ([Held], kept in the op's row, also across a gateway stopping
// mid-forward), since after it a record the send made and one that was
// there look alike. A first send may also note what it found before
// sending ([NoteBefore]: a diary room's size and newest entry), and a
// resend on the caller's look-up gets it ([Before]) to compare with what
// is there then.
//
// Only an answer that says the write landed is recorded: an HTTP 200
// JSON-RPC result that is not isError and whose JSON text has neither
// success:false nor an "error" member. Anything else — a transport failure,
// a JSON-RPC error (MemPalace's -32000 "database is locked"), isError,
// success:false, a non-JSON (e.g. SSE) body — is handed back but not
// recorded ([OutcomeUnrecorded]), and the key returns to state "open" so
// the next attempt is forwarded again. Recording a failure would turn a
// transient "database is locked" into a permanent answer for that op; a
// failure answer means "not applied", the same reading the edge makes
// without a gateway.
//
// An op id is one write: the tool and arguments digest of its first use
// are kept, and a later call with the same key but another tool or digest
// is refused with [ErrReused].
//
// The forward runs on a context detached from the caller's cancellation
// (bounded by Options.StaleAfter, default 2 minutes): if the edge hangs up
// mid-call, the gateway still finishes the upstream call and records its
// answer, so the edge's retry is a replay rather than an ambiguous second
// write.
//
// # Storage and cost
//
// SQLite (modernc.org/sqlite, pure Go: CGO_ENABLED=0 keeps working) in WAL
// mode with synchronous=NORMAL, file mode 0600, at [Beside] the audit log
// (<dir of audit_log>/op-ledger.sqlite). A process crash loses nothing; a
// power cut may forget the last records, whose retries are then forwarded
// again (the per-type replay rules still hold for them). A fresh op costs
// two single-statement commits (claim, record; a third for [Held]); a replay a no-op insert
// and one indexed read. Statements are prepared once. SQLite's automatic
// checkpoint is off (it fsyncs on the request that crosses its threshold);
// the ledger checkpoints in the background every 256 commits, and an idle
// ledger does nothing.
//
// Rows are kept for the retention (default 7 days, counted from the op
// id's first use) and pruned when the ledger is opened and lazily by a
// claim at most once per [PruneEvery]; an idle gateway runs no timer for
// it. Rows are appended in time order, so a prune deletes the leading
// rows. An edge that lost an answer and retries after the retention gets
// the op forwarded again.
//
// # What the ledger cannot see
//
// It closes the edge-to-gateway gap: an answer lost on the way back to
// the edge. It cannot close the gateway-to-upstream one: if the upstream
// applies a write and the connection drops before its answer reaches the
// gateway, forward returns an error, nothing is recorded and a retry is
// forwarded again. The gateway must therefore tell the edge that such a
// call is ambiguous (sent, no answer), not merely "unreachable", so the
// edge keeps its per-type look-up for that op.
//
// # Wiring (for the gateway's forward step)
//
// After authentication, authorization and the audit probe, for a tools/call
// whose params carry an op id:
//
//	ans, outcome, err := l.Do(ctx, ledger.Call{Device: d.ID, OpID: id,
//		Tool: p.Name, ArgsDigest: keyedDigestOfTheArgs, RequestID: req.ID,
//		Resend: ledger.ResendOf(params)},
//		func(ctx context.Context) (ledger.Answer, error) {
//			// take the write slot here, after the claim, so neither a
//			// replay nor an op in flight queues for it
//			status, body := s.upstreamCall(ctx, …)
//			return ledger.Answer{Status: status, Body: body}, nil
//		})
//
// The answer forward returns is what is recorded and replayed, so it
// should be the answer as the device is to see it (after any filtering).
// errors.Is(err, ErrReused) is a permanent refusal (a JSON-RPC error the
// outbox does not retry); ErrInFlight and ErrInDoubt are answered with
// CodeInFlight and CodeInDoubt; errors.Is(err, ErrUnavailable) means the
// ledger could not be read and forward was not run: refuse the write as
// for an unwritable audit log. Any other error is forward's own. Record outcome in the audit entry, answer
// ans.Status/ans.Body, call [Advertise] on every /mcp answer and
// [AdvertiseInitialize] on the initialize answer. Config: a ledger file
// (default [Beside] audit_log) and a retention in days (default 7).
//
// # Files
//
//	ledger.go    the Ledger: its options, the file and schema, Open and Close
//	do.go        Do: the claim protocol (claim, forward, settle; in flight, in doubt)
//	live.go      which claims' processes still run (a lock file each)
//	upkeep.go    pruning expired rows and the background checkpoints
//	answer.go    which answers are recorded
//	protocol.go  the wire names shared with the edge
//
// The file records its schema version (PRAGMA user_version, 2): one an
// older build made is migrated at Open with one line on the log, and one a
// newer release made is refused (sqlitewal.Versioned), so a rollback is
// told, not misread.
package ledger
