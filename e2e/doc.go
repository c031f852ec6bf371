// Package e2e proves the whole journey a user makes with real software
// nobody here wrote: opencode (and pi with pi-mcp-adapter) as the harness,
// driven by a mock model (testbed/mockmodel) that makes it call MemPalace
// tools, through every rung of the ladder; and what each pinned harness
// client does with an MCP server's instructions (the table in
// docs/harnesses.md is generated from those tests' cases).
package e2e
