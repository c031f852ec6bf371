package doctor

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/joakimp/devbox-config/confpos"
	"github.com/joakimp/devbox-config/harness"
	"github.com/joakimp/devbox-config/ladder"
)

// IDPiExtensionNoEdge: pi's own MemPalace extension is installed, edge mode
// is asked for, and nothing routes pi through the edge.
const IDPiExtensionNoEdge = "pi-extension-no-edge"

// CheckPiExtension is pi-extension-no-edge (RFC 001 §4.1). pi's MemPalace
// extension (extensions/pi/mempalace.ts upstream) builds its client in
// createClient() with two branches, stdio and remote: with MEMPALACE_EDGE=1
// it silently stays in remote mode, with no offline writes. Only a
// pi-mcp-adapter entry running `devbox-config edge` gives pi the edge.
// The extension is found the way pi loads extensions: a file or directory
// in the agent directory's extensions/, or an entry of settings.json's
// "extensions" or "packages"; the finding names what showed it.
func CheckPiExtension(opts Options, st State) []Finding {
	if st.Settings.Mode != ladder.Edge {
		return nil
	}
	mcp, _ := harness.ByName("pi-mcp")
	dir := mcp.Location.DirPath(harness.Env{Home: opts.Home, HomeFromFlag: opts.HomeFromFlag, Lookup: opts.Env})
	where := piMemPalaceExtension(dir)
	if where == "" || adapterRunsEdge(filepath.Join(dir, mcp.Location.Write[0])) {
		return nil
	}
	return []Finding{{ID: IDPiExtensionNoEdge, Severity: Warn, Section: "§4.1",
		Message: fmt.Sprintf("pi's MemPalace extension is installed (%s) and MEMPALACE_EDGE=1 asks for edge mode, but the extension has no edge branch (its createClient() knows stdio and remote only) and no pi-mcp-adapter entry runs `devbox-config edge`: pi stays in remote mode, with no offline writes", where),
		Fix: fmt.Sprintf("install pi-mcp-adapter (`pi install npm:pi-mcp-adapter`), run `devbox-config render --target pi-mcp` so %s runs `devbox-config edge`, and remove the MemPalace extension (%s) so its remote client does not bypass the edge; docs/upstream.md has the edge branch asked of the extension",
			filepath.Join(dir, mcp.Location.Write[0]), where)}}
}

// piMemPalaceExtension is the file that shows pi loads a MemPalace
// extension ("" when none does).
func piMemPalaceExtension(dir string) string {
	ents, _ := os.ReadDir(filepath.Join(dir, "extensions"))
	for _, e := range ents {
		name := strings.ToLower(e.Name())
		if strings.Contains(name, "mempalace") && (e.IsDir() || strings.HasSuffix(name, ".ts") || strings.HasSuffix(name, ".js")) {
			return filepath.Join(dir, "extensions", e.Name())
		}
	}
	settings := filepath.Join(dir, "settings.json")
	b, err := os.ReadFile(settings)
	if err != nil {
		return ""
	}
	var s struct {
		Extensions []string          `json:"extensions"`
		Packages   []json.RawMessage `json:"packages"`
	}
	if (confpos.JSON{}).DecodeJSON(settings, b, &s) != nil { // keys as pi reads them: exactly
		return "" // pi ignores a settings.json it cannot parse too
	}
	for _, e := range s.Extensions {
		if strings.Contains(strings.ToLower(e), "mempalace") {
			return fmt.Sprintf("%s, \"extensions\": %q", settings, e)
		}
	}
	for _, raw := range s.Packages {
		var src string
		if json.Unmarshal(raw, &src) != nil {
			var obj struct {
				Source string `json:"source"`
			}
			_ = (confpos.JSON{}).DecodeJSON(settings, raw, &obj) // not an object: no source
			src = obj.Source
		}
		if l := strings.ToLower(src); strings.Contains(l, "mempalace") && !strings.Contains(l, "pi-mcp-adapter") {
			return fmt.Sprintf("%s, \"packages\": %q", settings, src)
		}
	}
	return ""
}

// adapterRunsEdge reports a pi-mcp-adapter entry for mempalace that runs
// `devbox-config edge`.
func adapterRunsEdge(file string) bool {
	b, err := os.ReadFile(file)
	if err != nil {
		return false
	}
	var doc struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	if (confpos.JSON{}).DecodeJSON(file, b, &doc) != nil {
		return false
	}
	e, ok := doc.MCPServers[harness.Server]
	return ok && filepath.Base(e.Command) == "devbox-config" && len(e.Args) > 0 && e.Args[0] == "edge"
}
