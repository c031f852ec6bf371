package catalogue

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"
)

// DrawerID is the id MemPalace gives a drawer filed over MCP (ids.py
// make_drawer_id_from_content, recipe v3): drawer_<wing>_<room>_ and the
// first 24 hex digits of the length-prefixed sha256 of wing, room and
// content (lengths in code points, the bytes hashed UTF-8).
func DrawerID(wing, room, content string) string {
	return fmt.Sprintf("drawer_%s_%s_%s", wing, room, IDHash(wing, room, content)[:24])
}

// IDHash is MemPalace's id hash (ids.py): the hex sha256 of
// "".join(f"{len(p)}:{p}"), lengths in code points.
func IDHash(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		fmt.Fprintf(&b, "%d:%s", utf8.RuneCountInString(p), p)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}
