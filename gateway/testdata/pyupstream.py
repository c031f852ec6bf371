"""An upstream that parses requests as MemPalace's Python server does.

json.loads (exact-case keys, the last duplicate wins) for POST /mcp and
dict(parse_qsl(query)) for GET routes. It records what it received
(GET /_received) and answers tools/call with MemPalace-shaped results that
hold data from a wing the test devices may not read ("private_desk"), so a
test sees what the gateway lets through. Prints its port on stdout.
"""
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

received = []
lock = threading.Lock()

PRIVATE = {"drawer_id": "drawer_private_desk_r_1", "wing": "private_desk", "room": "r", "content_preview": "the desk's private secret"}
SHARED = {"drawer_id": "drawer_shared_r_1", "wing": "shared", "room": "r", "content_preview": "a shared note"}
EVENTS = [
    {"id": "evt_1", "from_agent": "pi@desk", "to_agent": "someone@else", "stream": "s", "room": "secret-room", "artifact_ids": ["art_1"]},
    {"id": "evt_2", "from_agent": "pi@desk", "to_agent": "opencode@laptop", "stream": "s", "room": "r", "artifact_ids": ["art_2"]},
]


def result(name, args):
    t = name.removeprefix("mempalace_")
    if t == "search":
        if args.get("cli_compatible"):
            return {"query": args.get("query"), "cli_output": "hit in private_desk: the desk's private secret"}
        hits = [h for h in (dict(SHARED, text="a shared note", similarity=0.5), dict(PRIVATE, text="the desk's private secret", similarity=0.9))
                if not args.get("wing") or h["wing"] == args["wing"]]
        return {"query": args.get("query"), "filters": {"wing": args.get("wing")}, "total_before_filter": 2, "results": hits}
    if t == "list_drawers":
        ds = [d for d in (SHARED, PRIVATE) if not args.get("wing") or d["wing"] == args["wing"]]
        return {"drawers": ds, "total": len(ds), "count": len(ds), "offset": 0, "limit": 20}
    if t == "checkpoint":
        return {"added": [], "errors": [], "duplicates": [{"room": "r", "matches": [
            {"id": "drawer_private_desk_r_1", "wing": "private_desk", "room": "r", "similarity": 0.99, "content": "the desk's private secret"}]}]}
    if t == "diary_read":
        wing = args.get("wing")
        entries = [{"date": "2026-11-30", "timestamp": "t", "topic": "general", "content": "diary entry in wing_opencode"}]
        if not wing or wing == "private_desk":
            entries.append({"date": "2026-11-30", "timestamp": "t", "topic": "general", "content": "the desk's private secret"})
        if wing == "private_desk":
            entries = entries[1:]
        return {"agent": args.get("agent_name", "").lower(), "entries": entries, "total": len(entries), "showing": len(entries)}
    if t == "get_drawer":
        d = PRIVATE if "private" in args.get("drawer_id", "") else SHARED
        return {"drawer_id": d["drawer_id"], "wing": d["wing"], "room": "r", "content": d["content_preview"], "metadata": {}}
    if t == "list_wings":
        return {"wings": {"shared": 1, "private_desk": 1}}
    if t == "get_taxonomy":
        return {"taxonomy": {"shared": {"r": 1}, "private_desk": {"r": 1}}}
    if t in ("event_list", "event_wait"):
        evs = [e for e in EVENTS if (not args.get("to_agent") or e["to_agent"] in (args["to_agent"], "*"))
               and (not args.get("from_agent") or e["from_agent"] == args["from_agent"])]
        return {"events": evs, "count": len(evs)}
    if t == "event_ack":
        target = next((e for e in EVENTS if e["id"] == args.get("event_id")), None)
        if target is None:
            return {"success": False, "error": "event not found"}
        return {"success": True, "event": {"id": "evt_ack", "type": "event.ack", "stream": target["stream"], "room": target["room"], "to_agent": target["from_agent"]}}
    if t == "artifact_get":
        aid = args.get("artifact_id")
        if aid not in ("art_1", "art_2"):
            return {"error": f"artifact '{aid}' not found"}
        return {"artifact": {"id": aid, "kind": "note", "created_by": "pi@desk", "content": "the desk's private secret"}}
    if t == "add_drawer":
        if str(args.get("content", "")).startswith("slow"):
            time.sleep(0.1)
        return {"success": True, "drawer_id": "drawer_x", "wing": args.get("wing"), "room": args.get("room"), "chunks": 1}
    return {"success": True}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, code, body, ctype="application/json; charset=utf-8"):
        b = body.encode() if isinstance(body, str) else body
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(b)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b)

    def do_GET(self):
        u = urlsplit(self.path)
        if u.path == "/_received":
            with lock:
                return self.send(200, json.dumps(received))
        if u.path == "/healthz":
            return self.send(200, "ok\n", "text/plain; charset=utf-8")
        with lock:
            received.append({"path": u.path, "query": dict(parse_qsl(u.query))})
        return self.send(200, "id: evt_2\nevent: logstream\ndata: {}\n\n", "text/event-stream; charset=utf-8")

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            msg = json.loads(raw)
        except ValueError:
            return self.send(400, json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}))
        params = msg.get("params") or {}
        rec = {"path": self.path, "method": msg.get("method"), "name": params.get("name"), "arguments": params.get("arguments")}
        with lock:
            received.append(rec)
        if "id" not in msg:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if msg.get("method") == "tools/call":
            res = {"content": [{"type": "text", "text": json.dumps(result(params.get("name", ""), params.get("arguments") or {}), indent=2)}]}
        else:
            res = {}
        self.send(200, json.dumps({"jsonrpc": "2.0", "id": msg.get("id"), "result": res}))


if __name__ == "__main__":
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()
