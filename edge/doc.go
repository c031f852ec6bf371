// Package edge is `devbox-config edge`: the harness's MCP server in edge
// mode (RFC 001 Phase 2). A local-first proxy: the local palace (a child
// mempalace-mcp) is always written, replicated writes go through a durable
// outbox to the primary, reads merge both, and with the primary down it
// degrades instead of failing. Tools never vanish.
//
// Its parts, one file each:
//
//	edge.go          lifecycle: New, Serve, start-up of the edge-mode parts
//	config.go        Config, built from the ladder's reading of the env
//	registry.go      the tools the agent sees, and their cache file
//	call.go          one tool call as the edge understands it, once: its
//	                 catalogue record, its arguments as sent, and parsed
//	                 strictly (strictjson: what the gateway's parse would
//	                 refuse, the edge refuses before any palace sees it)
//	router.go        one tool call -> its catalogue route (local, primary,
//	                 merged, by id, queued), behind two small interfaces
//	mergedread.go    reads asked of both palaces and merged
//	origins.go       the origin each merged record carries (gateway/origin's palace)
//	wake.go          the owed asks told at initialize and during a session
//	deadnote.go      the writes the primary refused for good, and a
//	                 checkpoint's items it left out, told likewise
//	replicate.go     writes: local first, then the outbox (the policy's cut,
//	                 the agent's bytes with the edge's edits spliced in;
//	                 kgdate.go: a KG end's date, fixed for both palaces;
//	                 cutwrite.go: a write the local server's death cut, given
//	                 to its restart first, as localdelete.go's kept deletes;
//	                 theirs.go: the primary's text given to the local palace
//	                 for a conflicting edit the operator dropped)
//	flushtarget.go   the primary as the outbox's flusher sends to it (pace.go:
//	                 its writes paced to a gateway's write rate once refused)
//	provenance.go    added_by = "<agent>/<label>/<device>"
//	fastlane.go      tool calls answered beside the SDK's session
//	child.go         the local palace server's supervisor (childconn.go: its pipe;
//	                 child_linux.go: it dies with the edge)
//	primary.go       the primary's client and breaker (primarycall.go: one call,
//	                 primaryprobe.go: the breaker's probe and the token check;
//	                 the connection kept ready is warmconn's)
//	policy.go        policy.json: which wings replicate (policywatch.go: re-read
//	                 when it changes; writes held while it does not parse)
//	result.go        results the edge builds and annotates
//	tombstone.go     deletes: local, a tombstone merged reads respect, queued
//	                 only for an admin device behind a gateway
//	                 (tombstonecheck.go: what edge status asks the primary)
//
// The JSON-RPC wire code lives in edge/wire, durability in edge/outbox,
// and what each MemPalace tool is in the catalogue package.
package edge
