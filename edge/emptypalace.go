package edge

import (
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/joakimp/devbox-config/palacefiles"
)

// noDrawersYet is what a merged answer's edge.local says of a local
// palace that holds no drawers yet.
const noDrawersYet = "no drawers yet"

// localEmpty reports a local palace that holds no drawers yet
// (palacefiles.Empty): MemPalace answers its drawer reads with errors that
// mean "nothing here", on a devbox new to the fleet until its first write.
// Files that cannot tell are not read as empty.
func (e *Edge) localEmpty() bool {
	empty, err := palacefiles.Empty(e.cfg.Palace)
	if err != nil {
		e.log.Debug("whether the local palace holds drawers is unknown; its error stands", "err", err)
	}
	return err == nil && empty
}

// lacksLocally reports a local answer that means the drawer is not in the
// local palace: "Drawer not found", or any error from a palace that holds
// no drawers yet.
func (e *Edge) lacksLocally(res *mcp.CallToolResult) bool {
	t, _ := objectText(res)
	msg := gjson.Get(t, "error")
	return strings.HasPrefix(msg.String(), "Drawer not found") || msg.Exists() && e.localEmpty()
}
