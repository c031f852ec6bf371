package gateway

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joakimp/devbox-config/gateway/ledger"
)

// postRaw sends body to path as the device with token; the HTTP status
// and the answer's bytes.
func (g *gw) postRaw(token, path, body string) (int, []byte) {
	g.t.Helper()
	req, _ := http.NewRequest("POST", g.http.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// One request adds one bounded line to the audit log whatever the size of
// what it sent (attack44 F13: a 4 MiB unknown method made an 8 MiB line,
// method and rule both holding it, and came back whole in the answer; a
// 200,000-byte tool name or wing, a 200 KB line). A cut string keeps its
// first bytes, its length and a keyed digest the operator reproduces (a
// refusal shows it the same way: TestARefusalEchoesAHugeNameCutAsItsLine).
func TestOneRequestAddsABoundedAuditLine(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	tok := g.tokens["laptop-7f3a"]
	huge := strings.Repeat("m", 4<<20)
	long := strings.Repeat("w", 200_000)
	call := func(tool string, args string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
	}
	for _, c := range []struct{ what, path, body string }{
		{"a 4 MiB unknown method", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"` + huge + `"}`},
		{"a 200,000-byte tool name", "/mcp", call("mempalace_"+long, `{}`)},
		{"a 200,000-byte wing", "/mcp", call("mempalace_add_drawer", `{"wing":"`+long+`","room":"r","content":"c"}`)},
		{"a 200,000-byte path", "/" + long, ``},
	} {
		_, answer := g.postRaw(tok, c.path, c.body)
		if c.what == "a 4 MiB unknown method" && len(answer) > 4096 {
			t.Errorf("%s: the answer echoes it: %d bytes", c.what, len(answer))
		}
	}
	g.post(tok, pingBody) // on the same connection: the lines above are written
	b, _ := os.ReadFile(g.srv.cfg.Load().AuditLog)
	for i, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(line) > 2048 {
			t.Errorf("line %d: %d bytes: %.200s", i+1, len(line), line)
		}
	}
	if _, err := Verify(g.srv.cfg.Load().AuditLog, nil); err != nil {
		t.Fatal(err)
	}
	secret, err := os.ReadFile(g.srv.cfg.Load().SecretFile)
	if err != nil {
		t.Fatal(err)
	}
	d := StringDigestOf(bytes.TrimSpace(secret), "laptop-7f3a", []byte(huge))
	var cut Entry
	for _, e := range g.auditLog() {
		if strings.HasPrefix(e.Method, "mmm") {
			cut = e
		}
	}
	if want := fmt.Sprintf("… (%d bytes, digest %s)", len(huge), d); !strings.HasSuffix(cut.Method, want) || len(cut.Method) > maxField+64 {
		t.Fatalf("the cut method %q does not end with %q", cut.Method, want)
	}
}

// A log that holds lines longer than a megabyte (written before lines
// were bounded) still opens and its chain goes on: before, the gateway
// could not start on it (bufio.Scanner: token too long).
func TestALogWithHugeOldLinesStillOpens(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	line, head := sealLine(Entry{Time: time.Now(), Method: strings.Repeat("m", 2<<20), Prev: "genesis"})
	if err := os.WriteFile(file, line, 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := OpenAudit(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.prev != head || a.lines != 1 {
		t.Fatalf("head %q after %d lines, want %q after 1", a.prev, a.lines, head)
	}
	if err := a.Append(Entry{Time: time.Now(), Method: "ping"}, true); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if n, err := Verify(file, nil); err != nil || n != 2 {
		t.Fatalf("%d lines: %v", n, err)
	}
}

// Every authenticated request counts against the device's rate, refused
// or not (attack44 F13: 110 unknown-method requests in a row were never
// limited, nor a body that does not parse); an unknown method is a read.
func TestEveryRequestCountsAgainstTheRate(t *testing.T) {
	t.Parallel()
	d := devices[0]
	d.ReadRate = 0.01 // bursts of 100, one more each 100 s: none while the test runs, however slow the machine
	g := newGW(t, []Device{d})
	limited := 0
	for i := range 200 {
		body := `{"jsonrpc":"2.0","id":1,"method":"no/such/method"}`
		if i%2 == 1 {
			body = `{"jsonrpc":"2.0","id":1,` // does not parse
		}
		_, m := g.post(g.tokens[d.ID], body)
		if e := rpcError(m); e != nil && e["code"] == float64(CodeRateLimited) {
			limited++
		}
	}
	if limited < 90 {
		t.Fatalf("200 refused requests at once, read rate 0.01/s: %d limited", limited)
	}
	last := g.auditLog()
	if e := last[len(last)-1]; e.Decision != VerdictLimited || e.Rule != ruleRateRead || e.Device != d.ID {
		t.Fatalf("the last line: %+v", e)
	}
	if st := g.get(g.tokens[d.ID], "/statusz", nil); st != http.StatusTooManyRequests {
		t.Fatalf("a GET over the rate: %d", st)
	}
}

// A write the op-id ledger recorded before args_digest was keyed (its row
// holds the unkeyed digest), sent again after the upgrade, is answered
// from the record: before, the two digests differed and the resend was
// refused as an op id reused for another write (-32602), which an edge
// takes as final.
func TestAResendAcrossTheKeyedDigestIsAReplay(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	file := filepath.Join(t.TempDir(), ledger.FileName)
	l, err := ledger.Open(file, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	g.srv.Ledger = OpLedger{L: l, Log: slog.New(slog.DiscardHandler)}
	args := map[string]any{"wing": "shared", "room": "r", "content": "filed before the upgrade"}
	opID := strings.Repeat("cd", 32)
	if _, m := g.postOp(g.tokens["desk-9b21"], "mempalace_add_drawer", args, opID); m["error"] != nil {
		t.Fatal(m["error"])
	}
	db, err := sql.Open("sqlite", "file:"+file+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE ops SET args_digest=? WHERE op_id=?`, legacyArgsDigest(args), opID); err != nil {
		t.Fatal(err)
	}
	_, m := g.postOp(g.tokens["desk-9b21"], "mempalace_add_drawer", args, opID)
	if m["error"] != nil {
		t.Fatalf("the resend across the upgrade: %v", m["error"])
	}
	if n := g.primary.Calls("mempalace_add_drawer"); n != 1 {
		t.Errorf("the upstream saw the write %d times, want 1", n)
	}
	other := map[string]any{"wing": "shared", "room": "r", "content": "another write"}
	if _, m := g.postOp(g.tokens["desk-9b21"], "mempalace_add_drawer", other, opID); rpcError(m) == nil || rpcError(m)["code"] != float64(-32602) {
		t.Fatalf("the op id reused for other arguments: %v", m)
	}
}

// A device cannot use the gateway to digest its guesses of what another
// device sent (attack46 N1): before, args_digest was keyed over the
// arguments alone, so laptop sending a guess of ops's secret drawer as
// the arguments of a refused call (a write outside its globs, an unknown
// tool, mempalace_status with an unknown parameter: a read, 50/s) read
// back from the log the digest on ops's line. Now the digest takes in
// the device and the tool; the operator, who knows both for the request
// they hold, still finds its line.
func TestAGuessThroughAnotherDevicesRefusedCallIsNotTheVictimsDigest(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	secretArgs := `{"wing":"wing_secret","room":"keys","content":"TOPSECRET the launch code is 4242"}`
	var args map[string]any
	if err := json.Unmarshal([]byte(secretArgs), &args); err != nil {
		t.Fatal(err)
	}
	if _, e, _ := g.call(g.tokens["admin-0001"], "add_drawer", args); e != nil {
		t.Fatal(e)
	}
	laptop := g.tokens["laptop-7f3a"]
	for _, tool := range []string{"add_drawer", "nosuchtool", "status"} {
		if _, e, _ := g.call(laptop, tool, args); e == nil {
			t.Fatalf("laptop's %s with the guess was not refused", tool)
		}
	}
	g.post(laptop, pingBody) // on the same connection: the lines above are written
	secret, err := os.ReadFile(g.srv.cfg.Load().SecretFile)
	if err != nil {
		t.Fatal(err)
	}
	victim, err := DigestOf(bytes.TrimSpace(secret), "admin-0001", "mempalace_add_drawer", []byte(secretArgs))
	if err != nil {
		t.Fatal(err)
	}
	var found, guesses int
	for _, e := range g.auditLog() {
		switch {
		case e.Device == "admin-0001" && e.Tool == "mempalace_add_drawer":
			if e.ArgsDigest != victim {
				t.Errorf("ops's line carries %s; audit digest --device admin-0001 --tool mempalace_add_drawer gives %s", e.ArgsDigest, victim)
			}
			found++
		case e.Device == "laptop-7f3a" && e.ArgsDigest != "":
			if e.ArgsDigest == victim {
				t.Errorf("laptop's refused %s (%s) carries ops's digest: the guess is confirmed", e.Tool, e.Rule)
			}
			guesses++
		}
	}
	if found == 0 || guesses != 3 {
		t.Fatalf("the log holds %d lines of ops's write and %d of laptop's guesses, want some and 3", found, guesses)
	}
}

// A string a line cut keeps a digest under the device that sent it too:
// the same 300-byte wing another device sends digests otherwise, so the
// gateway is no oracle of the tail it hides (attack46 N1's for strings).
func TestACutStringsDigestIsTheSendersOwn(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	wing := "wing_" + strings.Repeat("s", 250) + "the launch code is 4242"
	for _, dev := range []string{"admin-0001", "laptop-7f3a"} {
		g.call(g.tokens[dev], "list_rooms", map[string]any{"wing": wing})
	}
	g.post(g.tokens["laptop-7f3a"], pingBody) // on the same connection: the lines above are written
	secret, err := os.ReadFile(g.srv.cfg.Load().SecretFile)
	if err != nil {
		t.Fatal(err)
	}
	cut := map[string]string{}
	for _, e := range g.auditLog() {
		if e.Tool == "mempalace_list_rooms" {
			cut[e.Device] = e.Wing
		}
	}
	for dev, w := range cut {
		want := fmt.Sprintf("(%d bytes, digest %s)", len(wing), StringDigestOf(bytes.TrimSpace(secret), dev, []byte(wing)))
		if !strings.HasSuffix(w, want) {
			t.Errorf("%s's line keeps the wing as %q, want it to end %q", dev, w, want)
		}
	}
	if len(cut) != 2 || cut["admin-0001"] == cut["laptop-7f3a"] {
		t.Fatalf("the cut wing on each device's line: %q", cut)
	}
}

// A refusal shows what the device sent as its audit line does: a tool
// name, method or member over 256 bytes is cut to its first bytes, its
// length and the line's keyed digest (before, a 200,000-byte tool name
// came back whole, twice, in the refusal, and a method cut without its
// length or digest).
func TestARefusalEchoesAHugeNameCutAsItsLine(t *testing.T) {
	t.Parallel()
	g := newGW(t, devices)
	tok := g.tokens["laptop-7f3a"]
	secret, err := os.ReadFile(g.srv.cfg.Load().SecretFile)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 200_000)
	for _, c := range []struct{ what, sent, body string }{
		{"a tool name", "mempalace_" + long, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_` + long + `","arguments":{}}}`},
		{"a method", "m" + long, `{"jsonrpc":"2.0","id":1,"method":"m` + long + `"}`},
		{"a wing", "w" + long, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":{"wing":"w` + long + `","room":"r","content":"c"}}}`},
		{"a parameter", "p" + long, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_status","arguments":{"p` + long + `":1}}}`},
		{"a member", "k" + long, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_status","k` + long + `":1}}`},
	} {
		_, answer := g.postRaw(tok, "/mcp", c.body)
		want := fmt.Sprintf("… (%d bytes, digest %s)", len(c.sent), StringDigestOf(bytes.TrimSpace(secret), "laptop-7f3a", []byte(c.sent)))
		if len(answer) > 2048 || !bytes.Contains(answer, []byte(want)) {
			t.Errorf("%s: the refusal (%d bytes) does not show it cut (%q): %.300s", c.what, len(answer), want, answer)
		}
	}
	// A padded name is refused at parse without its value: it came back
	// twice, whole (the proto helper's note).
	_, answer := g.postRaw(tok, "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":{"wing":" w`+long+`","room":"r","content":"c"}}}`)
	if len(answer) > 2048 || !bytes.Contains(answer, []byte("whitespace at its start or end")) {
		t.Errorf("a padded wing of %d bytes: the refusal (%d bytes): %.300s", len(long)+2, len(answer), answer)
	}
	// Many short unknown parameters, or a long query parameter, make no
	// long answer either.
	var many []string
	for i := range 15_000 { // within strictjson.MaxValues
		many = append(many, fmt.Sprintf(`"p%06d":1`, i))
	}
	_, answer = g.postRaw(tok, "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_status","arguments":{`+strings.Join(many, ",")+`}}}`)
	if len(answer) > 2048 || !bytes.Contains(answer, []byte("(and 14992 more)")) {
		t.Errorf("15,000 unknown parameters: the refusal (%d bytes): %.300s", len(answer), answer)
	}
	if _, answer := g.postRaw(tok, "/mcp?q"+long+"=1", pingBody); len(answer) > 2048 {
		t.Errorf("a long query parameter: the refusal (%d bytes): %.300s", len(answer), answer)
	}
}
