package gateway

// ruleNever decides a tool no device may run on the shared primary
// (catalogue.Never: sync and mine), admin included.
const ruleNever Rule = "never on a shared primary"

// neverWhy is a Never tool's refusal: why, and where to run it instead.
var neverWhy = map[string]string{
	"sync": "mempalace_sync is never run on the shared primary through the gateway, for any device: it prunes the drawers whose source files are missing on the host it runs on, so on a shared primary it deletes other machines' drawers (RFC 001 §7.2). " +
		"Run `mempalace sync` on the primary's host, against its own sources (a dry run first); an edge keeps its own sync on its local palace",
	"mine": "mempalace_mine is never run on the shared primary through the gateway, for any device: it reads files on the primary's host, not this device's, and holds the primary's single write slot for its whole run, stalling every other device (RFC 001 §6.2: no remote mine). " +
		"Run `mempalace mine` on the primary's host against its own sources, or mine into this device's local palace (an edge keeps mine local)",
}
