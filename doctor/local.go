package doctor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/joho/godotenv"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/fingerprint"
	"github.com/joakimp/devbox-config/harness"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/mailbox"
	"github.com/joakimp/devbox-config/palacefiles"
	"github.com/joakimp/devbox-config/render"
	"github.com/joakimp/devbox-config/shellword"
)

// SidecarFile is MemPalace's embedder identity file in the palace (§7.4).
const SidecarFile = palacefiles.SidecarFile

// drawersCollection is the collection whose embedder the edge's merged
// search depends on.
const drawersCollection = "mempalace_drawers"

// sidecar is the local palace's embedder identity: model "" when unknown.
type sidecar struct {
	model   string
	problem string // why it is unusable ("" = fine)
}

// holdsData reports a palace MemPalace has written drawers to: its
// chroma.sqlite3 holds a collection (palacefiles.Empty). A search alone
// creates the file without one. Files that cannot tell count as holding
// data; why says what they could not tell.
func holdsData(palace string) (held bool, why error) {
	empty, err := palacefiles.Empty(palace)
	return err != nil || !empty, err
}

// readSidecar reads <palace>/mempalace_embedder.json. MemPalace 3.11
// records it on a new palace's first write, with dimension 0 for its core
// embedders (it does not probe them): a missing file is a problem only on a
// palace that already holds data (holdsData), and dimension 0 never is.
func readSidecar(palace string) sidecar {
	path := filepath.Join(palace, SidecarFile)
	b, err := os.ReadFile(path)
	if err != nil {
		if !os.IsNotExist(err) {
			return sidecar{problem: fmt.Sprintf("%s cannot be read: %v", path, err)}
		}
		switch held, why := holdsData(palace); {
		case !held:
			return sidecar{} // not written to yet: the first write records it
		case why != nil:
			return sidecar{problem: fmt.Sprintf("%s is missing, and whether the palace holds data cannot be told (%v)", path, why)}
		}
		return sidecar{problem: fmt.Sprintf("%s is missing although the palace holds data (%s)", path, palacefiles.ChromaFile)}
	}
	var doc map[string]struct {
		Model string `json:"model_name"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return sidecar{problem: fmt.Sprintf("%s is not the JSON object MemPalace writes: %v", path, err)}
	}
	d, ok := doc[drawersCollection]
	if !ok || d.Model == "" {
		return sidecar{problem: fmt.Sprintf("%s has no %s.model_name (MemPalace treats that as unknown and checks nothing)", path, drawersCollection)}
	}
	return sidecar{model: d.Model}
}

// CheckEmbedderSidecar is embedder-sidecar (§7.4), in edge mode only, where
// merged reads compare the local palace's distances with the primary's:
// the sidecar unusable (or missing on a palace with data), or the edge's
// own canary (the outbox's record of a mismatch it saw, until distances
// agree again). MemPalace 3.11
// does not report its embedder over MCP, so the primary's model is known
// only through that canary.
func CheckEmbedderSidecar(opts Options, st State, ob outboxState) []Finding {
	if st.Settings.Mode != ladder.Edge || st.Palace == "" {
		return nil
	}
	var out []Finding
	if f := unknownModel(opts); f != nil {
		return []Finding{*f} // the sidecar is compared with a model MemPalace does not use
	}
	sc := readSidecar(st.Palace)
	if sc.problem != "" {
		out = append(out, Finding{ID: IDEmbedderSidecar, Severity: Warn, Section: "§7.4",
			Message: opts.mask(sc.problem) + "; merged search cannot tell whether the local palace and the primary embed alike",
			Fix:     sidecarFix(opts)})
	}
	if f := embedderMismatch(st.Palace, sc, opts.palaceEnv); f != nil {
		out = append(out, *f)
	}
	if ob.mismatch != "" {
		out = append(out, Finding{ID: IDEmbedderSidecar, Severity: Error, Section: "§7.4",
			Message: "the edge saw the local palace and the primary rank the same chunk (one drawer, the same text) at different distances (" + opts.mask(ob.mismatch) + "): they embed with different models, and a search that finds such a chunk answers the primary's results alone",
			Fix:     "set the same embedding_model in MemPalace's config.json here and on the primary, then re-mine the palace whose model changed; the edge clears its record at the next search whose chunks on both sides agree (`devbox-config edge status` shows it)"})
	}
	return out
}

// unknownModel is embedder-sidecar's error for an embedding model
// MemPalace does not know (catalogue.EmbeddingModels): it embeds with
// minilm instead, or refuses every write for a near miss, and the palace
// is stamped with a model the fleet does not use. nil: a known one.
func unknownModel(opts Options) *Finding {
	model, from := ladder.EmbeddingModel(opts.palaceEnv)
	if catalogue.KnownEmbeddingModel(model) {
		return nil
	}
	where, name := from, "embedding_model"
	if from == ladder.EnvEmbeddingModel {
		where, name = envLine(opts.EnvFiles, from, model), from
	}
	valid := strings.Join(catalogue.EmbeddingModels(), ", ")
	return &Finding{ID: IDEmbedderSidecar, Severity: Error, Section: "§7.4",
		Message: fmt.Sprintf("%s=%s (%s) is not an embedding model MemPalace %s knows (%s): it embeds with minilm instead, or refuses every write for a near miss, so the palace is stamped with a model the fleet does not use", name, mailbox.Quoted(opts.mask(model)), where, catalogue.Checked, valid),
		Fix:     fmt.Sprintf("set %s (%s) to one of %s: the model the primary and every palace of the fleet embed with (without it, MemPalace's default is minilm)", name, where, valid)}
}

// envLine is FILE:LINE of the last line of the first of files that sets
// name to value, else "the environment".
func envLine(files []string, name, value string) string {
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // not there: the value came from elsewhere
		}
		at := 0
		for i, l := range strings.Split(string(b), "\n") {
			l = strings.TrimPrefix(strings.TrimSpace(l), "export ")
			if v, ok := strings.CutPrefix(l, name+"="); ok && strings.Trim(strings.TrimSpace(v), `"'`) == value {
				at = i + 1
			}
		}
		if at > 0 {
			return fmt.Sprintf("%s:%d", f, at)
		}
	}
	return "the environment"
}

