// Package wire is the edge's JSON-RPC wire code, shared by the agent side
// (the fast lane and the guard in front of the SDK), the local palace
// server (a child over stdio) and the primary (over HTTP): line framing,
// the agent's requests still owed an answer (Pending, drained at EOF,
// and each answered once: those left at the very end by the edge itself),
// request and notification encoding, splitting an answer into its result
// or its error, and the tool-call codec (params and results), picked with
// gjson rather than decoded whole.
//
// Nothing here knows which peer it talks to; errors say what is wrong with
// the message, and the caller says whose message it was.
package wire
