package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/joakimp/devbox-config/harness"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/templates"
)

// expansion is a managed entry whose harness saved it with the references
// render wrote replaced by their values (Gemini CLI and Qwen Code expand
// ${NAME} when they load settings.json, and their own saves write the
// expanded text back): entry is it with the references back, secrets the
// variables whose non-empty value was in the file, blanks those saved as "".
type expansion struct {
	entry           []byte
	secrets, blanks []string
}

// unexpand recognises live as an entry an earlier render wrote for rec in
// mode (Record.Was: only harnesses whose own saves expand references have
// one) whose only differences from it are references replaced by
// literals, whatever their values: ours says whether the entry with the
// references back has the record's fingerprint. ok is false for anything
// else, and always for a harness that never saves expanded text: there a
// literal where render wrote a reference is the user's own edit (a token
// pasted for an app that does not see the variable), kept as before
// (review32 R1).
func unexpand(rec harness.Record, mode ladder.Mode, live []byte, ours func(entry []byte) bool) (x expansion, ok bool) {
	l, err := decodeNumbers(live)
	if err != nil || l == nil {
		return x, false
	}
	ref, _ := rec.TokenRef()
	refs := references(rec)
	for _, e := range rec.Was {
		src := e.For(mode)
		if src == "" {
			continue
		}
		// The URL is never a reference: the entry keeps the file's.
		b, err := templates.Entry(rec.Name, src, ladder.Settings{Mode: mode, URL: "http://render.invalid/mcp"}, ref)
		if err != nil {
			continue // an old template that no longer renders recognises nothing
		}
		t, err := decodeNumbers(b)
		if err != nil {
			continue
		}
		x = expansion{}
		restored, err := json.Marshal(x.restore(t, l, refs))
		if err == nil && len(x.secrets)+len(x.blanks) > 0 && ours(restored) {
			x.entry = restored
			return x, true
		}
	}
	return expansion{}, false
}

// varRef is one way rec's entries reference a variable.
type varRef struct{ text, name string }

// references are every reference rec's entries can hold: its EnvRef and
// HandBack forms of each variable a server reads.
func references(rec harness.Record) []varRef {
	var out []varRef
	for _, n := range ladder.ServerVars() {
		for _, f := range []string{rec.EnvRef, rec.HandBack} {
			if f != "" {
				out = append(out, varRef{fmt.Sprintf(f, n), n})
			}
		}
	}
	return out
}

// restore is live with each string that the template t has as a
// reference with literal text around it, and live has as the same text
// around any literal, set back to t's; anything else is live's.
func (x *expansion) restore(t, live any, refs []varRef) any {
	switch tv := t.(type) {
	case map[string]any:
		lv, ok := live.(map[string]any)
		if !ok {
			return live
		}
		out := make(map[string]any, len(lv))
		for k, v := range lv {
			out[k] = v
			if tk, ok := tv[k]; ok {
				out[k] = x.restore(tk, v, refs)
			}
		}
		return out
	case []any:
		lv, ok := live.([]any)
		if !ok || len(lv) != len(tv) {
			return live
		}
		out := make([]any, len(lv))
		for i := range lv {
			out[i] = x.restore(tv[i], lv[i], refs)
		}
		return out
	case string:
		ls, ok := live.(string)
		if !ok || ls == tv {
			return live
		}
		for _, r := range refs {
			pre, suf, found := strings.Cut(tv, r.text)
			if !found || len(ls) < len(pre)+len(suf) || !strings.HasPrefix(ls, pre) || !strings.HasSuffix(ls, suf) {
				continue
			}
			if ls[len(pre):len(ls)-len(suf)] == "" {
				x.blanks = appendNew(x.blanks, r.name)
			} else {
				x.secrets = appendNew(x.secrets, r.name)
			}
			return tv
		}
	}
	return live
}

func appendNew(names []string, n string) []string {
	if slices.Contains(names, n) {
		return names
	}
	return append(names, n)
}

// decodeNumbers decodes JSON keeping numbers as written.
func decodeNumbers(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode entry: %w", err)
	}
	return v, nil
}

// warning says what the harness did to the entry and that render
// removed it (an opt-out) or set it to the environment's value.
func (x expansion) warning(file, title string, removed bool) string {
	did := "wrote the entry the environment says again"
	if removed {
		did = "removed the entry, as it removes its own at an opt-out"
	}
	what := fmt.Sprintf("%s: %s saved this file with the references in render's mempalace entry replaced by their values (its own settings saves, such as `mcp add` and `mcp remove`, write back what it loaded with ${...} expanded); this was not your edit", file, title)
	if len(x.secrets) > 0 {
		return what + fmt.Sprintf(", and the value of %s was in the file: render %s and made the file readable by its owner only (rotate the token if the file was ever copied, synced or committed)", strings.Join(x.secrets, ", "), did)
	}
	return what + fmt.Sprintf(", and %s was pinned to \"\": render %s", strings.Join(x.blanks, ", "), did)
}
