package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	segjson "github.com/segmentio/encoding/json"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/jsondepth"
	"github.com/joakimp/devbox-config/strictjson"
)

// pythonParse decodes JSON as Python's json.loads does for what the
// gateway sends: keys exact-case, the last duplicate wins (numbers kept
// as their literal, as the gateway's own parse keeps them).
func pythonParse(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var value func() (any, error)
	value = func() (any, error) {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		switch tok {
		case json.Delim('['):
			list := []any{}
			for dec.More() {
				v, err := value()
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			_, err := dec.Token()
			return list, err
		case json.Delim('{'):
			obj := map[string]any{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := value()
				if err != nil {
					return nil, err
				}
				obj[k.(string)] = v // the last duplicate wins
			}
			_, err := dec.Token()
			return obj, err
		}
		return tok, nil
	}
	v, err := value()
	if err == nil {
		if _, e := dec.Token(); e != io.EOF {
			err = io.ErrUnexpectedEOF
		}
	}
	return v, err
}

// seeds are request bodies the fuzz targets start from: the findings'
// shapes and ordinary calls.
var seeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","METHOD":"ping","params":{"name":"mempalace_delete_drawer","arguments":{"drawer_id":"d"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call","params":{"name":"mempalace_search","arguments":{"query":"q"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mempalace_add_drawer","arguments":{"wing":"shared","room":"r","content":"x","added_by":"a/b/c"}}}`,
	`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"mempalace_checkpoint","arguments":{"items":[],"diary":{"agent_name":"pi","entry":"e"}}}}`,
	`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mempalace_update_drawer","arguments":{"drawer_id":"drawer_shared_r_1","wing":"w"}}}`,
	`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"mempalace_diary_read","arguments":{"agent_name":"Opencode","last_n":"5"}}}`,
	`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"mempalace_event_ack","arguments":{"event_id":"e","from_agent":"pi@fuzz"}}}`,
	`{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"mempalace_search","arguments":{"query":"\ud800","wing":"a\u0000b","limit":1e400}}}`,
	`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
	`{"id":1,"method":"tools/call","params":{"name":"x","arguments":null,"_meta":{"k":[[[[1]]]]}}}`,
}

// fuzzDevice may do almost everything, so most bodies reach the upstream.
var fuzzDevice = Device{ID: "fuzz-0001", Label: "fuzz", Read: []string{"*"}, Write: []string{"*"}, KG: "write", Agents: []string{"pi@fuzz", "opencode@fuzz"}, Admin: true, Coordinator: true, ReadRate: 1e9, WriteRate: 1e9}

// roundTrip is an in-process upstream.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// authorizedCalls records what the forward step was given: the calls the
// gateway authorized.
type authorizedCalls struct {
	mu    sync.Mutex
	calls []ToolCall
}

func (l *authorizedCalls) Forward(ctx context.Context, c ToolCall, next Send) Forwarded {
	l.mu.Lock()
	c.Body = bytes.Clone(c.Body)
	snap, _ := strictjson.Decode(encodeJSON(c.Args))
	c.Args, _ = snap.(map[string]any)
	l.calls = append(l.calls, c)
	l.mu.Unlock()
	s, b := next(ctx, c.Body)
	return Forwarded{Status: s, Body: b}
}

// FuzzForwardedMatchesAuthorized is the differential: for any body, every
// message the upstream receives, parsed as Python parses it, names the
// method, tool and arguments the gateway authorized (or, refused, the
// upstream receives nothing of it).
func FuzzForwardedMatchesAuthorized(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	narrowDevice := Device{ID: "narrow-0001", Label: "narrow", Read: []string{"shared", "wing_*"}, Write: []string{"shared"}, KG: "read", Agents: []string{"opencode@narrow"}, ReadRate: 1e9, WriteRate: 1e9}
	g := newGWAt(f, []Device{fuzzDevice, narrowDevice}, startFake(f))
	tok := g.tokens[fuzzDevice.ID]
	var mu sync.Mutex
	var received [][]byte
	g.srv.client.Transport = roundTrip(func(r *http.Request) (*http.Response, error) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		received = append(received, b)
		mu.Unlock()
		answer := `{"jsonrpc":"2.0","id":0,"result":{"content":[{"type":"text","text":"{\"wing\":\"shared\"}"}]}}`
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(answer))}, nil
	})
	ledger := &authorizedCalls{}
	g.srv.Ledger = ledger
	f.Fuzz(func(t *testing.T, body []byte) {
		mu.Lock()
		received = nil
		mu.Unlock()
		ledger.calls = nil
		req, _ := http.NewRequest("POST", "http://127.0.0.1/mcp", bytes.NewReader(body))
		req.Host = "127.0.0.1"
		req.Header.Set("Authorization", "Bearer "+tok)
		w := newRecorder()
		g.srv.ServeHTTP(w, req)
		if w.code == 500 {
			t.Fatalf("the gateway failed on %q: %s", body, w.body.String())
		}
		parsed, bad := parseRequest(body)
		for _, b := range received {
			v, err := pythonParse(b)
			if err != nil {
				t.Fatalf("the upstream cannot parse what it was sent: %q", b)
			}
			m, _ := v.(map[string]any)
			if bad != nil {
				// Refused: only the gateway's own look-ups may go out.
				if !internalLookup(m) {
					t.Fatalf("a refused body (%s) reached the upstream as %q", bad.msg, b)
				}
				continue
			}
			if m["method"] != "tools/call" {
				if m["method"] != parsed.Method || parsed.Method == "tools/call" {
					t.Fatalf("authorized method %q, the upstream runs %v", parsed.Method, m["method"])
				}
				continue
			}
			var call *ToolCall
			for i := range ledger.calls { // the upstream gets the gateway's own id
				if bytes.Equal(withoutID(ledger.calls[i].Body), withoutID(b)) {
					call = &ledger.calls[i]
				}
			}
			if call == nil {
				if !internalLookup(m) {
					t.Fatalf("a tools/call nobody authorized reached the upstream: %q", b)
				}
				continue
			}
			p, _ := m["params"].(map[string]any)
			args, _ := p["arguments"].(map[string]any)
			if p["name"] != call.Tool || !bytes.Equal(encodeJSON(args), encodeJSON(call.Args)) {
				t.Fatalf("authorized %s %s, the upstream runs %v %s", call.Tool, encodeJSON(call.Args), p["name"], encodeJSON(args))
			}
		}
		// The same body from a narrow device (fan-out, narrowing, object
		// checks): answered, never a crash.
		req, _ = http.NewRequest("POST", "http://127.0.0.1/mcp", bytes.NewReader(body))
		req.Host = "127.0.0.1"
		req.Header.Set("Authorization", "Bearer "+g.tokens[narrowDevice.ID])
		w = newRecorder()
		g.srv.ServeHTTP(w, req)
		if w.code == 500 || w.code == 0 {
			t.Fatalf("the gateway failed on %q for a narrow device: %d %s", body, w.code, w.body.String())
		}
	})
}

// internalLookup is a call the gateway makes for itself (a drawer's wing,
// the taxonomy, an event look-up, what a delete will remove): a read
// (delete_by_source only as a dry run). Its id is no mark: every call
// the upstream gets carries one of the gateway's own.
func internalLookup(m map[string]any) bool {
	p, _ := m["params"].(map[string]any)
	name, _ := p["name"].(string)
	t, _ := catalogue.Lookup(name)
	if m["method"] != "tools/call" {
		return false
	}
	if args, _ := p["arguments"].(map[string]any); name == "mempalace_delete_by_source" {
		return args["dry_run"] == true
	}
	return t.Reads && slices.Contains([]string{"get_drawer", "get_drawers", "list_drawers", "get_taxonomy", "event_list"}, t.Name)
}

// withoutID is a JSON-RPC message without its id.
func withoutID(msg []byte) []byte {
	out, err := sjson.DeleteBytes(msg, "id")
	if err != nil {
		return msg
	}
	return out
}

// FuzzAuthorize feeds any arguments and any upstream answer through the
// authorization and filter steps of every tool, for a narrow and a wide
// device: nothing may panic, and an allowed write never names a wing the
// device cannot write.
func FuzzAuthorize(f *testing.F) {
	f.Add(uint8(0), []byte(`{"wing":"shared"}`), []byte(`{"results":[{"wing":"private"}],"total_before_filter":3}`))
	f.Add(uint8(24), []byte(`{"items":[]}`), []byte(`{"duplicates":[{"matches":[{"wing":"x"}]}]}`))
	f.Add(uint8(33), []byte(`{"agent_name":"opencode"}`), []byte(`{"entries":[1]}`))
	f.Add(uint8(40), []byte(`{"event_id":"e","from_agent":"opencode@fuzz"}`), []byte(`{"events":[{"id":"e"}]}`))
	f.Add(uint8(46), []byte(`{"drawer_ids":["drawer_a","drawer_b"]}`), []byte(`{"results":[{"drawer_id":"drawer_a","wing":"private"},{"drawer_id":"drawer_b","error":"Drawer not found: drawer_b"}],"count":2,"errors":1}`))
	g := newGWAt(f, devices, startFake(f))
	g.srv.client.Transport = roundTrip(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(`{"result":{"content":[{"type":"text","text":"{\"taxonomy\":{\"shared\":{\"r\":1}},\"events\":[]}"}]}}`))}, nil
	})
	tools := catalogue.All()
	f.Fuzz(func(t *testing.T, which uint8, rawArgs, answer []byte) {
		v, err := strictjson.Decode(rawArgs)
		args, _ := v.(map[string]any)
		if err != nil || args == nil {
			return
		}
		tool := tools[int(which)%len(tools)]
		if checkArgs(tool, args) != nil {
			return
		}
		for i := range devices {
			d := &devices[i]
			dec := Authorize(d, catalogue.Prefix+tool.Name, args, "shared")
			if dec.Allow && tool.Gate == catalogue.WriteWing {
				for _, w := range tool.WingsOf(args, "shared") {
					if !deviceinfo.MatchWing(d.Write, w) {
						t.Fatalf("%s allowed %s writing %q", d.ID, tool.Name, w)
					}
				}
			}
			if dec.Allow {
				g.srv.narrow(context.Background(), d, tool, maps.Clone(args), &dec)
			}
			env, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{"content": []any{map[string]any{"type": "text", "text": string(answer)}}}})
			out, err := g.srv.filterAnswer(context.Background(), d, tool, dec, []byte("1"), env)
			if err != nil || !needsFilter(d, tool) {
				continue
			}
			m := resultOf(out)
			if w := unreadableWing(d, tool.Filter, m); w != "" {
				t.Fatalf("%s's filtered %s answer holds wing %q: %s", d.ID, tool.Name, w, out)
			}
		}
	})
}

// unreadableWing finds a wing in a filtered answer that the device may
// not read ("" if none).
func unreadableWing(d *Device, f catalogue.Filter, m map[string]any) string {
	items := func(v any) []map[string]any {
		list, _ := v.([]any)
		var out []map[string]any
		for _, x := range list {
			if h, ok := x.(map[string]any); ok {
				out = append(out, h)
			}
		}
		return out
	}
	var hs []map[string]any
	switch f {
	case catalogue.FilterHits, catalogue.FilterByID:
		hs = items(m["results"])
		if f == catalogue.FilterByID { // an id's error item names no wing
			hs = slices.DeleteFunc(hs, func(h map[string]any) bool { _, failed := h["error"]; return failed && len(h) <= 2 })
		}
	case catalogue.FilterMatches:
		hs = items(m["matches"])
	case catalogue.FilterDrawers:
		hs = items(m["drawers"])
	case catalogue.FilterCheckpoint:
		for _, dup := range items(m["duplicates"]) {
			hs = append(hs, items(dup["matches"])...)
		}
	case catalogue.FilterWingCounts:
		for _, k := range []string{"wings", "taxonomy"} {
			ws, _ := m[k].(map[string]any)
			for w := range ws {
				if !deviceinfo.MatchWing(d.Read, w) {
					return w
				}
			}
		}
	}
	for _, h := range hs {
		if w, _ := h["wing"].(string); !deviceinfo.MatchWing(d.Read, w) {
			return fmt.Sprintf("%v", h["wing"])
		}
	}
	return ""
}

// FuzzJSONString checks the filter's JSON string reading and writing
// against encoding/json: unquote reads every string body of valid UTF-8
// encoding/json reads, to the same text, and ends it at its closing quote
// (encoding/json replaces invalid UTF-8, which the filter refuses
// instead); what appendQuoted writes reads back as the text it was given.
func FuzzJSONString(f *testing.F) {
	rec, _ := os.ReadFile("testdata/real-3.11.0/list_drawers.json")
	for _, s := range []string{`a\nb\"c\\d\/e\tf\u00e9\ud83d\ude00`, `\ud83d`, `\ud83d\u0041`, `\udc00x`, `\u001f\b\f\r`, "plain é ✓", string(rec)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !utf8.Valid(b) {
			return
		}
		var want string
		if json.Unmarshal(append(append([]byte{'"'}, b...), '"'), &want) == nil {
			got, end, ok := unquote(append(bytes.Clone(b), '"'))
			if !ok || string(got) != want || end != len(b) {
				t.Fatalf("unquote(%q) = %q, %d, %v; encoding/json reads %q, ending at %d", b, got, end, ok, want, len(b))
			}
		}
		var back string
		if q := appendQuoted(nil, b); json.Unmarshal(q, &back) != nil || back != string(b) {
			t.Fatalf("appendQuoted(%q) = %s reads back as %q", b, q, back)
		}
	})
}