// sidecarFix names the model this devbox's MemPalace checks the palace
// against, and where that comes from (ladder.EmbeddingModel, MemPalace's
// order): recording another one makes MemPalace refuse every write.
func sidecarFix(opts Options) string {
	model, from := ladder.EmbeddingModel(opts.palaceEnv)
	return fmt.Sprintf("record the model the palace was filled with: `mempalace palace set-embedder --model %[1]s` (%[1]s: the model MemPalace here embeds with, from %[2]s; if the palace was filled with another, name that one and set MEMPALACE_EMBEDDING_MODEL to it too, or MemPalace refuses every write); the primary must embed with the same model", model, from)
}

// EmbedderMismatch is embedder-sidecar's error for a palace filled with
// another embedder than the one env configures (nil: the same, or not
// known): MemPalace refuses every read and write on it (join checks it
// before it starts).
func EmbedderMismatch(palace string, env ladder.Lookup) *Finding {
	return embedderMismatch(palace, readSidecar(palace), env)
}

func embedderMismatch(palace string, sc sidecar, env ladder.Lookup) *Finding {
	if sc.model == "" {
		return nil
	}
	model, from := ladder.EmbeddingModel(env)
	if strings.EqualFold(model, sc.model) {
		return nil
	}
	return &Finding{ID: IDEmbedderSidecar, Severity: Error, Section: "§7.4",
		Message: fmt.Sprintf("the local palace was filled with embedder %q (%s) and %s configures %q: MemPalace refuses every search and write on it (\"Embedder identity mismatch\"), so the edge's local palace takes nothing", sc.model, filepath.Join(palace, SidecarFile), from, model),
		Fix:     fmt.Sprintf("set MEMPALACE_EMBEDDING_MODEL=%s (or embedding_model in MemPalace's config.json) for the local palace, the model it was filled with; or re-embed it with the new one (`mempalace repair rebuild-index`)", sc.model)}
}

