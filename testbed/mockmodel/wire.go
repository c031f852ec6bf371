package mockmodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// sse writes server-sent events: each pair is an event name ("" for none)
// and its data.
func sse(w http.ResponseWriter, events ...any) {
	w.Header().Set("Content-Type", "text/event-stream")
	for i := 0; i+1 < len(events); i += 2 {
		if name, _ := events[i].(string); name != "" {
			fmt.Fprintf(w, "event: %s\n", name)
		}
		data, ok := events[i+1].(string)
		if !ok {
			b, _ := json.Marshal(events[i+1])
			data = string(b)
		}
		fmt.Fprintf(w, "data: %s\n\n", data)
	}
}

type chatTool struct {
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

type chatReq struct {
	Model    string     `json:"model"`
	Stream   bool       `json:"stream"`
	Tools    []chatTool `json:"tools"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// chat answers OpenAI chat completions: a scripted tool call when one is
// due, AfterTool after a tool result, else Reply.
func (m *Model) chat(w http.ResponseWriter, body []byte) {
	var req chatReq
	json.Unmarshal(body, &req)
	last := ""
	if n := len(req.Messages); n > 0 {
		last = req.Messages[n-1].Role
	}
	var call *ToolCall
	m.mu.Lock()
	if len(req.Tools) > 0 && last == "user" && len(m.script) > 0 {
		call = &m.script[0]
		m.script = m.script[1:]
	}
	m.mu.Unlock()
	id, created := fmt.Sprintf("chatcmpl-%d", time.Now().UnixNano()), time.Now().Unix()
	delta := map[string]any{"role": "assistant", "content": Reply}
	if last == "tool" {
		delta["content"] = AfterTool
	}
	finish := "stop"
	if call != nil {
		args, _ := json.Marshal(call.Args)
		delta = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"index": 0, "id": "call_" + id, "type": "function",
			"function": map[string]any{"name": call.Name, "arguments": string(args)}}}}
		finish = "tool_calls"
	}
	usage := map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
	if !req.Stream {
		writeJSON(w, map[string]any{"id": id, "object": "chat.completion", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": delta, "finish_reason": finish}}, "usage": usage})
		return
	}
	chunk := func(choices []any, extra ...any) map[string]any {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model, "choices": choices}
		if len(extra) > 0 {
			c["usage"] = extra[0]
		}
		return c
	}
	sse(w,
		"", chunk([]any{map[string]any{"index": 0, "delta": delta, "finish_reason": nil}}),
		"", chunk([]any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}),
		"", chunk([]any{}, usage),
		"", "[DONE]")
}

// responses answers the OpenAI Responses API (Codex) with Reply.
func responses(w http.ResponseWriter, body []byte) {
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	json.Unmarshal(body, &req)
	item := map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": Reply, "annotations": []any{}}}}
	done := map[string]any{"id": "resp_1", "object": "response", "created_at": time.Now().Unix(), "model": req.Model, "status": "completed",
		"output": []any{item}, "usage": map[string]any{"input_tokens": 10, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": 5, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 15}}
	if !req.Stream {
		writeJSON(w, done)
		return
	}
	started := map[string]any{"id": "resp_1", "object": "response", "created_at": time.Now().Unix(), "model": req.Model, "status": "in_progress", "output": []any{}}
	sse(w,
		"response.created", map[string]any{"type": "response.created", "response": started},
		"response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0,
			"item": map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []any{}}},
		"response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": Reply},
		"response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item},
		"response.completed", map[string]any{"type": "response.completed", "response": done})
}

// anthropic answers the Anthropic Messages API (Claude Code) with Reply.
func anthropic(w http.ResponseWriter, body []byte) {
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	json.Unmarshal(body, &req)
	usage := map[string]any{"input_tokens": 10, "output_tokens": 5}
	if !req.Stream {
		writeJSON(w, map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": req.Model,
			"content": []any{map[string]any{"type": "text", "text": Reply}}, "stop_reason": "end_turn", "stop_sequence": nil, "usage": usage})
		return
	}
	sse(w,
		"message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_1", "type": "message", "role": "assistant",
			"model": req.Model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": usage}},
		"content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}},
		"content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": Reply}},
		"content_block_stop", map[string]any{"type": "content_block_stop", "index": 0},
		"message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}},
		"message_stop", map[string]any{"type": "message_stop"})
}

// gemini answers generateContent and streamGenerateContent (Gemini CLI,
// Qwen Code's Gemini mode) with Reply.
func gemini(w http.ResponseWriter, r *http.Request) {
	res := map[string]any{
		"candidates":    []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": Reply}}}, "finishReason": "STOP", "index": 0}},
		"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
		"modelVersion":  "m",
	}
	if strings.HasSuffix(r.URL.Path, ":streamGenerateContent") {
		sse(w, "", res)
		return
	}
	writeJSON(w, res)
}