// FuzzPlainAnswer: whatever the fast path reads of an answer, the general
// decoder (segmentio's, strict) reads the same (tab, CR and LF raw in the
// text aside: plainAnswer), and what it refuses is left to that decoder;
// MemPalace's real answers take the fast path.
func FuzzPlainAnswer(f *testing.F) {
	for _, name := range []string{"list_drawers", "search"} {
		rec, err := os.ReadFile("testdata/real-3.11.0/" + name + ".json")
		if err != nil {
			f.Fatal(err)
		}
		if _, _, ok := plainAnswer(rec); !ok {
			f.Fatalf("%s: MemPalace's answer misses the fast path", name)
		}
		f.Add(rec)
	}
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":"a b","result":{"content":[{"type":"text","text":"{\"a\\\\\": 1}"}]}}`,
		`{"jsonrpc": "2.0", "id": -12, "result": {"content": [{"type": "text", "text": "x\\"}]}}`,
		`{"jsonrpc": "2.0", "id": 012, "result": {"content": [{"type": "text", "text": "{}"}]}}`,
		`{"jsonrpc": "2.0", "id": null, "result": {"content": [{"type": "text", "text": "{}"}]}} x`,
		`{"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "{}"}], "isError": true}}`,
		` {"jsonrpc" : "2.0" ,"id":1,"result":{"content":[{"type":"text","text":"{\"k\": \"\\u00e9\"}"}]}}` + "\n",
		"{\"jsonrpc\": \"2.0\", \"id\": 1, \"result\": {\"content\": [{\"type\": \"text\", \"text\": \"{\t\\\"k\\\":\\t1}\"}]}}", // a tab raw in the text, one escaped
	} {
		f.Add([]byte(s))
	}
	flags := segjson.DisallowUnknownFields | segjson.DontMatchCaseInsensitiveStructFields
	blank := func(b []byte) []byte { // tab, CR and LF as spaces
		b = bytes.Clone(b)
		for i, c := range b {
			if c == '\t' || c == '\r' || c == '\n' {
				b[i] = ' '
			}
		}
		return b
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		id, text, ok := plainAnswer(b)
		if !ok {
			return
		}
		var env answerEnvelope
		raw := false // tab, CR or LF raw in the text
		if _, err := segjson.Parse(b, &env, flags); err != nil {
			if !utf8.Valid(text) || !gjson.ValidBytes(text) {
				return // refused after the fast path all the same
			}
			// the one difference plainAnswer allows: tab, CR and LF raw in
			// the text, which its validation admits only between tokens,
			// where a space reads the same
			env, raw = answerEnvelope{}, true
			if _, err := segjson.Parse(blank(b), &env, flags); err != nil {
				t.Fatalf("fast path read %q, the decoder refuses it: %v", b, err)
			}
		}
		c := env.Result.Content
		if env.Error != nil || len(c) != 1 || c[0].Type != "text" || string(env.JSONRPC) != `"2.0"` || string(env.ID) != string(id) {
			t.Fatalf("fast path read %q as id %s; the decoder reads %+v", b, id, env)
		}
		want, _, wok := unquote(c[0].Text[1:])
		if raw {
			want, text = blank(want), blank(text)
		}
		if !wok || string(want) != string(text) {
			t.Fatalf("fast path read the text of %q as %q; the decoder %q", b, text, want)
		}
	})
}

