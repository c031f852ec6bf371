// Package testbed gives integration tests the real third-party software
// they drive: the pinned npm packages of realclients/package.json
// (opencode, the official MCP TypeScript SDK, the Inspector CLI,
// server-everything, server-memory, mcp-remote), and this repository's
// binaries built fresh.
//
// The npm packages live outside the Go tree (node_modules would be walked
// by ./...): in $DEVBOX_REALCLIENTS, else ~/.cache/devbox-config/realclients,
// installed there by .ci/run. Without them a test skips on a developer
// machine and fails in CI (CI=true), so CI can never pass by skipping.
//
// It also starts the MemPalace test double, package fakepalace, as an
// HTTP primary for any test (Primary), so testbed imports fakepalace.
package testbed

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Dir returns the directory holding the installed npm packages.
func Dir(t testing.TB) string {
	t.Helper()
	notInUnitTier(t, "the npm clients")
	dir := realclients()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "opencode-ai")); err != nil {
		Missing(t, "pinned npm packages not installed in "+dir+" (run scripts/test, or: DEVBOX_REALCLIENTS="+dir+" scripts/install-realclients)")
	}
	return dir
}

// realclients is where scripts/install-realclients installs: DEVBOX_REALCLIENTS, else
// the project's cache directory.
func realclients() string {
	if dir := os.Getenv("DEVBOX_REALCLIENTS"); dir != "" {
		return dir
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "devbox-config", "realclients")
}

// GooseYAML returns realclients/goose-yaml as scripts/install-realclients
// built it: Goose's YAML library reading a config.yaml (Goose has no npm
// package). The installer builds it only where cargo is; without cargo the
// test skips, saying so, in CI too.
func GooseYAML(t testing.TB) string {
	t.Helper()
	notInUnitTier(t, "goose-yaml")
	bin := filepath.Join(realclients(), "goose-yaml", "release", "goose-yaml")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	msg := "goose-yaml is not built at " + bin + " (run scripts/install-realclients)"
	if _, err := exec.LookPath("cargo"); err != nil {
		t.Skip(msg + ": cargo is not installed, so the installer built nothing")
	}
	Missing(t, msg)
	return ""
}

// Missing skips a test that lacks something installed, or fails it under
// CI, so CI can never pass by skipping.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Bin returns node_modules/.bin/<name> of the pinned npm packages (Missing
// when it is not installed).
func Bin(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(Dir(t), "node_modules", ".bin", name)
	if _, err := os.Stat(p); err != nil {
		Missing(t, fmt.Sprintf("%s is not installed in %s (realclients/package.json pins it; run scripts/install-realclients)", name, Dir(t)))
	}
	return p
}

// Module returns the path of a file inside an installed npm package.
func Module(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(Dir(t), "node_modules", rel)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return p
}

// Opencode returns the opencode binary (the platform package's, so no
// postinstall step is needed).
func Opencode(t testing.TB) string {
	t.Helper()
	return platformBinary(t, "opencode", "opencode-linux-x64", "opencode-linux-x64-baseline", "opencode-linux-arm64")
}

// Kilo returns the Kilo CLI binary (its platform package's, as Opencode).
func Kilo(t testing.TB) string {
	t.Helper()
	return platformBinary(t, "kilo", "@kilocode/cli-linux-x64", "@kilocode/cli-linux-x64-baseline", "@kilocode/cli-linux-arm64")
}

