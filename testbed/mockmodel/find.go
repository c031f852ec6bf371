package mockmodel

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Where reports where text appears in what the model was sent: one entry
// per distinct place, "<api> <json path>" with array indexes kept and a
// message's role after its index (so "anthropic system[2].text" and
// "openai-chat messages[0](system).content" tell a system prompt from a
// user's message). Empty: the model never saw it.
func (m *Model) Where(text string) []string {
	seen := map[string]bool{}
	for _, r := range m.ModelRequests() {
		var v any
		if json.Unmarshal(r.Body, &v) != nil {
			if strings.Contains(string(r.Body), text) {
				seen[string(r.API)+" (body, not JSON)"] = true
			}
			continue
		}
		walk(v, "", func(path, s string) {
			if strings.Contains(s, text) {
				seen[string(r.API)+" "+path] = true
			}
		})
	}
	return slices.Sorted(maps.Keys(seen))
}

// walk calls f with the path and value of every string in v (object keys
// included, as a path ending in the key).
func walk(v any, path string, f func(path, s string)) {
	switch x := v.(type) {
	case string:
		f(path, x)
	case []any:
		for i, e := range x {
			p := fmt.Sprintf("%s[%d]", path, i)
			if m, ok := e.(map[string]any); ok {
				if role, ok := m["role"].(string); ok {
					p += "(" + role + ")"
				}
			}
			walk(e, p, f)
		}
	case map[string]any:
		for k, e := range x {
			p := k
			if path != "" {
				p = path + "." + k
			}
			f(p, k)
			walk(e, p, f)
		}
	}
}

// chats are the chat completions requests so far, decoded, oldest first.
func (m *Model) chats() []chatReq {
	var out []chatReq
	for _, r := range m.ModelRequests() {
		var req chatReq
		if r.API == OpenAIChat && json.Unmarshal(r.Body, &req) == nil {
			out = append(out, req)
		}
	}
	return out
}

// lastChat is the latest chat completions request for which ok holds.
func (m *Model) lastChat(ok func(chatReq) bool) (chatReq, bool) {
	reqs := m.chats()
	for i := len(reqs) - 1; i >= 0; i-- {
		if ok(reqs[i]) {
			return reqs[i], true
		}
	}
	return chatReq{}, false
}

func offersTools(r chatReq) bool { return len(r.Tools) > 0 }

// Offered are the tool names of the latest chat completions request that
// offered tools.
func (m *Model) Offered() []string {
	req, _ := m.lastChat(offersTools)
	var names []string
	for _, t := range req.Tools {
		names = append(names, t.Function.Name)
	}
	return names
}

// LastSystem is the system messages (joined by newlines) of the latest
// chat completions request that offered tools: what the model was told
// besides the user's turn.
func (m *Model) LastSystem() string {
	req, _ := m.lastChat(offersTools)
	var sys []string
	for _, msg := range req.Messages {
		if msg.Role == "system" {
			sys = append(sys, contentText(msg.Content))
		}
	}
	return strings.Join(sys, "\n")
}

// OfferedAny reports whether any chat completions request offered a tool
// whose name ends in suffix.
func (m *Model) OfferedAny(suffix string) bool {
	return slices.ContainsFunc(m.chats(), func(r chatReq) bool {
		return slices.ContainsFunc(r.Tools, func(t chatTool) bool { return strings.HasSuffix(t.Function.Name, suffix) })
	})
}

// LastToolResult is the latest tool result a client sent back on chat
// completions.
func (m *Model) LastToolResult() string {
	req, ok := m.lastChat(func(r chatReq) bool { return len(r.Messages) > 0 && r.Messages[len(r.Messages)-1].Role == "tool" })
	if !ok {
		return ""
	}
	return contentText(req.Messages[len(req.Messages)-1].Content)
}

// contentText flattens a message content (a string or a list of parts).
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// Around returns, for each place Where reports, the string there cut to n
// bytes either side of text: how a client framed it.
func (m *Model) Around(text string, n int) map[string]string {
	out := map[string]string{}
	for _, r := range m.ModelRequests() {
		var v any
		if json.Unmarshal(r.Body, &v) != nil {
			continue
		}
		walk(v, "", func(path, s string) {
			if i := strings.Index(s, text); i >= 0 {
				out[string(r.API)+" "+path] = s[max(0, i-n):min(len(s), i+len(text)+n)]
			}
		})
	}
	return out
}
