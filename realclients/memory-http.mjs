// The official server-memory (a knowledge-graph MCP server nobody here
// wrote, no MemPalace tools) served over the official SDK's Streamable
// HTTP transport, as a stand-in primary that is not MemPalace. Each HTTP
// session is bridged to one stdio server-memory child sharing one
// MEMORY_FILE_PATH. Loopback only; requires the bearer token; logs every
// tools/call's name on stderr.
// Usage: MCP_TOKEN=secret PORT=3903 MEMORY_FILE_PATH=/tmp/m.jsonl node memory-http.mjs
import express from "express";
import { randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ListToolsRequestSchema, CallToolRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const require = createRequire(import.meta.url);
const memory = require.resolve("@modelcontextprotocol/server-memory/dist/index.js");
const TOKEN = process.env.MCP_TOKEN ?? "";
const PORT = Number(process.env.PORT ?? 3903);

async function bridge() {
  const client = new Client({ name: "memory-http", version: "1" });
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [memory], env: { ...process.env }, stderr: "ignore" }));
  const server = new Server({ name: "memory-http", version: "1" }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, (req) => client.listTools(req.params));
  server.setRequestHandler(CallToolRequestSchema, (req) => {
    console.error(`tools/call ${req.params.name}`);
    return client.callTool(req.params);
  });
  return { server, client };
}

const app = express();
app.use(express.json({ limit: "20mb" }));
const transports = new Map();
app.use("/mcp", (req, res, next) => {
  if (TOKEN && req.headers["authorization"] !== `Bearer ${TOKEN}`) {
    res.status(401).json({ error: "unauthorized" });
    return;
  }
  next();
});
app.get("/healthz", (req, res) => res.type("text/plain").send("ok\n"));
app.all("/mcp", async (req, res) => {
  const sid = req.headers["mcp-session-id"];
  let transport = sid ? transports.get(sid) : undefined;
  if (!transport) {
    if (sid || req.method !== "POST") {
      res.status(404).json({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null });
      return;
    }
    const { server, client } = await bridge();
    transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), onsessioninitialized: (id) => transports.set(id, transport) });
    transport.onclose = () => { if (transport.sessionId) transports.delete(transport.sessionId); client.close(); };
    await server.connect(transport);
  }
  await transport.handleRequest(req, res, req.body);
});
app.listen(PORT, "127.0.0.1", () => console.error(`memory-http listening on http://127.0.0.1:${PORT}/mcp`));
