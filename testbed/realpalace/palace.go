package realpalace

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Palace is a throwaway palace directory with everything a MemPalace
// process on it needs: its own HOME and MEMPALACE_CONFIG_DIR, and an
// embedding server.
type Palace struct {
	// Dir is the palace directory (--palace).
	Dir string
	// Home is HOME for the palace's processes; MEMPALACE_CONFIG_DIR and
	// the XDG directories are inside it.
	Home string
	// Venv is the pinned venv the processes run from.
	Venv string
	// Embedder answers the palace's embedding calls.
	Embedder *Embedder
	// Model is the embedding model its processes ask the Embedder for
	// (MEMPALACE_EMBEDDING_API_MODEL; Open sets EmbedModel). Another name
	// embeds the same text differently while MemPalace records the same
	// identity, the bare "openai-compat": a palace with another embedder
	// behind one name.
	Model   string
	scratch string
	groups  *groups
}

// New makes a palace in t's temporary directory with an embedder of its
// own (closed at cleanup). It skips or fails as Venv does.
func New(t testing.TB) *Palace {
	t.Helper()
	venv := Venv(t)
	emb, err := StartEmbedder()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Close)
	p, err := Open(venv, t.TempDir(), emb)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Open makes a palace under scratch (which must exist), embedding
// through emb: New's work, for a program that is not a test (bench/).
func Open(venv, scratch string, emb *Embedder) (*Palace, error) {
	scratch, err := filepath.Abs(scratch)
	if err != nil {
		return nil, err
	}
	p := &Palace{Dir: filepath.Join(scratch, "palace"), Home: filepath.Join(scratch, "home"), Venv: venv, Embedder: emb, Model: EmbedModel, scratch: scratch, groups: &groups{}}
	for _, d := range []string{p.Dir, filepath.Join(p.Home, ".config", "mempalace")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Scratch is where a program that is not a test (bench/) keeps real
// palaces: the venv, a temporary directory and one embedder for them all.
// Close stops the embedder and removes the directory; stop the palaces'
// processes first.
type Scratch struct {
	Venv, Dir string
	Embedder  *Embedder
}

// NewScratch finds the venv (Find), makes a temporary directory named
// after prefix and starts an embedder.
func NewScratch(prefix string) (*Scratch, error) {
	venv, err := Find()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	emb, err := StartEmbedder()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &Scratch{Venv: venv, Dir: dir, Embedder: emb}, nil
}

// Open makes a palace in Dir/name.
func (s *Scratch) Open(name string) (*Palace, error) {
	dir := filepath.Join(s.Dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return Open(s.Venv, dir, s.Embedder)
}

// Close stops the embedder and removes Dir.
func (s *Scratch) Close() error {
	s.Embedder.Close()
	return os.RemoveAll(s.Dir)
}

// Env is the complete environment of a MemPalace process on this palace
// (nothing is inherited): its own HOME and config directory, no
// telemetry, no model or hub downloads, no hub forwarding, the
// openai-compat embedder pointed at Embedder. Pass it as the edge's
// ChildEnv, with MCPCommand as its Child.
func (p *Palace) Env() []string {
	h := p.Home
	return []string{
		"HOME=" + h,
		"MEMPALACE_CONFIG_DIR=" + filepath.Join(h, ".config", "mempalace"),
		"XDG_CONFIG_HOME=" + filepath.Join(h, ".config"),
		"XDG_CACHE_HOME=" + filepath.Join(h, ".cache"),
		"XDG_DATA_HOME=" + filepath.Join(h, ".local", "share"),
		"HF_HOME=" + filepath.Join(h, ".cache", "huggingface"),
		"PATH=" + filepath.Join(p.Venv, "bin") + ":/usr/local/bin:/usr/bin:/bin",
		"LANG=C.UTF-8",
		"PYTHONDONTWRITEBYTECODE=1", // the venv is shared: tests never write into it
		"ANONYMIZED_TELEMETRY=False",
		"HF_HUB_OFFLINE=1",
		"TRANSFORMERS_OFFLINE=1",
		"MEMPALACE_HUB_FORWARD=0",
		"NO_PROXY=127.0.0.1,localhost",
		"no_proxy=127.0.0.1,localhost",
		"MEMPALACE_EMBEDDING_MODEL=openai-compat",
		"MEMPALACE_EMBEDDING_API_URL=" + p.Embedder.URL,
		"MEMPALACE_EMBEDDING_API_MODEL=" + p.Model,
	}
}

// Bin is a program of the venv (mempalace, mempalace-mcp,
// mempalace-light-mcp).
func (p *Palace) Bin(name string) string { return filepath.Join(p.Venv, "bin", name) }

// MCPCommand is the stdio server's argv on this palace:
// mempalace-mcp --palace Dir (the edge's Child).
func (p *Palace) MCPCommand() []string { return []string{p.Bin("mempalace-mcp"), "--palace", p.Dir} }

// StartStdio starts argv (default MCPCommand) with Env on pipes; the
// caller stops it. Stdio's Client speaks newline-delimited JSON-RPC.
func (p *Palace) StartStdio(argv ...string) (*Stdio, error) { return p.StartStdioEnv(nil, argv...) }

// StartStdioEnv is StartStdio with extra variables after Env's (a later
// one wins): the palace by MEMPALACE_PALACE_PATH instead of --palace,
// another embedding model. The caller stops it.
func (p *Palace) StartStdioEnv(extra []string, argv ...string) (*Stdio, error) {
	if len(argv) == 0 {
		argv = p.MCPCommand()
	}
	return startStdio(argv, append(p.Env(), extra...), p.scratch, p.groups)
}

// Stdio starts the stdio server (argv, default MCPCommand) for a test and
// stops it at cleanup, failing the test if any process is left behind.
func (p *Palace) Stdio(t testing.TB, argv ...string) *Stdio {
	t.Helper()
	s, err := p.StartStdio(argv...)
	return stopAtCleanup(t, s, err)
}

// stopAtCleanup fails the test on a start error, else stops the process
// at cleanup and fails the test if anything is left behind.
func stopAtCleanup[P interface{ Stop() error }](t testing.TB, p P, err error) P {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// Server is `mempalace serve` on 127.0.0.1 with a bearer token.
type Server struct {
	*Client
	// URL is the MCP endpoint (http://127.0.0.1:PORT/mcp), Base without
	// the path.
	URL, Base string
	Port      int
	Token     string
	palace    *Palace
	proc      *proc
}

// StartServe starts `mempalace serve --host 127.0.0.1 --port N --palace
// Dir` with token in its environment (MEMPALACE_MCP_HTTP_TOKEN, never on
// the command line) on a free port, and waits until /healthz answers.
func (p *Palace) StartServe(token string) (*Server, error) {
	var last error
	for range 3 { // a free port can be taken between the check and the bind
		s := &Server{Token: token, palace: p}
		if s.Port, last = freePort(); last != nil {
			continue
		}
		if last = s.start(); last == nil {
			return s, nil
		}
	}
	return nil, last
}

// Serve starts `mempalace serve` for a test (StartServe) and stops it,
// with its server child, at cleanup, failing the test if any process is
// left behind.
func (p *Palace) Serve(t testing.TB, token string) *Server {
	t.Helper()
	s, err := p.StartServe(token)
	return stopAtCleanup(t, s, err)
}

func (s *Server) start() error {
	s.Base = "http://127.0.0.1:" + strconv.Itoa(s.Port)
	s.URL = s.Base + "/mcp"
	env := append(s.palace.Env(), "MEMPALACE_MCP_HTTP_TOKEN="+s.Token)
	argv := []string{s.palace.Bin("mempalace"), "serve", "--host", "127.0.0.1", "--port", strconv.Itoa(s.Port), "--palace", s.palace.Dir}
	pr, err := startProc(argv, env, s.palace.scratch, s.palace.groups, nil, nil)
	if err != nil {
		return err
	}
	s.proc = pr
	s.Client = HTTPClient(s.URL, s.Token)
	if err := s.waitHealthy(90 * time.Second); err != nil {
		stopErr := pr.stop(5 * time.Second)
		return fmt.Errorf("mempalace serve on port %d: %w (stop: %v)\n%s", s.Port, err, stopErr, pr.log.String())
	}
	return nil
}

// waitHealthy polls GET /healthz until it answers 200 "ok".
func (s *Server) waitHealthy(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	c := &http.Client{Timeout: 2 * time.Second}
	for {
		if s.proc.exited() {
			return errExited
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Base+"/healthz", nil)
		resp, err := c.Do(req)
		if err == nil {
			b := make([]byte, 8)
			n, _ := resp.Body.Read(b)
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.TrimSpace(string(b[:n])) == "ok" {
				cancel()
				return s.ownsPort()
			}
		}
		cancel()
		if time.Now().After(deadline) {
			return fmt.Errorf("/healthz not ok after %s", limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ownsPort checks that the healthy server on the port is this one: a
// ping with this server's token. A free port can be taken between the
// check and the bind by another test's serve, whose /healthz answers
// all the same; it refuses this token (401), and the start is retried on
// another port.
func (s *Server) ownsPort() error {
	if _, err := HTTPClient(s.URL, s.Token).RPC("ping", nil); err != nil {
		return fmt.Errorf("port %d is another server's, or it cannot answer: %w", s.Port, err)
	}
	return nil
}

// Stop ends serve and its server child (SIGTERM, SIGKILL after 10 s) and
// reports any process left behind. Stopping twice is a no-op.
func (s *Server) Stop() error {
	if s.proc == nil || s.proc.exited() && s.proc.alive(s.proc.cmd.Process.Pid) == nil {
		return nil
	}
	return s.proc.stop(10 * time.Second)
}

// Kill ends serve and its child at once (SIGKILL), as a crash would.
func (s *Server) Kill() error {
	if s.proc == nil || s.proc.exited() {
		return nil
	}
	return s.proc.kill()
}

// Restart starts serve again on the same palace, port and token (after
// Stop or Kill): a primary coming back.
func (s *Server) Restart() error {
	if s.proc != nil && !s.proc.exited() {
		return fmt.Errorf("mempalace serve on port %d is still running", s.Port)
	}
	return s.start()
}

// Palace is the palace serve serves.
func (s *Server) Palace() *Palace { return s.palace }

// Pid is serve's process id (the leader of its process group).
func (s *Server) Pid() int { return s.proc.cmd.Process.Pid }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