// CheckPalaceLocation is palace-location (§7.1): devbox-config before
// it followed MemPalace 3.10+'s rules (ladder.PalacePath) kept the edge's
// outbox in ~/.mempalace/palace/edge even where MemPalace kept its palace
// in its XDG config directory. Where that old outbox is still there and
// the palace is now elsewhere, what waits in it is never sent.
func CheckPalaceLocation(opts Options, st State) []Finding {
	old := filepath.Join(opts.mempalaceDir(), "palace")
	if st.Palace == "" || filepath.Clean(st.Palace) == old {
		return nil
	}
	if _, err := os.Stat(OutboxPath(old)); err != nil {
		return nil
	}
	return []Finding{{ID: IDPalaceLocation, Severity: Warn, Section: "§7.1",
		Message: fmt.Sprintf("an earlier devbox-config kept the edge's outbox in %s; the edge and MemPalace now keep the palace in %s, so what waits in that outbox is never sent", OutboxPath(old), st.Palace),
		Fix:     fmt.Sprintf("set %s=%s in .env and recreate the container: the edge sends what waits there, and MemPalace and the edge keep the palace there (on the persisted volume)", ladder.EnvPalacePath, old)}}
}

// CheckPalaceSharedParent is palace-shared-parent (§7.1): MemPalace 3.11
// keeps tunnels.json and hallways.json in the palace's parent directory
// (mempalace/config.py), so a palace whose parent also holds another
// palace (palacefiles.Is; the primary's, on the same host) shares that
// palace's tunnels: an edge lists them as this device's own, trusted,
// whatever their wing. Whether the palace is the primary's own directory
// doctor cannot tell (MemPalace does not say where its palace is).
func CheckPalaceSharedParent(opts Options, st State) []Finding {
	if st.Palace == "" {
		return nil
	}
	other := palacefiles.SharedParent(st.Palace)
	if other == "" {
		return nil
	}
	parent := filepath.Dir(filepath.Clean(st.Palace))
	own := filepath.Join(parent, filepath.Base(st.Palace)+"-own", "palace")
	return []Finding{{ID: IDPalaceSharedParent, Severity: Warn, Section: "§7.1",
		Message: fmt.Sprintf("the palace %s shares its parent directory %s with another palace, %s: MemPalace keeps tunnels.json and hallways.json in the parent, so both palaces read and write the same tunnels, and an edge lists the other palace's tunnels (any wing's, any writer's label) as this device's own, trusted", st.Palace, parent, other),
		Fix:     fmt.Sprintf("give the palace a directory of its own: move it into an empty directory (e.g. %s), set %s to that path and recreate the container; the tunnels in %s stay with the other palace", own, ladder.EnvPalacePath, filepath.Join(parent, "tunnels.json"))}}
}

// notPersisted: the filesystems that die with the container.
func notPersisted(fstype string) bool {
	switch fstype {
	case "overlay", "overlayfs", "aufs", "tmpfs", "ramfs":
		return true
	}
	return false
}

// mount is one /proc/self/mountinfo line's mount point and type.
type mount struct{ point, fstype string }

