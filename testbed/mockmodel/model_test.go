package mockmodel

import (
	"bufio"
	"net/http"
	"slices"
	"strings"
	"testing"
)

func post(t *testing.T, url, body string) string {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", url, resp.StatusCode, b.String())
	}
	return b.String()
}

// Each API answers in its own shape, streaming and not, and Where tells
// a system prompt from a message by path and role.
func TestAPIsAnswerAndRecord(t *testing.T) {
	m := Start(t)
	for _, c := range []struct {
		path, body string
		want       []string // in the answer
		where      string   // where "MARK" is
	}{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"system","content":"MARK"},{"role":"user","content":"hi"}]}`,
			[]string{`"object":"chat.completion"`, `"content":"hi"`}, "openai-chat messages[0](system).content"},
		{"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"MARK"}]}]}`,
			[]string{`"chat.completion.chunk"`, "data: [DONE]"}, "openai-chat messages[0](user).content[0].text"},
		{"/v1/responses", `{"model":"m","stream":true,"instructions":"MARK","input":[]}`,
			[]string{"event: response.completed", `"output_text"`}, "openai-responses instructions"},
		{"/v1/messages", `{"model":"m","stream":true,"system":[{"type":"text","text":"MARK"}],"messages":[]}`,
			[]string{"event: message_stop", `"text_delta"`}, "anthropic system[0].text"},
		{"/v1/messages", `{"model":"m","messages":[],"tools":[{"name":"t","description":"MARK"}]}`,
			[]string{`"type":"message"`, `"stop_reason":"end_turn"`}, "anthropic tools[0].description"},
		{"/v1beta/models/g:streamGenerateContent", `{"systemInstruction":{"parts":[{"text":"MARK"}]}}`,
			[]string{"data: {", `"finishReason":"STOP"`}, "gemini systemInstruction.parts[0].text"},
	} {
		m.Reset()
		out := post(t, m.URL+c.path+"?alt=sse", c.body)
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: the answer lacks %s:\n%s", c.path, w, out)
			}
		}
		if got := m.Where("MARK"); !slices.Equal(got, []string{c.where}) {
			t.Errorf("%s: Where = %v, want %s", c.path, got, c.where)
		}
	}
	post(t, m.URL+"/v1/messages/count_tokens", `{"system":"MARK"}`)
	if len(m.Requests()) != 2 || len(m.ModelRequests()) != 1 {
		t.Errorf("a token count is a side request: %d requests, %d to the model", len(m.Requests()), len(m.ModelRequests()))
	}
}

// A scripted call goes to the next request that offers tools after a user
// turn; the tool's result comes back in the next request.
func TestScriptedToolCall(t *testing.T) {
	m := Start(t)
	m.Next(ToolCall{Name: "mempalace_status", Args: map[string]any{"x": 1}})
	out := post(t, m.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"go"}]}`)
	if strings.Contains(out, "tool_calls") {
		t.Fatalf("a request without tools got the call: %s", out)
	}
	out = post(t, m.URL+"/v1/chat/completions", `{"tools":[{"type":"function","function":{"name":"mempalace_status"}}],"messages":[{"role":"system","content":"be brief"},{"role":"system","content":[{"type":"text","text":"you owe 1 ask"}]},{"role":"user","content":"go"}]}`)
	if !strings.Contains(out, `"name":"mempalace_status"`) || !strings.Contains(out, `"arguments":"{\"x\":1}"`) {
		t.Fatalf("no scripted call: %s", out)
	}
	out = post(t, m.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"go"},{"role":"tool","content":[{"type":"text","text":"the result"}]}]}`)
	if !strings.Contains(out, AfterTool) || m.LastToolResult() != "the result" {
		t.Fatalf("after the tool: %s, result %q", out, m.LastToolResult())
	}
	if sys := m.LastSystem(); sys != "be brief\nyou owe 1 ask" {
		t.Errorf("LastSystem = %q", sys)
	}
	if got := m.Offered(); !slices.Equal(got, []string{"mempalace_status"}) || !m.OfferedAny("_status") {
		t.Errorf("offered %v", got)
	}
}
