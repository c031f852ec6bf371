// Package redact takes a secret out of what another server said as an
// error before it is stored, logged or passed on. A server, a proxy in
// front of it or its debug page may repeat the request's Authorization
// header in an error (a JSON-RPC error's message or data, an isError tool
// result's text, an HTTP error body); the side that received it holds the
// secret it sent (the edge its MEMPALACE_REMOTE_TOKEN, the gateway its
// upstream token) and replaces it, in every form a server repeats it, and
// every Bearer or Basic credential's value, with [redacted]. Successful
// answers are never read here: a drawer may hold any text.
//
// Topology cuts what an error says of where the server runs (URLs,
// absolute paths) for a reader who may not see it: the gateway's error
// answers to a device that is not admin.
//
// NotShown is the rule for a user's value a warning or an error repeats
// (a variable's, a config's literal a parser quotes): short, without
// whitespace, and holding no piece of MEMPALACE_REMOTE_TOKEN's value.
package redact
