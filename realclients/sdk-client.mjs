// Drives an MCP server over stdio with the official TypeScript SDK and
// prints one JSON line per observation, for Go tests to assert on.
// Usage: node sdk-client.mjs <command> [args...]
// Env: CALLS='[{"name":"echo","arguments":{...},"progress":true}, ...]', LINGER_MS
// A call with "cancel_after_ms" is aborted after that long (the SDK sends
// notifications/cancelled); its line says how long it took to give up.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");
const transport = new StdioClientTransport({ command, args, env: { ...process.env }, stderr: "inherit" });
const client = new Client({ name: "sdk-client", version: "1.0.0" }, { capabilities: {} });
client.fallbackNotificationHandler = async (n) => out({ notification: n.method, params: n.params });
const t0 = Date.now();
await client.connect(transport);
out({ initialized_ms: Date.now() - t0, server: client.getServerVersion() });
if (process.env.LOG_LEVEL) await client.setLoggingLevel(process.env.LOG_LEVEL);
const { tools } = await client.listTools();
out({ tools: tools.map((t) => t.name) });
for (const c of JSON.parse(process.env.CALLS ?? "[]")) {
  const opts = c.progress ? { onprogress: (p) => out({ progress: p }) } : {};
  if (c.cancel_after_ms) {
    const ac = new AbortController();
    setTimeout(() => ac.abort("cancelled by the test"), c.cancel_after_ms);
    opts.signal = ac.signal;
  }
  const started = Date.now();
  try {
    const res = await client.callTool({ name: c.name, arguments: c.arguments ?? {} }, undefined, opts);
    out({ call: c.name, result: res, ms: Date.now() - started });
  } catch (e) {
    out({ call: c.name, error: { code: e.code, message: String(e.message ?? e) }, ms: Date.now() - started });
  }
}
await new Promise((r) => setTimeout(r, Number(process.env.LINGER_MS ?? 200)));
await client.close();
