// Package realpalace runs real MemPalace (the pinned release, Version) for
// integration tests, offline: from a venv scripts/install-mempalace made,
// on throwaway palaces, with an embedding server in Go instead of a
// downloaded model.
//
// # Finding it
//
// Venv(t) returns the venv ($DEVBOX_MEMPALACE_VENV, else
// ~/.cache/devbox-config/mempalace/<Version>/venv, found by the marker the
// install script writes). A test that calls it (New does) skips under
// -short (real MemPalace belongs to the integration tier), skips on a
// developer machine without the venv, and fails in CI (CI set), so CI
// can never pass by skipping. Name such tests TestReal...: scripts/test
// runs them by that prefix inside a network namespace and counts them.
//
// # A palace
//
//	p := realpalace.New(t)          // a palace dir, its own HOME and config dir, an embedder
//	s := p.Stdio(t)                 // mempalace-mcp --palace p.Dir, on pipes
//	ids := s.Seed(t, realpalace.Drawer("w", "r", "text"), realpalace.Fact("a", "b", "c", "", ""))
//	s.Stop()                        // (also done at cleanup)
//	srv := p.Serve(t, "token")      // mempalace serve on 127.0.0.1:<free port>, bearer "token"
//	srv.MustCall(t, "mempalace_search", map[string]any{"query": "text"})
//
// Every process gets Env(): HOME and MEMPALACE_CONFIG_DIR under the test's
// temporary directory, ANONYMIZED_TELEMETRY=False, HF_HUB_OFFLINE=1,
// TRANSFORMERS_OFFLINE=1, MEMPALACE_HUB_FORWARD=0, NO_PROXY, and
// MemPalace's openai-compat embedder pointed at p.Embedder, which answers
// with the double's own vectors (Vector, fakepalace.Embed under
// EmbedModel): a real palace and a fakepalace give the same text the same
// vector, so their distances compare exactly. A palace whose Model is
// set to another name (before its processes start) embeds the same text
// differently while MemPalace records the same identity, "openai-compat":
// two palaces with different embedders behind one name. Nothing is
// inherited from the test's environment.
//
// The edge's child is a real stdio server with
//
//	edge.Config{Child: p.MCPCommand(), ChildEnv: p.Env(), Palace: p.Dir, ...}
//
// and a real primary is srv.URL with srv.Token. Other programs of the
// venv run the same way: p.Stdio(t, p.Bin("mempalace-light-mcp"),
// "--palace", p.Dir) is the light server (palace_query, palace_exec,
// palace_coordinate).
//
// # Stopping, and what is left behind
//
// Each process leads its own process group. Stop ends the group (SIGTERM,
// then SIGKILL), so `mempalace serve` and the server it runs go together;
// Kill is a crash (SIGKILL at once); Server.Restart brings serve back on
// the same port and token (a primary that comes back). After stopping,
// every stop checks that no process of the group, and none whose command
// line or working directory names the palace's scratch directory, is
// still alive; the cleanup New's helpers register fails the test if one
// is. serve answers /healthz within about 2 s; Serve waits for it.
//
// # Talking to it
//
// Client speaks JSON-RPC over either wire: Send (raw bytes, the answer's
// bytes), RPC (method and params), Call (a tool; a JSON-RPC error is an
// *RPCError, MemPalace's in-band {"success": false} or {"error": ...} is
// the decoded answer), MustCall, Tools (tools/list) and Seed (calls that
// must succeed). HTTPClient(url, token) is a Client for any endpoint that
// speaks serve's HTTP wire: a gateway, or a proxy in front of serve.
//
// For a program that is not a test (bench/), StartEmbedder, Open,
// Palace.StartStdio and Palace.StartServe do the same work and return
// errors; the caller stops what it started.
package realpalace