// readMountInfo parses a mountinfo file (proc(5)): field 5 is the mount
// point (octal-escaped), the type follows the " - " separator.
func readMountInfo(path string) ([]mount, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []mount
	for line := range strings.Lines(string(b)) {
		pre, post, ok := strings.Cut(line, " - ")
		f := strings.Fields(pre)
		g := strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 1 {
			continue
		}
		out = append(out, mount{point: unescapeMount(f[4]), fstype: g[0]})
	}
	return out, nil
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%3o", &c); err == nil {
				b.WriteByte(byte(c))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountOf is the mount holding path: the longest mount point that is path
// or one of its parents (the last one listed wins on a tie: it is on top).
func mountOf(mounts []mount, path string) (mount, bool) {
	var best mount
	found := false
	for _, m := range mounts {
		p := filepath.Clean(m.point)
		if path == p || p == "/" || strings.HasPrefix(path, p+"/") {
			if !found || len(p) >= len(filepath.Clean(best.point)) {
				best, found = m, true
			}
		}
	}
	return best, found
}

// existingReal is path with symlinks resolved, for its nearest existing
// ancestor (the palace may not exist yet).
func existingReal(path string) string {
	p := filepath.Clean(path)
	var rest []string
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(append([]string{r}, rest...)...)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Clean(path)
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}

// CheckEdgeVolume is edge-volume (§1.2): edge mode keeps local-first
// writes and the outbox in the palace, so the palace must be on a volume
// that outlives the container.
func CheckEdgeVolume(opts Options, st State) []Finding {
	if st.Settings.Mode != ladder.Edge || st.Palace == "" {
		return nil
	}
	mounts, err := readMountInfo(opts.MountInfo)
	if err != nil {
		return nil // not Linux, or no /proc: nothing to say
	}
	real := existingReal(st.Palace)
	m, ok := mountOf(mounts, real)
	if !ok || !notPersisted(m.fstype) {
		return nil
	}
	return []Finding{{ID: IDEdgeVolume, Severity: Error, Section: "§1.2",
		Message: fmt.Sprintf("edge mode keeps the outbox and every local-first write in %s, which is on %s (%s, the container's own layer): writes not yet flushed to the primary die when the container is recreated", st.Palace, m.point, m.fstype),
		Fix:     "uncomment the devbox-palace volume in docker-compose.yml (`devbox-palace:/home/developer/.mempalace`) and recreate the container; or turn edge mode off (MEMPALACE_EDGE=0)"}}
}

// CheckEnvPermissions is env-permissions (R3): a .env holding
// MEMPALACE_REMOTE_TOKEN must be 0600.
func CheckEnvPermissions(opts Options) []Finding {
	var out []Finding
	for _, path := range opts.EnvFiles {
		fi, err := os.Stat(path)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 == 0 {
			continue
		}
		holds := false
		if vars, err := godotenv.Read(path); err == nil {
			holds = strings.TrimSpace(vars[ladder.EnvRemoteToken]) != ""
		} else if b, err := os.ReadFile(path); err == nil {
			holds = bytes.Contains(b, []byte(ladder.EnvRemoteToken)) // unparsable: assume the worst
		}
		if !holds {
			continue
		}
		out = append(out, Finding{ID: IDEnvPermissions, Severity: Error, Section: "R3",
			Message: fmt.Sprintf("%s holds %s and is readable by %s (mode %04o)", path, ladder.EnvRemoteToken, who(fi.Mode().Perm()), fi.Mode().Perm()),
			Fix:     "chmod 600 " + shellword.Quote(path)})
	}
	return out
}

func who(perm os.FileMode) string {
	switch {
	case perm&0o070 != 0 && perm&0o007 != 0:
		return "group and others"
	case perm&0o070 != 0:
		return "its group"
	}
	return "others"
}

// harnessDir is a directory holding harness configs render manages,
// their names there and the harness records that name them.
type harnessDir struct {
	dir     string
	names   []string
	records []harness.Record
}

// harnessDirs are the directories of every harness record, each with the
// config names render manages in it.
func harnessDirs(opts Options) []harnessDir {
	env := harness.Env{Home: opts.Home, HomeFromFlag: opts.HomeFromFlag, Lookup: opts.Env}
	var out []harnessDir
	at := map[string]int{}
	for _, r := range harness.All() {
		d := r.Location.DirPath(env)
		i, ok := at[d]
		if !ok {
			i, at[d] = len(out), len(out)
			out = append(out, harnessDir{dir: d})
		}
		out[i].names = append(out[i].names, r.Location.Names()...)
		out[i].records = append(out[i].records, r)
	}
	return out
}

// isConfigFile: a harness config, its .proposed, a .bak copy, or render's
// record.
func (h harnessDir) isConfigFile(name string) bool {
	if name == fingerprint.StateFile {
		return true
	}
	for _, c := range h.names {
		if name == c || name == c+".proposed" || strings.HasPrefix(name, c+".bak") {
			return true
		}
	}
	return false
}

// CheckRenderRecords is render-record (§4.1): a record render cannot
// parse (a crash, a bad copy) makes render keep every entry beside it as
// a user's edit, so one it wrote stays whatever the environment says (with
// no MEMPALACE_* variables, too). A record it cannot open is render's to
// report (it skips the target and says why).
func CheckRenderRecords(opts Options) []Finding {
	var out []Finding
	for _, h := range harnessDirs(opts) {
		path := filepath.Join(h.dir, fingerprint.StateFile)
		b, err := os.ReadFile(path)
		if err != nil {
			continue // none, or one render cannot open: render's to report
		}
		if _, err = fingerprint.ParseState(b); err == nil {
			continue
		}
		var targets []string // those whose config is beside it
		for _, r := range h.records {
			if slices.ContainsFunc(r.Location.Names(), func(name string) bool { _, err := os.Stat(filepath.Join(h.dir, name)); return err == nil }) {
				targets = append(targets, r.Name)
			}
		}
		out = append(out, Finding{ID: IDRenderRecord, Severity: Warn, Section: "§4.1",
			Message: fmt.Sprintf("%s is unreadable (%v): render treats every mempalace entry beside it as your edit and keeps it, so one it wrote stays whatever the environment says, even with no MEMPALACE_* variables", path, err),
			Fix:     render.UnreadableRecordFix(path, targets)})
	}
	return out
}

// maxScan bounds how much of one file token-in-config reads.
const maxScan = 8 << 20

// CheckTokenInConfig is token-in-config (R3): the token's value written
// literally into a harness config, a .proposed, a .bak or render's record.
// The finding names the file and line, never the value.
func CheckTokenInConfig(opts Options) []Finding {
	tok := opts.token()
	if len(tok) < MinTokenLen { // shorter values would match by accident: weak-token says so
		return nil
	}
	var out []Finding
	for _, hd := range harnessDirs(opts) {
		ents, err := os.ReadDir(hd.dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if !e.Type().IsRegular() || !hd.isConfigFile(e.Name()) {
				continue
			}
			path := filepath.Join(hd.dir, e.Name())
			line := lineOf(path, tok)
			if line == 0 {
				continue
			}
			fix := fmt.Sprintf("replace the value by the harness's own reference to %[1]s (opencode: \"Bearer {env:%[1]s}\"; pi-mcp-adapter: \"bearerTokenEnv\": \"%[1]s\"; docs/harnesses.md lists every harness's), or run `devbox-config render --reclaim`; delete stale .bak/.proposed copies, and rotate the token if the file ever left this machine", ladder.EnvRemoteToken)
			if e.Name() == fingerprint.StateFile {
				// render's record: the token is in a "was", the text of the
				// empty server map render gives back on opt-out, copied
				// with a comment on its line.
				fix = fmt.Sprintf("`chmod 600 %[1]s`; the token is in a \"was\" there, the text (a comment included) of the empty server map render inserted into, kept to give it back on opt-out: delete that comment from the config if it is still there, and the token from the \"was\" value (opt-out then leaves the map without it); rotate the token if the file was ever readable by others", shellword.Quote(path))
			}
			out = append(out, Finding{ID: IDTokenInConfig, Severity: Error, Section: "R3",
				Message: fmt.Sprintf("%s line %d holds the value of %s literally: anyone who can read the file (or a backup of it) has the primary", path, line, ladder.EnvRemoteToken),
				Fix:     fix})
		}
	}
	return out
}

// lineOf is the 1-based line of the first occurrence of tok (0: none).
func lineOf(path, tok string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, maxScan))
	i := bytes.Index(b, []byte(tok))
	if i < 0 {
		return 0
	}
	return 1 + bytes.Count(b[:i], []byte("\n"))
}

