package edge

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/edge/wire"
	"github.com/joakimp/devbox-config/strictjson"
)

// call is one tool call as the edge understands it, once: built where the
// call comes in (the fast lane, or the SDK's handler) and taken by every
// step after it (the router, replication, merged reads, the outbox, the
// mailbox's identity check), so none looks its record up or parses its
// arguments again.
type call struct {
	name string
	// tool is its catalogue record (a tool the catalogue does not know is
	// a write: the zero record's route).
	tool catalogue.Tool
	// body is the params as the agent sent them (the fast lane's); nil on
	// the SDK's path, which has params at once.
	body   json.RawMessage
	params *mcp.CallToolParams // Arguments: the agent's bytes, as forwarded
	args   map[string]any      // the arguments parsed, on first need
	// base: an update_drawer's text in the local palace before it, as
	// origin.Base hashes it ("": the local palace does not hold the
	// drawer): the queued op carries it, so a gateway refuses the update
	// if the primary's text changed since.
	base string
	// strict is what the gateway's parse refuses in the arguments
	// (strictjson), found when they are parsed; nil: nothing.
	strict *strictjson.Error
}

// newCall is a call from its decoded params (the SDK's path, or one the
// edge makes).
func newCall(p *mcp.CallToolParams) *call {
	switch a := p.Arguments.(type) {
	case json.RawMessage:
		p.Arguments = wire.RawArgs(a)
	default: // arguments the edge made as values
		b, err := json.Marshal(a)
		if err != nil {
			b = nil // a value JSON cannot hold: sent as {}
		}
		p.Arguments = wire.RawArgs(b)
	}
	c := &call{name: p.Name, params: p}
	c.tool, _ = catalogue.Lookup(p.Name)
	return c
}

// laneCall is a call from the agent's params bytes (the fast lane), named
// by the guard's look at them; the params are decoded only if a step
// needs them (a relayed call never does).
func laneCall(name string, body json.RawMessage) *call {
	c := &call{name: name, body: body}
	c.tool, _ = catalogue.Lookup(name)
	return c
}

// decoded is the call's params, decoded from body on first need.
func (c *call) decoded() (*mcp.CallToolParams, error) {
	if c.params == nil {
		p, err := wire.DecodeParams(c.body)
		if err != nil {
			return nil, err
		}
		c.params = p
	}
	return c.params, nil
}

// raw is the arguments as the agent sent them ({} when it sent none).
func (c *call) raw() json.RawMessage { return c.params.Arguments.(json.RawMessage) }

// argsMap is the arguments parsed (once, strictly, as the gateway's parse
// of the request reads them: what it refuses is noted in strict; {} when
// they are not an object).
func (c *call) argsMap() map[string]any {
	if c.args == nil {
		v, err := strictjson.DecodeArguments(c.raw())
		if errors.As(err, &c.strict) {
			// read as encoding/json reads it (a duplicate's last), for
			// the pass-through modes and the steps before the refusal
			v = nil // Unmarshal would merge into what the strict parse left
			err = json.Unmarshal(c.raw(), &v)
		}
		if c.args, _ = v.(map[string]any); err != nil || c.args == nil {
			// not an object: the palaces answer that; the edge's own
			// reading of it finds no field
			c.args = map[string]any{}
		}
	}
	return c.args
}

// refusal is the answer to a call whose arguments the gateway's parse
// refuses, or nil: the edge refuses it up front, naming where and why,
// so nothing is written or queued that the primary never takes. Refused
// are the argument bytes its strict parse refuses (read alike by no two
// parsers: docs/replication.md, What is sent), and a known tool's
// argument no release's schema lists (catalogue.UnknownParams) or of a
// value its schema does not take (catalogue.CheckValues: a wrong type, a
// NaN limit), both the gateway's checks and words, which the local palace
// would take for an internal error, or file for the gateway to refuse.
// Reads too: the gateway refuses them for every tool, and a read the
// edge answers alone (local-only and maintenance tools, pass-through)
// never comes here. A tool the catalogue does not know is left to the
// palaces.
func (c *call) refusal() *jsonrpc.Error {
	if c.argsMap(); c.strict != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("Invalid params: refused by the edge: %s. The gateway refuses these argument bytes as written (parsers read them differently), so nothing was written or queued: send them again without it", c.strict)}
	}
	if !c.tool.Known() {
		return nil
	}
	const tail = "; refused by the edge, as the gateway refuses it: nothing was written or queued"
	if msg, long := catalogue.UnknownParams(c.tool, c.args); msg != "" {
		if long != "" {
			msg += fmt.Sprintf("'%s…' (%d bytes)", strings.ToValidUTF8(long[:64], ""), len(long)) // cut at 64 bytes, not mid-character
		}
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg + tail}
	}
	if err := catalogue.CheckValues(c.tool, c.args); err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error() + tail}
	}
	return nil
}

// with is the call with other arguments (the edge's own, e.g. a merged
// read's widened page): same name, record and _meta.
func (c *call) with(args map[string]any) (*call, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	return &call{name: c.name, tool: c.tool, params: &mcp.CallToolParams{Name: c.name, Arguments: json.RawMessage(b), Meta: c.params.Meta}, args: args}, nil
}
