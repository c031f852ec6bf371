package gateway

import "github.com/joakimp/devbox-config/gateway/deviceinfo"

// Verdict is what the audit log says became of a request: Entry.Decision.
type Verdict string

const (
	// VerdictAllow: authorized and forwarded (or answered by the gateway).
	VerdictAllow Verdict = "allow"
	// VerdictDeny: refused by a rule.
	VerdictDeny Verdict = "deny"
	// VerdictLimited: refused by a rate or the write queue (a client
	// retries).
	VerdictLimited Verdict = "limited"
	// VerdictError: the request could not be read, or the gateway failed.
	VerdictError Verdict = "error"
	// VerdictPending: a write's line written before the write is made.
	VerdictPending Verdict = "pending"
	// VerdictCheckpoint: a signed checkpoint of the chain, not a request.
	VerdictCheckpoint Verdict = "checkpoint"
	// VerdictNewState: the gateway started with --new-state and made the
	// kept files its Note names anew, empty (Server.NoteNewState); not a
	// request.
	VerdictNewState Verdict = "new-state"
)

func (v Verdict) String() string { return string(v) }

// Rule names what decided a request, in the audit line and a refusal's
// data: one of the constants below, or built from the grant that allowed
// it ("read:<wings>", "write:<wings>", "agent:<name>") or the reason a
// request could not be read ("parse: …").
type Rule string

func (r Rule) String() string { return string(r) }

// The rules with fixed names.
const (
	// ruleNotVisible is the one denial for an object a device may not see
	// and for one that does not exist: the two are not told apart.
	ruleNotVisible Rule = deviceinfo.RuleNotVisible
	// ruleQueryLanguage refuses catalogue.QueryLanguage to every device.
	ruleQueryLanguage Rule = "a query-language tool (mempalace-light-mcp): one query string can carry writes, deletes, sync or mine, which no per-wing grant can authorize"

	ruleFrontDoor    Rule = "front-door:host-or-origin"
	ruleNoRoute      Rule = "no-route"
	ruleQuery        Rule = "query"
	ruleAdminOnly    Rule = "admin only"
	ruleStreamAgent  Rule = "stream:agent"
	ruleStreamShare  Rule = "stream:share"
	ruleAuthenticate Rule = "authenticate"
	ruleSize         Rule = "size"
	ruleRead         Rule = "read"
	rulePanic        Rule = "panic"
	ruleProtocol     Rule = "protocol"
	// ruleCancelDropped: a device's notifications/cancelled, answered 202
	// and not forwarded (its requestId is not an id the upstream knows).
	ruleCancelDropped Rule = "protocol:cancel-dropped"
	ruleArguments     Rule = "arguments"
	ruleWriteQueue    Rule = "write_queue"
	ruleBatchCap      Rule = "batch_cap"
	ruleInFlight      Rule = "in_flight"
	ruleAudit         Rule = "audit"
	ruleRateRead      Rule = "rate:read"
	ruleRateWrite     Rule = "rate:write"
	ruleCLIText       Rule = "cli_compatible:wing"  // errCLIText
	ruleCLIUntrusted  Rule = "cli_compatible:trust" // errCLIUntrusted
	// ruleInstructionWing: only admin devices whose write globs match the
	// instruction wing write it.
	ruleInstructionWing Rule = deviceinfo.RuleInstructionWing
	// ruleOriginClaim: a write names a device to attribute it to that the
	// gateway does not honour from this device (origin.MetaKey).
	ruleOriginClaim Rule = "origin-device: admin devices only"
	// ruleReadsAll: an answer that spans wings in a shape the gateway
	// cannot cut (catalogue.ReadAllWings, mesh_peers).
	ruleReadsAll Rule = `its answer spans wings: only a device that reads every wing ("*") may call it`
	// ruleAdminAllWings: an admin tool that acts on the whole palace, or
	// on the primary's server, with no wing to check (delete_by_source,
	// the tunnel and hallway deletes, reconnect, the hook tools).
	ruleAdminAllWings Rule = `it acts on the whole palace: only an admin device that reads and writes every wing ("*") may call it`
	// ruleAuthAmbiguous: more than one Authorization header.
	ruleAuthAmbiguous Rule = "authenticate:ambiguous"
)
