package deviceinfo

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// The wire names.
const (
	// Capability is the key under the initialize result's
	// capabilities.experimental.
	Capability = "devbox-config/device"
	// Header is the response header on every authenticated /mcp answer.
	Header = "Devbox-Config-Device"
	// Version is this format's version.
	Version = 1
)

// Info is the device a token names, as the gateway holds it.
type Info struct {
	Version            int      `json:"version"`
	ID                 string   `json:"id"`
	Label              string   `json:"label"`
	Admin              bool     `json:"admin"`
	BulkDelete         bool     `json:"bulk_delete"`
	DeleteCap          int      `json:"delete_cap"`
	Read               []string `json:"read"`
	Write              []string `json:"write"`
	KG                 string   `json:"kg"`
	Agents             []string `json:"agents"`
	Coordinator        bool     `json:"coordinator"`
	Refuses            []string `json:"refuses"`
	Trash              bool     `json:"trash"`
	TrashRetentionDays int      `json:"trash_retention_days"`
	// Origins is the version of gateway/origin's format every record of
	// this gateway's answers carries (0: none).
	Origins int `json:"origins"`
	// Trusts is the devices whose records it trusts, itself included
	// (nil: every device's, unknown origin included); Untrusted what its
	// answers do with the others' ("mark" or "withhold").
	Trusts    []string `json:"trusts"`
	Untrusted string   `json:"untrusted"`
	// Removed is the ids of the devices removed last (the gateway's
	// removed_devices, the latest 32): no device trusts what they wrote,
	// nor what any other removed device wrote, which the gateway's own
	// answers mark.
	Removed []string `json:"removed,omitempty"`
	// InstructionWing is the wing every device reads and only admin
	// devices whose write globs match it write ("": none).
	InstructionWing string `json:"instruction_wing"`
}

// TrustsDevice reports whether the device trusts records device id wrote,
// as the gateway decides it (gateway/origin's "unknown" included): never
// a removed device's.
func (in Info) TrustsDevice(id string) bool {
	return !slices.Contains(in.Removed, id) && (in.Trusts == nil || slices.Contains(in.Trusts, id))
}

// Refused reports whether the gateway refuses tool (bare or with the
// mempalace_ prefix) for every device.
func (in Info) Refused(tool string) bool {
	return slices.Contains(in.Refuses, strings.TrimPrefix(tool, "mempalace_"))
}

// encode is the object as compact JSON, printable ASCII only.
func (in Info) encode() []byte {
	in.Version = Version
	for _, l := range []*[]string{&in.Read, &in.Write, &in.Agents, &in.Refuses} {
		if *l == nil {
			*l = []string{} // [] rather than null: a reader need not tell them apart
		}
	}
	b, _ := json.Marshal(in) // strings, numbers, booleans and lists of strings: it encodes
	var out strings.Builder
	for _, r := range string(b) {
		switch {
		case r >= 0x20 && r < 0x7f:
			out.WriteRune(r)
		case r > 0xffff:
			r -= 0x10000
			fmt.Fprintf(&out, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			fmt.Fprintf(&out, `\u%04x`, r)
		}
	}
	return []byte(out.String())
}

// decode reads an Info from JSON: an object whose version is a number of
// at least 1 (later versions are read for the fields this one knows).
func decode(b []byte) (Info, bool) {
	var in Info
	if v := gjson.GetBytes(b, "version"); v.Type != gjson.Number || v.Int() < 1 || json.Unmarshal(b, &in) != nil {
		return Info{}, false
	}
	return in, true
}

// HeaderValue is the header's value for in: the gateway encodes it once
// per device when it loads its config, not on every answer.
func (in Info) HeaderValue() string { return string(in.encode()) }

// FromHeader reads the header of an answer (false: absent or unreadable).
func FromHeader(h http.Header) (Info, bool) {
	v := h.Get(Header)
	if v == "" {
		return Info{}, false
	}
	return decode([]byte(v))
}

// AdvertiseInitialize adds the capability to an initialize answer (a
// JSON-RPC response whose result has capabilities). Anything else (an
// error answer, an SSE body) is returned unchanged.
func AdvertiseInitialize(resp []byte, in Info) []byte {
	if r := gjson.GetBytes(resp, "result"); !r.IsObject() {
		return resp
	}
	for _, p := range []string{"result.capabilities", "result.capabilities.experimental"} {
		if c := gjson.GetBytes(resp, p); c.Exists() && !c.IsObject() {
			return resp
		}
	}
	out, err := sjson.SetRawBytes(resp, "result.capabilities.experimental."+strings.ReplaceAll(Capability, ".", `\.`), in.encode())
	if err != nil {
		return resp
	}
	return out
}

// FromInitialize reads the capability from an initialize result (the
// JSON-RPC result object).
func FromInitialize(initResult json.RawMessage) (Info, bool) {
	v := gjson.GetBytes(initResult, "capabilities.experimental."+strings.ReplaceAll(Capability, ".", `\.`))
	if !v.IsObject() {
		return Info{}, false
	}
	return decode([]byte(v.Raw))
}

// TokenPrefix starts every device token a gateway issues:
// dbx_<token id>_<secret>_<checksum>.
const TokenPrefix = "dbx"

// IsDeviceToken says whether token has the form of a gateway's device
// token (its prefix; the gateway alone can say whether it is valid). A
// bare mempalace serve never accepts one: a device that holds one belongs
// behind the gateway.
func IsDeviceToken(token string) bool {
	return strings.HasPrefix(strings.TrimSpace(token), TokenPrefix+"_")
}

// TokenSecret is a device token's secret segment, the part between its id
// and its checksum ("" when token is not of a device token's form): the id
// is shown by `gateway device list` and the checksum follows from the rest,
// so the secret alone lets a call through.
func TokenSecret(token string) string {
	parts := strings.Split(strings.TrimSpace(token), "_")
	if len(parts) != 4 || parts[0] != TokenPrefix {
		return ""
	}
	return parts[2]
}
