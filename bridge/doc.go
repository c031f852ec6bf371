// Package bridge is `devbox-config bridge`: the harness's MemPalace MCP
// server on stdio, every tool forwarded to the primary over Streamable
// HTTP with the bearer token read from the environment.
//
// It exists for harnesses that cannot reference the token from the
// environment in a header (Cline sends header values verbatim; Auggie,
// Zed and Goose document no reference): their remote rung runs the
// bridge instead of naming the URL, so the token is in no file. It holds
// no state, starts no local palace and opens one connection; edge mode is
// `devbox-config edge`. Like the URL other harnesses name in that rung, it
// is a transport: the primary's tool list passes as it comes (the edge's
// catalogue filter is the edge's); only the token is taken out of errors.
package bridge