// platformBinary is bin/<name> of the first of pkgs installed.
func platformBinary(t testing.TB, name string, pkgs ...string) string {
	t.Helper()
	for _, pkg := range pkgs {
		p := filepath.Join(Dir(t), "node_modules", pkg, "bin", name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatalf("no %s platform binary in %s", name, Dir(t))
	return ""
}

// Node returns the node binary.
func Node(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not on PATH")
	}
	return p
}

func moduleRoot(t testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// Home is an isolated HOME for a harness: its own XDG directories and a
// bin directory first on PATH.
type Home struct {
	Dir, Bin, Proj string
	env            map[string]string
}

// NewHome makes an isolated HOME.
func NewHome(t testing.TB) *Home {
	t.Helper()
	d := t.TempDir()
	h := &Home{Dir: d, Bin: filepath.Join(d, "bin"), Proj: filepath.Join(d, "proj")}
	for _, p := range []string{h.Bin, h.Proj} {
		os.MkdirAll(p, 0o755)
	}
	h.env = map[string]string{
		"HOME": d, "XDG_CONFIG_HOME": filepath.Join(d, ".config"), "XDG_DATA_HOME": filepath.Join(d, ".local", "share"),
		"XDG_CACHE_HOME": filepath.Join(d, ".cache"), "XDG_STATE_HOME": filepath.Join(d, ".local", "state"),
		"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1", "NO_COLOR": "1",
		"PATH": h.Bin + string(os.PathListSeparator) + "/usr/local/bin:/usr/bin:/bin",
	}
	return h
}

// Link puts a binary on the home's PATH under name.
func (h *Home) Link(t testing.TB, bin, name string) {
	t.Helper()
	if err := os.Symlink(bin, filepath.Join(h.Bin, name)); err != nil {
		t.Fatal(err)
	}
}

// Setenv sets a variable for commands run in this home ("" unsets it).
func (h *Home) Setenv(k, v string) { h.env[k] = v }

// Getenv returns a variable of this home's environment.
func (h *Home) Getenv(k string) string { return h.env[k] }

// Lookup is the home's environment as a lookup function.
func (h *Home) Lookup(k string) (string, bool) { v, ok := h.env[k]; return v, ok && v != "" }

// Environ is the home's environment for exec.Cmd.
func (h *Home) Environ() []string {
	var out []string
	for k, v := range h.env {
		if v != "" {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// Run runs a command in the home's project directory with a timeout.
func (h *Home) Run(t testing.TB, timeout time.Duration, name string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = h.Proj, h.Environ()
	cmd.WaitDelay = 5 * time.Second
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// OpencodeMCPStatus runs `opencode mcp list` in h and returns server's
// status and what the command printed. A first answer other than
// "connected" is asked once more, a second later, and retried says so:
// opencode's first tool list has been seen to fail on a loaded two-core
// machine ("Failed to get tools") against a server that answers every
// other call; a server that is really broken fails both.
func OpencodeMCPStatus(t testing.TB, h *Home, oc, server string) (status, printed string, retried bool) {
	t.Helper()
	ask := func() (string, string) {
		out, errOut, err := h.Run(t, 90*time.Second, oc, "mcp", "list")
		return MCPList(out + errOut)[server], fmt.Sprintf("exit: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	status, printed = ask()
	if status == "connected" {
		return status, printed, false
	}
	time.Sleep(time.Second)
	status, printed = ask()
	return status, printed, true
}

// MCPList parses `opencode mcp list` into server name -> status
// ("connected", "failed", "needs authentication", "disabled").
func MCPList(out string) map[string]string {
	res := map[string]string{}
	re := regexp.MustCompile(`[✓✗⚠○]\s+(\S+)\s+(connected|failed|needs authentication|disabled)`)
	for _, m := range re.FindAllStringSubmatch(ansi.ReplaceAllString(out, ""), -1) {
		res[m[1]] = m[2]
	}
	return res
}

// FilesContaining returns the regular files under dir whose bytes contain
// secret, and how many files were read (zero means the check proved
// nothing).
func FilesContaining(dir, secret string) (found []string, read int) {
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil // directories, links, and a FIFO a test made (a read would block)
		}
		if b, err := os.ReadFile(p); err == nil {
			read++
			if bytes.Contains(b, []byte(secret)) {
				found = append(found, p)
			}
		}
		return nil
	})
	return found, read
}

// NoFileContains fails if any file under dir contains secret.
func NoFileContains(t testing.TB, dir, secret string) {
	t.Helper()
	found, read := FilesContaining(dir, secret)
	for _, p := range found {
		t.Errorf("%s contains the secret", p)
	}
	if read == 0 {
		t.Fatalf("no files under %s: the secret check proved nothing", dir)
	}
}

// Request sends an HTTP request (a "Host" entry in hdr sets the Host) and
// returns the response with its body read.
func Request(t testing.TB, method, url, body string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// Script copies realclients/<name> next to the installed node_modules (so
// Node resolves the pinned packages from it) and returns its path.
func Script(t testing.TB, name string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(moduleRoot(t), "realclients", name))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(Dir(t), "scripts")
	os.MkdirAll(dir, 0o755)
	dst := filepath.Join(dir, name)
	if cur, err := os.ReadFile(dst); err != nil || !bytes.Equal(cur, src) {
		tmp := dst + ".tmp" + strconv.Itoa(os.Getpid())
		if err := os.WriteFile(tmp, src, 0o644); err != nil {
			t.Fatal(err)
		}
		os.Rename(tmp, dst)
	}
	return dst
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Proc is a background process started for a test; Stop ends it.
type Proc struct {
	cmd    *exec.Cmd
	stderr *SyncBuffer
	done   chan struct{}
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers (a process's
// output, a logger) and readers (the test).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *SyncBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *SyncBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// Start runs a command in the background (stopped at test cleanup) and
// waits until its stderr contains ready (if not empty).
func Start(t testing.TB, env []string, ready string, name string, args ...string) *Proc {
	t.Helper()
	return StartIn(t, "", env, ready, name, args...)
}

// StartIn is Start in the directory dir ("": the test's).
func StartIn(t testing.TB, dir string, env []string, ready string, name string, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	p := &Proc{cmd: cmd, stderr: &SyncBuffer{}, done: make(chan struct{})}
	cmd.Stderr, cmd.Stdout = p.stderr, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(p.Stop)
	deadline := time.Now().Add(30 * time.Second)
	for ready != "" && !strings.Contains(p.stderr.String(), ready) {
		select {
		case <-p.done:
			t.Fatalf("%s exited before it was ready:\n%s", name, p.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 30 s:\n%s", name, p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p
}

// Log is everything the process wrote so far.
func (p *Proc) Log() string { return p.stderr.String() }

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Stop ends the process (SIGTERM, then SIGKILL after 3 s).
func (p *Proc) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(3 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// Kill ends the process with SIGKILL.
func (p *Proc) Kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// StopClineHub ends the hub daemon a Cline run in home started (Cline
// leaves it running, with that run's environment).
func StopClineHub(home string) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if strings.Contains(string(cmd), "--cline-hub-daemon") && strings.Contains("\x00"+string(env), "\x00HOME="+home+"\x00") {
			syscall.Kill(pid, syscall.SIGTERM)
			for i := 0; i < 50; i++ {
				if syscall.Kill(pid, 0) != nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
