package ladder

import (
	"slices"
	"sort"
	"strings"

	"github.com/joakimp/devbox-config/confpos"
)

// ownVars are the names devbox-config itself reads: the ladder's, the
// edge's and bridge's, and the gateway's.
func ownVars() []string {
	return append(append([]string(nil), Vars...),
		EnvEdgeChild, EnvEdgeLog, EnvEdgeHarness, EnvPalacePath, EnvUpstreamToken, EnvFromParent)
}

// ServerVars are the variables a stdio server a harness starts reads
// (the edge, bridge and mempalace-mcp): devbox-config's own but for the
// gateway's, render's and the two an entry sets itself, and every one
// MemPalace reads. A harness that starts servers with a fixed handful of
// variables (Codex, Auggie) must be handed each of them by name.
func ServerVars() []string {
	var out []string
	for _, n := range append(ownVars(), mempalaceVars...) {
		switch n {
		case EnvUpstreamToken, EnvPiSettingsMrg, EnvEdgeHarness, EnvFromParent:
		default:
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// mempalaceVars are the variables MemPalace reads: every MEMPAL(ACE)_*
// name in 3.11.0's Python source (mempalace/**/*.py, the legacy MEMPAL_*
// spellings included), plus the three later releases add
// (MEMPALACE_KG_RESULT_CAP, MEMPALACE_MAX_RESPONSE_CHARS,
// MEMPALACE_MCP_ENSURE_HUB).
var mempalaceVars = []string{
	"MEMPALACE_BACKEND", "MEMPALACE_BACKEND_EXPLICIT", "MEMPALACE_CLI_WRITE_ROUTING", "MEMPALACE_CONFIG_DIR",
	"MEMPALACE_DAEMON_LOCK_BACKOFF_SECONDS", "MEMPALACE_DAEMON_RETENTION_DAYS", "MEMPALACE_DAEMON_STATE_ROOT",
	"MEMPALACE_EAGER_WARMUP", "MEMPALACE_EMBEDDINGGEMMA2_BATCH_SIZE", "MEMPALACE_EMBEDDINGGEMMA2_DIMENSION",
	"MEMPALACE_EMBEDDINGGEMMA2_MODALITIES", "MEMPALACE_EMBEDDINGGEMMA2_REVISION", "MEMPALACE_EMBEDDINGGEMMA_BATCH_SIZE",
	"MEMPALACE_EMBEDDING_API_KEY", "MEMPALACE_EMBEDDING_API_MODEL", "MEMPALACE_EMBEDDING_API_URL",
	"MEMPALACE_EMBEDDING_DEVICE", "MEMPALACE_EMBEDDING_MODEL", "MEMPALACE_EMBEDDING_THREADS",
	"MEMPALACE_ENTITY_LANGUAGES", "MEMPALACE_HOOKS_AUTO_SAVE", "MEMPALACE_HOOKS_DAEMON", "MEMPALACE_HOOK_WRITE_ROUTING",
	"MEMPALACE_HUB_FORWARD", "MEMPALACE_HYBRID_BM25_WEIGHT", "MEMPALACE_HYBRID_VECTOR_WEIGHT", "MEMPALACE_IDENTITY_PATH",
	"MEMPALACE_KG_HALLWAY_MIN_COUNT", "MEMPALACE_KG_RESULT_CAP", "MEMPALACE_LANG", "MEMPALACE_LOG_FILE", "MEMPALACE_MAX_BACKUPS",
	"MEMPALACE_MAX_CHUNKS_PER_FILE", "MEMPALACE_MAX_RESPONSE_CHARS", "MEMPALACE_MCP_ALLOW_PEER_WRITER",
	"MEMPALACE_MCP_ALLOW_STALE_LIBRARY", "MEMPALACE_MCP_ENSURE_HUB", "MEMPALACE_MCP_EXTRA_ALLOWED_HOSTS",
	"MEMPALACE_MCP_HTTP_ALLOW_INSECURE_NO_TOKEN", "MEMPALACE_MCP_HTTP_TOKEN", "MEMPALACE_MCP_IDLE_HOURS",
	"MEMPALACE_MCP_READ_ONLY", "MEMPALACE_MCP_TLS_CERT", "MEMPALACE_MCP_TLS_KEY", "MEMPALACE_MCP_WRITER_WAIT_SECONDS",
	"MEMPALACE_MCP_WRITE_STALL_EXIT_SECS", "MEMPALACE_MCP_WRITE_STALL_WARN_SECS", "MEMPALACE_MILVUS_CONSISTENCY_LEVEL",
	"MEMPALACE_MILVUS_DB_NAME", "MEMPALACE_MILVUS_NAMESPACE", "MEMPALACE_MILVUS_TOKEN", "MEMPALACE_MILVUS_URI",
	"MEMPALACE_MINE_PID_FILE", "MEMPALACE_MINE_TIMEOUT_HOURS", "MEMPALACE_PALACE", "MEMPALACE_PGVECTOR_DSN",
	"MEMPALACE_PGVECTOR_LIVE_URL", "MEMPALACE_PGVECTOR_NAMESPACE", "MEMPALACE_PGVECTOR_SHARED_NAMESPACE",
	"MEMPALACE_PROJECT_FILES", "MEMPALACE_PYTHON", "MEMPALACE_QDRANT_API_KEY", "MEMPALACE_QDRANT_NAMESPACE",
	"MEMPALACE_QDRANT_TIMEOUT", "MEMPALACE_QDRANT_URL", "MEMPALACE_SOURCE_DIR", "MEMPALACE_SSE_MAX_CLIENTS",
	"MEMPALACE_STARTUP_INTEGRITY_MAX_MB", "MEMPALACE_SYNC_HTTP_TIMEOUT", "MEMPALACE_SYNC_INTERVAL",
	"MEMPALACE_TOPIC_TUNNEL_MIN_COUNT", "MEMPALACE_TRANSPORT", "MEMPALACE_WING", "MEMPALACE_WRITE_ROUTING",
	"MEMPAL_DIR", "MEMPAL_ENTITY_LANGUAGES", "MEMPAL_LANG", "MEMPAL_PALACE_PATH",
}

// namePrefix is the prefix every name devbox-config and MemPalace read
// shares; any other name under it is a mistake (the test suite's own
// variables are DEVBOX_*).
const namePrefix = "MEMPALACE_"

// CheckNames looks at an environment's variable names (the keys of a .env
// file, or of os.Environ): a MEMPALACE_* name that neither devbox-config
// (the ladder, the edge, the gateway) nor MemPalace reads is silently
// ignored by all of them, so it is a warning, with "did you mean" for the
// nearest known name; so is any other name one or two edits from a name
// devbox-config reads (MEMPALCE_REMOTE_URL).
func CheckNames(names []string) []Warning {
	own := ownVars()
	known := map[string]bool{}
	for _, n := range append(append([]string(nil), own...), mempalaceVars...) {
		known[n] = true
	}
	var out []Warning
	seen := map[string]bool{}
	for _, name := range names {
		if known[name] || seen[name] {
			continue
		}
		seen[name] = true
		near := nearName(name, own)
		switch {
		case near != "":
			out = append(out, Warning{Var: name,
				Message: "is not a variable devbox-config or MemPalace reads; did you mean " + near + "?",
				Fix:     "rename " + name + " to " + near})
		case strings.HasPrefix(name, namePrefix):
			out = append(out, Warning{Var: name,
				Message: "is not a variable devbox-config or MemPalace 3.11 reads: nothing uses its value",
				Fix:     "remove " + name + ", or correct its name (devbox-config reads " + strings.Join(Vars, ", ") + "; MemPalace's are in its README)"})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Var < out[j].Var })
	return out
}

// anyCasePrefix reports whether name starts with namePrefix, case aside
// (mempalace_remote_url: a shell or .env keeps the case, so nothing reads it).
func anyCasePrefix(name string) bool {
	return len(name) >= len(namePrefix) && strings.EqualFold(name[:len(namePrefix)], namePrefix)
}

// nearName is the name devbox-config (own) or, for a MEMPALACE_* name,
// MemPalace reads that name is one or two edits from ("" if none).
func nearName(name string, own []string) string {
	candidates := own
	if anyCasePrefix(name) {
		candidates = append(append([]string(nil), own...), mempalaceVars...)
	}
	return confpos.Nearest(name, candidates)
}

// Misspelt are CheckNames' warnings of a MEMPALACE_* name, in any case,
// one or two edits from a name devbox-config or MemPalace reads
// (MEMPALACE_EGDE, mempalace_remote_url), each with the name it may mean
// and doctor as the way to see the rest: render gives them at every start
// (attack73 F7, attack114 F6). No other name, and no name either reads,
// is told.
// Only MEMPALACE_* names are looked at: comparing every name of the
// environment cost a container start 0.33 ms (51 names).
func Misspelt(names []string) []Warning {
	ours := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !anyCasePrefix(n) })
	if len(ours) == 0 {
		return nil
	}
	var out []Warning
	own := ownVars()
	for _, w := range CheckNames(ours) {
		if nearName(w.Var, own) != "" {
			w.Fix += "; `devbox-config doctor` names every variable nobody reads"
			out = append(out, w)
		}
	}
	return out
}