// FuzzKeysOf: keysOf's scan of valid JSON finds a key twice exactly when
// gjson's walk of every object does (keys compared unescaped), and reads
// the "result" member's first byte and whether a key is "error" or
// "isError" as it does.
func FuzzKeysOf(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"a\": \"b\\\"\"}"}]}}`,
		`{"id":1,"error":{"message":"a","message":"b"}}`,
		`{"id":1,"\u0065rror":{},"error":[]}`,
		`[{"a":1},{"a":1}]`, `"x"`, `{"a":{"a":{"a":1}},"b":[{"c":1,"d":{"c":2}}]}`,
		`{"result" : [1], "x\\":1, "isError":true}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !jsondepth.Valid(b) || !json.Valid(b) {
			return
		}
		errorKey := false
		var twice func(v gjson.Result) bool
		twice = func(v gjson.Result) bool {
			keys, found := map[string]bool{}, false
			v.ForEach(func(k, x gjson.Result) bool {
				if k.Exists() {
					found = keys[k.String()]
					keys[k.String()] = true
					errorKey = errorKey || k.String() == "error" || k.String() == "isError"
				}
				found = found || (x.IsObject() || x.IsArray()) && twice(x)
				return !found
			})
			return found
		}
		a := gjson.ParseBytes(b)
		dup := twice(a)
		result, gotErrorKey, ok := keysOf(b)
		if ok == dup {
			t.Fatalf("keysOf(%s): a key twice %v, gjson %v", b, !ok, dup)
		}
		if !ok {
			return
		}
		var want byte
		if r := a.Get("result"); a.IsObject() && r.Exists() {
			want = r.Raw[0]
		}
		if result != want || gotErrorKey != errorKey {
			t.Fatalf("keysOf(%s) = %q, %v; gjson %q, %v", b, result, gotErrorKey, want, errorKey)
		}
	})
}
