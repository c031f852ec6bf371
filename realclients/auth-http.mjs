// A compliant Streamable HTTP MCP server (server-everything on the official
// SDK's transport: sessions, SSE responses) that requires a bearer token.
// Loopback only. Logs method, session and Authorization of every request.
// Usage: MCP_TOKEN=secret PORT=3902 node auth-http.mjs
import express from "express";
import { randomUUID } from "node:crypto";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { createServer } from "@modelcontextprotocol/server-everything/dist/server/index.js";

const TOKEN = process.env.MCP_TOKEN ?? "";
const PORT = Number(process.env.PORT ?? 3902);
const app = express();
app.use(express.json({ limit: "20mb" }));
const transports = new Map();
app.use("/mcp", (req, res, next) => {
  const auth = req.headers["authorization"];
  console.error(`${req.method} /mcp session=${req.headers["mcp-session-id"] ?? "-"} auth=${auth ?? "-"} rpc=${req.body?.method ?? "-"}`);
  if (TOKEN && auth !== `Bearer ${TOKEN}`) {
    res.status(401).set("WWW-Authenticate", 'Bearer realm="testbed"').json({ error: "unauthorized" });
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
    const { server, cleanup } = createServer();
    transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), onsessioninitialized: (id) => transports.set(id, transport) });
    transport.onclose = () => { if (transport.sessionId) { transports.delete(transport.sessionId); cleanup(transport.sessionId); } };
    await server.connect(transport);
  }
  await transport.handleRequest(req, res, req.body);
});
app.listen(PORT, "127.0.0.1", () => console.error(`auth-http listening on http://127.0.0.1:${PORT}/mcp`));
