// Connects to an MCP server over Streamable HTTP the way opencode's remote
// entry does (the official SDK's StreamableHTTPClientTransport, the
// entry's headers as requestInit.headers, connect then tools/list), N
// times in a row, and prints one JSON line: how many connects there were
// and every one that failed. Meant to run under opencode's own runtime
// (BUN_BE_BUN=1 opencode remote-connects.mjs ...): Bun's fetch, not
// Node's, is what opencode connects with.
// Usage: HEADERS='{"Authorization": "Bearer ..."}' remote-connects.mjs <url> <n>
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, n] = process.argv.slice(2);
const headers = JSON.parse(process.env.HEADERS ?? "{}");
const failures = [];
for (let i = 0; i < Number(n); i++) {
  const client = new Client({ name: "opencode", version: "remote-connects" }, { capabilities: { roots: {} } });
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  try {
    await client.connect(transport);
    const { tools } = await client.listTools();
    if (tools.length === 0) failures.push({ i, error: "no tools" });
  } catch (e) {
    failures.push({ i, error: String(e?.message ?? e), code: e?.code });
  }
  await client.close().catch(() => {});
}
process.stdout.write(JSON.stringify({ runtime: process.versions.bun ? "bun " + process.versions.bun : "node " + process.version, connects: Number(n), failures }) + "\n");
