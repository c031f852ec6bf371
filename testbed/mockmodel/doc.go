// Package mockmodel is a model endpoint for tests with real harness
// clients: one loopback HTTP server that answers the four wire APIs the
// clients speak (OpenAI chat completions, OpenAI Responses, Anthropic
// Messages, Gemini generateContent; streaming and not) with a short text,
// and records every request body. A test points a client's base URL at
// Model.URL and then asks what the model was sent: where a string appears
// (Where: the system prompt, a message, a tool description), which tools
// were offered, what a tool returned.
//
// On the chat completions API it can also script tool calls (Next), which
// is how the journeys make opencode, pi and Cline call MemPalace tools.
package mockmodel
