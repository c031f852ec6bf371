// Package mailbox answers "what do I still owe?" on RFC 003's coordination
// log: the owed set, derived from the permanent, append-only event log,
// never read from it (RFC 003 §3.3).
//
// status is written once into an immutable row, so a directed
// status="open" event keeps matching `to_agent=<me> status=open` forever,
// answered or not (§7.2). The mailbox instead derives, with the reference
// semantics of §3.3, which events directed at an agent still lack a
// terminal reply of its own:
//
//  1. the event is directed at the agent: to_agent equals its identity
//     exactly. "*" broadcasts owe nobody a reply (§7.4) and to_agent=NULL is
//     addressed to nobody;
//  2. the agent did not write it (you cannot owe yourself);
//  3. no event of the agent's that comes strictly later (higher seq), is
//     joined to it, and has a terminal status (applied, superseded,
//     failed, blocked) exists. claimed and ready announce progress and do
//     not clear.
//
// Joined means, for a reply naming an ask in metadata.ack_of (what
// event_ack writes), that it names its id: an ack answers the ask it
// names and no other. Else the same stream and correlation_id on a reply
// addressed to its sender (to_agent = its from_agent). RFC 003 joins on
// a shared correlation_id alone, but event_ack copies the ask's
// correlation id into every ack, and any sender can reuse another's: an
// ack of one ask would clear every ask sharing its id, on another stream,
// posted after it (an ack written offline lands after asks its writer
// never saw) or from an untrusted sender, none of which it answered, and
// the mailbox of one stream would disagree with the mailbox of all. An
// ack answers from any stream: the mailbox of one stream is the asks on
// it in the mailbox of all, derived from the same read (the agent's
// answers on every stream), never a read of that stream alone. A reply
// addressed to nobody answers nobody. A reply clears only when its
// origin vouches that the asked agent's device wrote it (vouched): one
// the gateway stamped (it takes an agent name only from the device that
// holds it) or one with no origin (no gateway; the agent's own write
// still in the outbox). One of unknown origin never clears a stamped ask,
// and clears an unstamped one only for a reader that trusts unknown
// origins; the ask's why says it was answered by an untrusted sender.
//
// One reading the rules leave implicit is made explicit: an answer is
// never owed. An ack (metadata.ack_of), whatever its status, answers the
// ask it names (event_ack routes it back to the asker): a claimed or
// ready one reports progress to the asker and asks nothing of it. An
// event that itself has a terminal status closes its thread. Were either
// owed, the asker would be told to ack the ack, and a claimed ack of it
// would be owed back: ping-pong.
//
// Items come oldest first, each with a sentence saying why it is owed;
// under a limit, those from trusted senders (gateway/origin) are kept
// first, so no flood of untrusted asks pushes a trusted one out.
//
// The package holds the pure derivation (Derive), the pager that reads
// the primary's log through mempalace_event_list in pages of at most 500
// with since_event_id cursors (Fetch), the combined Owed call and its
// Result (the shape the CLI prints and the edge's mempalace_mailbox tool,
// mailbox prompt and mempalace://mailbox resource answer; Bounded cuts it
// to the tool's and the resource's byte bounds, Only gives one item
// whole), a Mailbox that
// remembers its last view to answer degraded while the primary is down,
// the outbox merge (pending replies count as sent), and the identity
// helpers (<harness>@<label>, RFC 003 §3.2; the bare-from_agent warning,
// §7.7), and Printable, which makes what the log says (written by any
// device, an untrusted one included) safe to show on one line to a
// terminal or an agent, and Quoted, how an identity is named there (in
// quotes: a valid name can read as prose). It reads no environment: identities and sources come in as
// parameters.
//
// Ordering is seq today (hub-and-spoke: one replica, so arrival order is
// a total order every client agrees on). The single function that decides
// "later" is before, in derive.go; switching to hlc is a change to that
// function only (§7.3, §9.3).
package mailbox