// CheckProposedPending is proposed-pending (§4.1): render kept a user's
// edit and left the environment's value in <config>.proposed; until the
// user merges or discards it, the harness does not do what .env says. A
// .proposed render would not write now (render's dry run proposes nothing
// there: opted out again, so the user's own entry is theirs and nothing
// is pending) is a note saying to delete it, not a warning to merge it.
// plan is render's dry run.
func CheckProposedPending(opts Options, plan RenderPlan) []Finding {
	env := harness.Env{Home: opts.Home, HomeFromFlag: opts.HomeFromFlag, Lookup: opts.Env}
	var out []Finding
	var proposesNow func(prop string) []string // the targets render would write prop for now
	seen := map[string]bool{}
	for _, rec := range harness.All() {
		for _, c := range rec.Location.Names() {
			cfg := filepath.Join(rec.Location.DirPath(env), c)
			prop := cfg + ".proposed"
			if seen[prop] {
				continue
			}
			seen[prop] = true
			pi, err := os.Stat(prop)
			if err != nil {
				continue
			}
			ci, err := os.Stat(cfg)
			if err != nil {
				continue // a .proposed without its config is render's to clean up
			}
			if proposesNow == nil {
				proposesNow = renderProposes(plan)
			}
			age := opts.Now().Sub(pi.ModTime()).Round(time.Minute)
			targets := proposesNow(prop)
			if len(targets) == 0 {
				out = append(out, Finding{ID: IDProposedPending, Severity: Info, Section: "§4.1",
					Message: fmt.Sprintf("%s (written %s ago) proposes a MemPalace entry the environment no longer asks for: render proposes nothing for %s now, and the harness does what it says", prop, age, cfg),
					Fix:     fmt.Sprintf("delete render's stale proposal: `rm %s`", shellword.Quote(prop))})
				continue
			}
			msg := fmt.Sprintf("%s waits for you (written %s ago): render kept the MemPalace entry in %s as it is (your edit, or an entry render did not write), so the harness does not do what the environment says", prop, age, cfg)
			if pi.ModTime().Before(ci.ModTime()) {
				msg += "; the config changed after the proposal was written and still does not match it"
			}
			out = append(out, Finding{ID: IDProposedPending, Severity: Warn, Section: "§4.1",
				Message: msg,
				Fix:     fmt.Sprintf("`diff %s %s`, then either copy the mempalace entry over and delete the .proposed, or run `devbox-config render --reclaim --target %s` to let the environment win (your version goes to a .bak)", shellword.Quote(cfg), shellword.Quote(prop), strings.Join(targets, ","))})
		}
	}
	return out
}

// renderProposes says for which targets render, run now in this
// environment, would keep or write a .proposed (plan, its dry run: nothing
// is written): the ones its fix names (attack88 F1: a bare --reclaim took
// over other harnesses' entries too). When the run fails, or cannot read
// a target's file, its .proposed stays a warning.
func renderProposes(plan RenderPlan) func(prop string) []string {
	if plan.err != nil { // a usage error only, and no target is named
		return func(string) []string { return []string{"NAME"} }
	}
	proposed := map[string][]string{}
	for _, r := range plan.results {
		switch {
		case r.ProposedFile != "":
			proposed[r.ProposedFile] = append(proposed[r.ProposedFile], r.Target)
		case r.Action == render.ActionSkipped: // its file unread: no telling
			proposed[r.File+".proposed"] = append(proposed[r.File+".proposed"], r.Target)
		}
	}
	return func(prop string) []string { return proposed[prop] }
}
