package join

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/doctor"
	"github.com/joakimp/devbox-config/edge"
	"github.com/joakimp/devbox-config/edge/outbox"
	"github.com/joakimp/devbox-config/gateway/deviceinfo"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/palacefiles"
)

// joining is one run of Run. Its methods are the join's phases, in order:
// start, readManifest, plan, present, queue, drain, settle, verify,
// checkpoint;
// each reads what the phases before it left here, and adds to the report.
type joining struct {
	cfg    Config
	o      Options
	log    *slog.Logger
	target string
	obPath string // the join outbox
	policy *edge.Policy
	stamp  string // added_by for replayed drawers ("" without --origin-device)
	rep    Report
	began  time.Time // of the phase being timed (lap)

	local         Caller   // the local palace (nil with --resume)
	stopLocal     func()   // stops its server
	lock          *os.File // held for the run: one join of a palace to a target at a time
	man           Manifest
	store         *outbox.Store        // nil on a dry run with no earlier join
	madeStore     bool                 // this run created the join outbox's file
	dropStore     bool                 // close removes it: this run made it and queued nothing
	prior         map[string]outbox.Op // what earlier runs queued, by write
	settledBefore map[string]bool      // the ids of the ops earlier runs settled
	triedBefore   map[string]bool      // the ids of the ops earlier runs sent at least once
	planned       []planned            // the writes of this run, in order
	cp            TargetState          // this target's checkpoint, as it goes
	primary       *edge.Primary        // set by connect
	flush         countingPrimary      // the primary as the flusher sends to it
	answered      atomic.Int64         // when flush last had an answer (unix ns): countingPrimary
	sent          *callerOf            // the primary, counted
	final         map[string]outbox.Op // the ops after the drain, by id
	targets       []verifyTarget       // sent or found: verifiable by content
	wrote         []writtenRecord      // sent by this run with no server guard
	// landed is what ops an earlier run queued put on the primary in this
	// run (by the id the primary gave it: its kind), none of them a write
	// of this run: a write of this run found there is one this run sent.
	landed  map[string]string
	diaries map[string]bool // diary wings to list on the primary
	// replaced names the facts not sent as another value replaced them on
	// the primary (replacedThere's note).
	replaced []string
	left     int // ops still queued after the drain
	// tries are the attempts of the ops to send as the drain began, by op
	// id: one with no more after it was not tried by this run (triedNow).
	tries map[string]int
	// unasked are the ops of the records present could not ask the
	// primary about for the run's reason (planned.unasked), by op id.
	unasked map[string]bool
}

// planned is one write of the plan and what earlier runs did with it.
type planned struct {
	rec  Record
	op   outbox.Op
	had  bool // queued or sent by an earlier run
	sent bool // settled by an earlier run
	held bool // not queued: present found it on the primary by its local id
	// unasked is why present could not ask the primary for it, the
	// primary unreachable or refusing the token (held, not tried): "" when
	// it asked.
	unasked string
}

// requeue reports a write this run queues: none was queued before, or the
// one before was dropped by an operator.
func (p planned) requeue() bool {
	return !p.held && (!p.had || p.op.State == outbox.Done && len(p.op.Error) != 0 && !p.deleted())
}

// deleted: an earlier run found the record deleted on the primary (a
// gateway's trash holds it). It is not queued again: a gateway would refuse
// it again, and of equal diary entries the copies still there would count
// for it (attack33 g2: a second join said 4 skipped of 3 held).
func (p planned) deleted() bool {
	return p.had && p.op.State == outbox.Done && failedAs(p.op) == outbox.DeletedOnPrimary
}

// start checks the configuration and the flags (a *UsageError when the
// join cannot start) and starts the local palace's server, unless the run
// only resumes what an interrupted one queued.
func start(ctx context.Context, cfg Config, o Options) (*joining, error) {
	j := &joining{cfg: cfg.withDefaults(), o: o, log: cfg.Log, target: Target(cfg.URL), stopLocal: func() {}, began: time.Now(), unasked: map[string]bool{}}
	j.rep = newReport(j.target)
	j.rep.VerifySeed = o.Seed
	j.rep.DryRun = o.DryRun // a dry run that fails early says so too
	if j.log == nil {
		j.log = slog.New(slog.DiscardHandler)
	}
	if err := j.check(); err != nil {
		return j, err
	}
	if j.o.Stall <= 0 {
		j.o.Stall = max(3*cfg.Timeout, 30*time.Second)
	}
	if err := j.hold(); err != nil {
		return j, err
	}
	if o.Resume {
		return j, nil // nothing is read anew: no local server
	}
	j.cfg.Child = j.ownKG()
	cctx, stop := context.WithCancel(context.Background())
	child := edge.NewChild(j.cfg.Child, cfg.ChildEnv, j.log, edge.ChildOptions{Stderr: cfg.ChildStderr, Version: cfg.Version, Wait: j.cfg.StartWait})
	stopped := make(chan struct{})
	go func() { child.Run(cctx); close(stopped) }()
	j.stopLocal = func() { stop(); <-stopped }
	probe, cancel := context.WithTimeout(ctx, j.cfg.StartWait)
	defer cancel()
	if _, err := child.Session(probe, j.cfg.StartWait); err != nil {
		return j, usage("no local palace server (%s): %w", cfg.Child[0], err)
	}
	j.local = &counter{calls: j.rep.Calls, side: "local", next: childCaller{child}}
	return j, nil
}

// ownKG is the local server's argv, with --palace when the palace holds
// its knowledge graph (mempalace-mcp --palace, serve or mine wrote it) and
// ~/.mempalace holds none: without it the server would create an empty
// one there and read that (RFC 001 §7.1), a dry run too, and the join
// would then fail on the kg-split it made (attack118 F3).
func (j *joining) ownKG() []string {
	argv := j.cfg.Child
	if j.cfg.Home == "" || hasPalaceFlag(argv) || !exists(filepath.Join(j.cfg.Palace, "knowledge_graph.sqlite3")) {
		return argv
	}
	if _, err := os.Lstat(filepath.Join(j.cfg.Home, ".mempalace", "knowledge_graph.sqlite3")); !errors.Is(err, fs.ErrNotExist) {
		return argv // there (a link to the palace's, or a file: doctor's kg-split), or not known
	}
	return append(slices.Clip(argv), "--palace", j.cfg.Palace)
}

// check is start's look at the configuration, the policy and the flags.
func (j *joining) check() error {
	cfg, o := j.cfg, j.o
	switch {
	case cfg.URL == "":
		return usage("MEMPALACE_REMOTE_URL is not set: there is no primary to join")
	case !o.DryRun && (cfg.Token == nil || cfg.Token() == ""):
		return usage("MEMPALACE_REMOTE_TOKEN is not set: the primary would refuse the join")
	case len(cfg.Child) == 0:
		return usage("no local server command")
	case cfg.Palace == "":
		return usage("no palace directory")
	}
	stateDir := filepath.Join(cfg.Palace, "edge")
	policy, err := edge.LoadPolicy(stateDir)
	if err != nil {
		return usage("%w", err)
	}
	j.policy = policy
	for _, g := range o.Wings {
		if _, err := path.Match(g, "x"); err != nil {
			return usage("--wing %q: bad glob: %w", g, err)
		}
	}
	if cfg.Device != "" {
		j.stamp = cmp.Or(cfg.Agent, "mcp") + "/" + cmp.Or(cfg.Label, "-") + "/" + cfg.Device
	}
	j.obPath = filepath.Join(stateDir, OutboxFile(j.target))
	if o.Resume {
		// The join outbox bootstrap.json names for the target, which an
		// earlier build may have named otherwise.
		if cps, err := readCheckpoint(cfg.Palace); err == nil && cps[j.target].Outbox != "" && filepath.Base(cps[j.target].Outbox) == cps[j.target].Outbox {
			j.obPath = filepath.Join(stateDir, cps[j.target].Outbox)
		}
		if _, err := os.Stat(j.obPath); err != nil {
			return usage("--resume: no join to %s was started on this palace (%s)", j.target, j.obPath)
		}
	}
	return nil
}

// hold takes the palace's join lock for the run (not on a dry run): a
// second join of the palace, to this primary through any URL or to
// another, would send what the first sends (and to the same primary, as
// a second copy). The lock is <palace>/edge/join.lock, whatever the
// target; its holder writes its pid and target into it for the refusal.
// The kernel lets go of it when the holder dies (kill -9 too): the next
// join takes it at once. Where the file system refuses flock (or the
// platform has none), the join runs without; a lock file that cannot be
// opened (a read-only edge directory, a symlink) refuses the join.
func (j *joining) hold() error {
	if j.o.DryRun {
		return nil
	}
	file := filepath.Join(filepath.Dir(j.obPath), "join.lock")
	f, err := outbox.HoldLock(file)
	// A process forked in the moment before a join let go of the lock
	// holds a copy of its descriptor until it execs (a local palace
	// started beside it, under load): a second join holds it for its
	// whole run, so a short wait tells the two apart.
	for wait := time.Now().Add(250 * time.Millisecond); errors.Is(err, outbox.ErrLocked) && time.Now().Before(wait); {
		time.Sleep(50 * time.Millisecond)
		f, err = outbox.HoldLock(file)
	}
	switch {
	case errors.Is(err, outbox.ErrLocked):
		return usage("another join of this palace runs (%s, holding %s): it sends what this one would; let it finish (or stop it), then run devbox-config join again to see what is on the primary", doctor.JoinLockHolder(file), file)
	case errors.As(err, new(*fs.PathError)):
		return usage("the join lock cannot be taken (it keeps a second join of this palace from sending everything again): %w", err)
	case err != nil:
		j.log.Debug("join lock not taken; two joins of this palace are not kept apart", "file", file, "err", err)
		return nil
	}
	if f.Truncate(0) == nil {
		f.WriteString(strconv.Itoa(os.Getpid()) + " " + j.target + "\n") // only a hint for the refusal above
	}
	j.lock = f
	return nil
}

// close ends what start started.
func (j *joining) close() {
	if j.lock != nil {
		defer j.lock.Close()
	}
	if j.primary != nil {
		j.primary.Close()
	}
	if j.store != nil {
		if err := j.store.Close(); err != nil {
			j.log.Warn("join outbox not closed cleanly", "file", j.obPath, "err", err)
		}
	}
	if j.dropStore {
		for _, f := range []string{j.obPath, j.obPath + "-wal", j.obPath + "-shm"} {
			if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				j.log.Warn("the empty join outbox of a refused join not removed", "file", f, "err", err)
			}
		}
	}
	j.stopLocal()
}

// lap records how long the phase since the last lap took.
func (j *joining) lap(name string) {
	j.rep.Seconds[name] = float64(time.Since(j.began).Milliseconds()) / 1000
	j.began = time.Now()
}

// readManifest reads the local palace: the records of the selected wings
// and the knowledge graph (nothing on --resume). A palace that cannot be
// read ends the join.
func (j *joining) readManifest(ctx context.Context) *Failure {
	defer j.lap("read")
	if j.o.Resume {
		return nil
	}
	j.o.Progress.Phase("reading the local palace", 0)
	man, err := readLocal(ctx, j.reader(j.local, "local"), Selection{Policy: j.policy, Globs: j.o.Wings, Stamp: j.stamp}, kgReader{Files: j.kgFiles(), Home: j.cfg.Home, Palace: j.cfg.Palace}, func() (bool, error) { return palacefiles.Empty(j.cfg.Palace) }, func(_ string, n int) { j.o.Progress.Set(n) })
	j.o.Progress.Done()
	if err != nil {
		return j.unreadable(ctx, err)
	}
	j.man = man
	j.rep.Excluded = Excluded{Wings: append([]string{}, man.Excluded...), Narrowed: man.Narrowed, KnowledgeGraph: man.KGExcluded}
	j.rep.FactsSource = man.FactsSource
	j.rep.Failed = append(j.rep.Failed, man.Failed...)
	return nil
}

// unreadable is the failure of a local palace that could not be read
// (err): where its SQLite is damaged, doctor's palace-damaged finding and
// fix (doctor.CheckPalaceIntegrity), which MemPalace's refusal names none of.
func (j *joining) unreadable(ctx context.Context, err error) *Failure {
	f := &Failure{Kind: "palace", Record: j.cfg.Palace, Error: err.Error()}
	token := ""
	if j.cfg.Token != nil {
		token = j.cfg.Token()
	}
	env := func(k string) (string, bool) { return token, k == ladder.EnvRemoteToken && token != "" }
	then := "so nothing was read or sent"
	if j.o.DryRun {
		then = "so the real run would send nothing"
	}
	for _, d := range doctor.CheckPalaceIntegrity(ctx, doctor.Options{Home: j.cfg.Home, Env: env, IntegrityTimeout: doctor.DefaultIntegrityTimeout}, doctor.State{Palace: j.cfg.Palace}) {
		if d.Severity == doctor.Error {
			f.Error = fmt.Sprintf("%s, %s (devbox-config doctor's %s). Fix: %s", d.Message, then, d.ID, d.Fix)
			break
		}
	}
	return f
}

// kgFiles are the knowledge_graph.sqlite3 files the local server may use,
// in its order (RFC 001 §7.1: <palace>/ with --palace, else ~/.mempalace/).
func (j *joining) kgFiles() []string {
	home := ""
	if j.cfg.Home != "" {
		home = filepath.Join(j.cfg.Home, ".mempalace", "knowledge_graph.sqlite3")
	}
	inPalace := filepath.Join(j.cfg.Palace, "knowledge_graph.sqlite3")
	switch {
	case home == "":
		return []string{inPalace}
	case hasPalaceFlag(j.cfg.Child):
		return []string{inPalace, home}
	}
	return []string{home, inPalace}
}

// plan opens the join outbox (not for a dry run with no earlier join),
// learns what earlier runs queued or sent, and lists this run's writes, one
// per distinct write, with the manifest's counts.
func (j *joining) plan(ctx context.Context) *Failure {
	if !j.o.DryRun || exists(j.obPath) {
		j.madeStore = !exists(j.obPath)
		store, err := outbox.OpenOptions(j.obPath, outbox.Options{Device: j.cfg.Device, Label: j.cfg.Label, Log: j.log})
		if err != nil {
			return &Failure{Kind: "outbox", Record: j.obPath, Error: err.Error()}
		}
		j.store = store
	}
	ops, err := allOps(ctx, j.store) // none without a store
	if err != nil {
		return &Failure{Kind: "outbox", Record: j.obPath, Error: err.Error()}
	}
	j.prior, j.settledBefore, j.triedBefore = priorOps(ops), map[string]bool{}, map[string]bool{}
	for id, op := range ops {
		j.settledBefore[id] = op.State == outbox.Done
		j.triedBefore[id] = op.Attempts > 0
	}
	if j.o.Resume {
		j.man.Records = j.resumed()
	}
	byKey, equal := map[string]bool{}, map[string]int{}
	for _, rec := range j.man.Records {
		if rec.Kind == Diaries && rec.Ordinal == 0 {
			// Equal entries are each a write: the n-th of n is on the primary
			// when it holds n (the local ids' order numbers them alike in
			// every run). Equal as the primary counts them: one wing, one
			// text, whatever their topics.
			equal[rec.entryKey()]++
			rec.Ordinal = equal[rec.entryKey()]
		}
		k := rec.key()
		if byKey[k] {
			continue // the same write twice (e.g. one content in two mined drawers)
		}
		byKey[k] = true
		p := planned{rec: rec}
		if op, ok := j.prior[k]; ok {
			p.op, p.had = op, true
			p.sent = op.State == outbox.Done && len(op.Error) == 0
		}
		j.planned = append(j.planned, p)
		j.rep.Manifest[rec.Kind]++
		switch {
		case rec.Kind == Facts && rec.Closed:
			j.rep.Manifest["facts_closed"]++
		case rec.Kind == Facts:
			j.rep.Manifest["facts_open"]++
		}
		if !p.sent && !p.deleted() {
			j.rep.Pending[rec.Kind]++
		}
	}
	j.rep.Notes = notes(j.rep, j.man.NoDrawers)
	if len(j.o.Wings) > 0 && len(j.man.Narrowed) > 0 && j.rep.Manifest[Drawers]+j.rep.Manifest[Diaries] == 0 {
		j.rep.Notes = append(j.rep.Notes, fmt.Sprintf("--wing selects none of this palace's wings (not selected: %s): no drawers or diaries to send", strings.Join(j.man.Narrowed, ", ")))
	}
	return nil
}

// edgeQueued refuses a join while the edge's outbox has not settled an
// op writing a diary entry the join would send (one wing, one text): the
// edge sends it as a first write, which looks nothing up, so the primary
// would hold the entry twice (attack74 F6). It reads the outbox after the
// local palace: an edge queues a write before its local palace takes it,
// so an entry read there whose op is not pending now is on the primary,
// and counted there, or an operator dropped it. Dead, in doubt or held,
// the op waits for its operator too: dropped (or delivered), the next
// join sends the entry if the primary lacks it. In an outbox recorded as
// a copy, an op queued before the copy is the original's, held or
// dropped: its entry is left to the original, never refused for nor sent
// (leaveToOriginal).
func (j *joining) edgeQueued(ctx context.Context) *Failure {
	mine := map[string]bool{}
	for _, p := range j.planned {
		if p.rec.Kind == Diaries && !p.sent && !p.deleted() {
			mine[catalogue.DiaryWingFor(p.rec.Args)+"\x00"+catalogue.EntrySuffix(catalogue.DiaryEntry(p.rec.Args))] = true
		}
	}
	if len(mine) == 0 {
		return nil
	}
	file := doctor.OutboxPath(j.cfg.Palace)
	then := "so nothing was queued"
	if j.o.DryRun {
		then = "so the real run would queue nothing"
	}
	pending, complete, err := outbox.PendingDiaries(ctx, file)
	if err == nil && !complete {
		err = errors.New("its -wal could not be read")
	}
	if err != nil {
		return &Failure{Kind: Diaries, Record: file, Error: fmt.Sprintf("the edge's outbox could not be read for the diary entries it still sends (%v), %s: a join could file them twice. Fix: devbox-config doctor names what is wrong with it", err, then)}
	}
	var ops []string
	theirs := map[string]int{}
	for _, op := range pending {
		switch k := op.Wing + "\x00" + op.Suffix; {
		case !mine[k]:
		case op.BeforeCopy:
			theirs[k]++
		default:
			ops = append(ops, op.Short()+" ("+op.State.String()+")")
		}
	}
	if len(ops) == 0 {
		j.leaveToOriginal(theirs)
		return nil
	}
	if len(ops) > 5 {
		ops = append(ops[:5], fmt.Sprintf("and %d more", len(ops)-5))
	}
	return &Failure{Kind: Diaries, Record: file, Error: fmt.Sprintf("the edge's outbox still holds diary entries this join would send (ops %s): the edge sends them itself, and the primary would hold each twice, %s. Fix: run `%sdevbox-config edge flush` (it sends them), then devbox-config join again; one it cannot send (dead, in doubt or held) is settled first with `devbox-config edge outbox retry ID` (the edge sends it) or `drop ID` / `delivered ID` (the next join sends its entry if the primary lacks it)", strings.Join(ops, ", "), then, j.cfg.OutboxEnv)}
}

// leaveToOriginal takes out of the plan, per entry (one wing, one text),
// as many unsent diary entries as the outbox, recorded as a copy, holds
// ops for that were queued before the copy, held or dropped (attack76
// F1): the original machine holds those ops too and sends them, so this
// join sending them as well would file each twice. Keys as edgeQueued's
// (mine). The last of equal entries go: the first are the ones the primary may hold already.
func (j *joining) leaveToOriginal(theirs map[string]int) {
	n := 0
	for i := len(j.planned) - 1; i >= 0; i-- {
		p := j.planned[i]
		if p.rec.Kind != Diaries || p.sent || p.deleted() {
			continue
		}
		if k := catalogue.DiaryWingFor(p.rec.Args) + "\x00" + catalogue.EntrySuffix(catalogue.DiaryEntry(p.rec.Args)); theirs[k] > 0 {
			theirs[k]--
			j.planned = slices.Delete(j.planned, i, i+1)
			j.rep.Pending[Diaries]--
			n++
		}
	}
	if n > 0 {
		j.rep.LeftToOriginal = n
		j.rep.Notes = append(j.rep.Notes, fmt.Sprintf("%d diary entries not sent: queued before this outbox was copied: the original's to send (its edge holds their ops too and sends them)", n))
	}
}

// resumed is a --resume's manifest: only what an interrupted run left
// queued, in the order it was queued.
func (j *joining) resumed() []Record {
	var recs []Record
	for _, op := range j.prior {
		if op.State == outbox.Done {
			continue
		}
		var args map[string]any
		if err := json.Unmarshal(op.Payload, &args); err != nil {
			// priorOps indexed only the ops whose payload is an object
			j.rep.Failed = append(j.rep.Failed, Failure{Kind: kindOfTool(op.Tool), Record: op.Short(), Wing: op.Wing, Error: "the join outbox holds a payload that is not a JSON object: " + err.Error()})
			continue
		}
		recs = append(recs, Record{Kind: kindOfTool(op.Tool), Tool: op.Tool, Args: args, Wing: op.Wing, Closed: str(args, "valid_to") != "", Ordinal: op.Ordinal})
	}
	sort.Slice(recs, func(a, b int) bool { return j.prior[recs[a].key()].LocalSeq < j.prior[recs[b].key()].LocalSeq })
	return recs
}

// dryRun ends a --dry-run after the plan: what would be sent and skipped,
// and what of it a gateway would refuse. With a token it asks the primary
// as doctor does (unreachable, refusing the token, no MCP endpoint at the
// URL: the report fails with doctor's finding and fix, as the real run
// would fail), and what a real run asks before queuing (present: the updated drawers, by
// their ids), read-only, and counts and names them as that run would.
func (j *joining) dryRun(ctx context.Context) Report {
	for _, p := range j.planned {
		if p.sent {
			j.rep.Skipped[p.rec.Kind]++
		}
	}
	if j.cfg.Token != nil && j.cfg.Token() != "" {
		if f := j.diagnose(ctx, "the real run would send nothing"); f != nil {
			j.rep.Failed = append(j.rep.Failed, *f)
			return j.rep
		}
		j.present(ctx)
	} else {
		// The real run refuses to start without one (check): so does this.
		j.rep.Failed = append(j.rep.Failed, Failure{Kind: "primary", Record: "token", Error: "MEMPALACE_REMOTE_TOKEN is not set, so the real run would refuse to start (the primary would refuse the join); the primary was not asked. Fix: set MEMPALACE_REMOTE_TOKEN in this device's environment (behind a devbox-config gateway, this device's own token, which `devbox-config gateway token issue DEVICE` prints on the gateway's host)"})
		if n := len(slices.DeleteFunc(j.toAsk(false), (*planned).deleted)); n > 0 { // the updated ones
			j.rep.Notes = append(j.rep.Notes, fmt.Sprintf("%d drawers updated since they were filed are not looked up on the primary (no MEMPALACE_REMOTE_TOKEN): a real run asks for each by its id first, and does not send one the primary holds (skipped, or named edited with other content)", n))
		}
	}
	if j.rep.Pending[Drawers]+j.rep.Pending[Diaries] > 0 {
		j.rep.Notes = append(j.rep.Notes, "a devbox-config gateway does not file again a drawer or diary entry an admin deleted on the primary (its trash holds it, not restored): the real run counts those as deleted on the primary, not sent; a dry run cannot tell which (the gateway reads its trash only for a join's write)")
	}
	j.grants(ctx)
	return j.rep
}

// wrongPrimary is the real run's first contact: a tools/list through the
// edge's client. A primary that is down (nothing answers: refused, no
// route, no answer in time, a 5xx: failing, or a gateway's upstream
// down) or refuses the token is nil: the run queues
// and reports it as documented, the records queued for this URL. Anything
// else answering (a 404 without /mcp, no MCP endpoint, HTTP to a TLS URL)
// is the URL's mistake, and queuing would key the records to it: the
// failure with doctor's finding, before anything is queued.
func (j *joining) wrongPrimary(ctx context.Context) *Failure {
	j.connect()
	_, err := j.primary.ListTools(ctx)
	if st := j.primary.LastStatus(); err == nil || errors.Is(err, outbox.ErrUnauthorized) || down(err) || st >= 500 || st == http.StatusTooManyRequests {
		return nil // a failing primary, or a gateway's upstream down: as down
	}
	return j.diagnose(ctx, "nothing was queued for this URL")
}

// down: nothing answered at the URL's address (a refused or failed dial,
// an unknown host, no answer in time).
func down(err error) bool {
	var op *net.OpError
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &op) && op.Op == "dial" || errors.As(err, &ne) && ne.Timeout()
}

// diagnose is doctor's finding on the primary (doctor.DiagnosePrimary,
// within the call timeout) as the report's failure, then says what the
// run did about it; nil when doctor finds nothing wrong.
func (j *joining) diagnose(ctx context.Context, then string) *Failure {
	token := j.cfg.Token()
	env := func(k string) (string, bool) { return token, k == ladder.EnvRemoteToken && token != "" }
	f, ok := doctor.DiagnosePrimary(ctx, env, ladder.Settings{Mode: ladder.Edge, URL: j.cfg.URL, TokenSet: token != ""}, j.cfg.Timeout)
	if !ok {
		return nil
	}
	rec := "connection"
	if f.ID == doctor.IDPrimaryAuth {
		rec = "token"
	}
	return &Failure{Kind: "primary", Record: rec, Error: fmt.Sprintf("%s, so %s (devbox-config doctor's %s). Fix: %s", f.Message, then, f.ID, f.Fix)}
}

// tokenFix is what a join refused the token says to do.
const tokenFix = "check MEMPALACE_REMOTE_TOKEN (devbox-config doctor names the fix; behind a devbox-config gateway it is this device's own token, which `devbox-config gateway token issue DEVICE` prints on the gateway's host)"

// grants notes what a gateway would refuse of the records to send, by
// the device's grants as it says them: facts its knowledge-graph grant
// is not write for, drawers and diaries by the rule the gateway refuses
// them by (deviceinfo's AuthorizeWrite). With records to send and a
// token, a dry run asks it what it says of the device (one ping, sending
// nothing; a primary that is not a gateway, or does not answer within
// askWait, says nothing).
func (j *joining) grants(ctx context.Context) {
	if j.rep.Pending[Drawers]+j.rep.Pending[Diaries]+j.rep.Pending[Facts] == 0 || j.cfg.Token == nil || j.cfg.Token() == "" {
		return
	}
	const askWait = 5 * time.Second
	p := edge.NewPrimary(j.cfg.URL, j.cfg.Token, j.log, edge.PrimaryOptions{Timeout: min(j.cfg.Timeout, askWait), AskTimeout: askWait, Version: j.cfg.Version, Quiet: true})
	defer p.Close()
	if !p.RefreshDevice(ctx) {
		return
	}
	in, ok := p.Device()
	if !ok {
		return
	}
	fail := "would fail"
	if !j.o.DryRun {
		fail = "failed"
	}
	if n := j.rep.Pending[Facts]; n > 0 && in.KG != "write" {
		j.rep.Notes = append(j.rep.Notes, fmt.Sprintf("the gateway refuses this device's facts (its knowledge-graph grant is %q): the %d facts to send %s; on the gateway, `devbox-config gateway device set %s --kg write` grants it", in.KG, n, fail, in.ID))
	}
	type refusal struct{ kind, wing, rule string }
	refused, order := map[refusal]int{}, []refusal{}
	for _, pl := range j.planned {
		if pl.sent || pl.held || pl.rec.Kind == Facts {
			continue
		}
		t, _ := catalogue.Lookup(pl.rec.Tool)
		if ok, rule, wing := in.AuthorizeWrite(t, pl.rec.Args, ""); !ok {
			r := refusal{pl.rec.Kind, wing, rule}
			if refused[r] == 0 {
				order = append(order, r)
			}
			refused[r]++
		}
	}
	for _, r := range order {
		msg := fmt.Sprintf("the gateway refuses this device's %d %s", refused[r], r.kind)
		if r.wing != "" {
			msg += fmt.Sprintf(" in wing %q", r.wing)
		}
		msg += fmt.Sprintf(" (%s): they %s", r.rule, fail)
		if r.rule == deviceinfo.RuleWriteGlobs {
			msg += fmt.Sprintf("; on the gateway, `devbox-config gateway device set %s --write ...` with a glob that matches the wing grants them", in.ID)
		}
		j.rep.Notes = append(j.rep.Notes, msg)
	}
}

// queue puts in the join outbox what no earlier run queued (a dropped op
// is queued again) and checkpoints the target as in progress.
func (j *joining) queue(ctx context.Context) {
	j.cp = TargetState{State: StateInProgress, Outbox: filepath.Base(j.obPath)}
	if st, err := readCheckpoint(j.cfg.Palace); err != nil {
		j.log.Warn("join checkpoint unreadable; this run replaces it, keeping its bytes in "+CheckpointFile+".unreadable", "err", err)
	} else if prev, ok := st[j.target]; ok {
		j.cp.JoinedAt, j.cp.HighWater = prev.JoinedAt, prev.HighWater
	}
	toQueue := 0
	for _, p := range j.planned {
		if p.requeue() {
			toQueue++
		}
	}
	j.o.Progress.Phase("queuing", toQueue)
	queued, again := 0, refusedAgain{}
	for i := range j.planned {
		p := &j.planned[i]
		if p.had && p.op.State == outbox.Dead && !p.held {
			// Refused by an earlier run, and not found on the primary
			// since (present): this one tries it again.
			if op, err := j.store.Retry(ctx, p.op.ID); err != nil {
				j.log.Warn("a record an earlier join saw refused is not tried again", "op", p.op.Short(), "err", err)
			} else {
				again.add(p.op, false)
				p.op = op
			}
		}
		if !p.requeue() {
			continue
		}
		payload, err := json.Marshal(p.rec.Args)
		if err == nil {
			p.op, err = j.store.Enqueue(ctx, outbox.Write{Name: p.rec.Tool, Payload: payload, Wing: p.rec.Wing, Ordinal: p.rec.Ordinal})
		}
		if err != nil {
			j.rep.Failed = append(j.rep.Failed, Failure{Kind: p.rec.Kind, Record: recordName(p.rec), Wing: p.rec.Wing, Error: err.Error()})
			continue
		}
		p.had, p.sent = true, false
		if err := j.noteLocalID(ctx, *p); err != nil {
			j.rep.Failed = append(j.rep.Failed, Failure{Kind: p.rec.Kind, Record: recordName(p.rec), Wing: p.rec.Wing, Error: "queued, but its local id is not noted for the primary (a gateway's trash cannot find it by it): " + err.Error()})
		}
		queued++
		j.o.Progress.Set(queued)
	}
	j.o.Progress.Done()
	j.replaceRefused(ctx, &again)
	if note := again.note(); note != "" {
		j.rep.Notes = append(j.rep.Notes, note)
	}
	j.lap("queue")
	j.saveCheckpoint()
}

// replaceRefused drops the refused ops of earlier runs that hold back
// this run's write of the same record (a drawer's id, a fact's triple)
// and are none of this run's writes: the run's flags changed (a mistyped
// --origin-device corrected), and what it queued now is what the primary
// is to get. It counts each in again.
func (j *joining) replaceRefused(ctx context.Context, again *refusedAgain) {
	mine := map[string]bool{}
	for _, p := range j.planned {
		mine[p.op.ID] = true
	}
	for _, p := range j.planned {
		for p.op.State == outbox.Queued {
			b, waits, err := j.store.Blocker(ctx, p.op)
			if err != nil || !waits || b.State != outbox.Dead || mine[b.ID] {
				break
			}
			if _, err := j.store.Replace(ctx, b.ID, p.op.Short()); err != nil {
				j.log.Warn("a refused op of an earlier join is not replaced", "op", b.Short(), "err", err)
				break
			}
			again.add(b, true)
		}
	}
}

// refusedAgain counts the refused ops of earlier runs that this run
// writes again: tried again as they are (a diary entry's or fact's
// arguments do not change with --origin-device), or replaced by a new
// write of the same record (a drawer's added_by stamp does). why is the
// first one's refusal.
type refusedAgain struct {
	retried, replaced int
	why               string
}

func (r *refusedAgain) add(op outbox.Op, replaced bool) {
	if replaced {
		r.replaced++
	} else {
		r.retried++
	}
	r.why = cmp.Or(r.why, errText(op.Error))
}

// note says how many, and why the first was refused ("": none).
func (r refusedAgain) note() string {
	if r.retried+r.replaced == 0 {
		return ""
	}
	return fmt.Sprintf("%d records an earlier join queued and the primary refused (%s) are sent again by this run, as its flags (e.g. --origin-device) now make them: %d tried again, %d replaced by new writes of them (the refused ops dropped, never sent)", r.retried+r.replaced, r.why, r.retried, r.replaced)
}

// saveCheckpoint writes the target's checkpoint as it stands; a write that
// fails is logged (the final checkpoint reports its own failure).
func (j *joining) saveCheckpoint() {
	j.cp.UpdatedAt = time.Now().UTC()
	if err := writeCheckpoint(j.cfg.Palace, j.target, j.cp); err != nil {
		j.log.Warn("join checkpoint not written", "err", err)
	}
}

// settle reads each planned write's outcome from the ops as they now are
// (also after Ctrl-C: the report names what stays queued): sent, skipped
// (on the primary already), dropped after a refusal, or still queued.
func (j *joining) settle(ctx context.Context) {
	final, err := allOps(context.WithoutCancel(ctx), j.store)
	if err != nil {
		j.rep.Failed = append(j.rep.Failed, Failure{Kind: "outbox", Record: j.obPath, Error: err.Error()})
	}
	j.final, j.diaries = final, map[string]bool{}
	j.sentForEarlier()
	var earlier []planned // diary entries earlier runs sent or found deleted
	var left []Failure
	for _, pl := range j.planned {
		op, ok := final[pl.op.ID]
		switch {
		case pl.unasked != "":
			left = append(left, Failure{Kind: pl.rec.Kind, Record: recordName(pl.rec), Wing: pl.rec.Wing, Error: pl.unasked})
		case pl.held: // present settled it
		case !ok: // failed to queue: already reported
		case pl.rec.Kind == Diaries && (pl.sent || pl.deleted()):
			earlier = append(earlier, pl)
		case op.State == outbox.Done && len(op.Error) == 0:
			j.settled(pl, op)
		case op.State == outbox.Done && failedAs(op) == outbox.AlreadyCurrent && str(resultOf(op), "already_closed") != "":
			// A gateway held the kg_add (another value replaced it there
			// since factsOnPrimary looked): filed nothing, so not sent.
			j.replacedOnPrimary(pl.rec, "the gateway held it: the primary's value current from "+cmp.Or(str(resultOf(op), "valid_from_kept"), "(no date)"))
		case op.State == outbox.Done && failedAs(op) == outbox.AlreadyCurrent:
			// A gateway held the kg_add as the triple is current there
			// already (from another valid_from, or another device's; its
			// look-up unanswered): on the primary, so skipped, not sent
			// (review36 R2: it read as replaced by another value).
			j.rep.Skipped[Facts]++
		case op.State == outbox.Done && failedAs(op) == outbox.DeletedOnPrimary:
			j.rep.DeletedOnPrimary[pl.rec.Kind]++ // never verified: it is not meant to be there
		case op.State == outbox.Done, op.State == outbox.Dead, op.State == outbox.InDoubt:
			// Dropped by an operator, or waiting for one: in rep.Failed
			// (stuck) with the command that shows it.
		default:
			left = append(left, Failure{Kind: pl.rec.Kind, Record: recordName(pl.rec), Wing: pl.rec.Wing, Error: j.notSent(ctx, op, pl.rec.Kind)})
		}
	}
	j.rep.Failed = append(j.rep.Failed, j.notTried(left)...)
	j.earlierEntries(ctx, earlier)
	if len(j.replaced) > 0 {
		j.rep.Notes = append(j.rep.Notes, replacedThere(j.replaced))
	}
	for _, kind := range j.landed { // none of this run's writes
		j.rep.SentQueuedEarlier[kind]++
	}
	for _, op := range final {
		if op.State == outbox.Queued || op.State == outbox.Inflight {
			j.left++
		}
	}
}

// earlierEntries counts the diary entries earlier runs sent, or found
// deleted on the primary, against the primary's wing: of equal entries
// (one wing, one text), as many as the wing holds beyond the group's
// entries this run counted there are on the primary (skipped, and
// verified); the rest are deleted there (an admin deleted one an earlier
// join sent, or the trash still holds one a join found deleted; restored,
// it is back). Nothing is sent either way, so a trash purged since files
// none of them again. One listing per wing; one that fails leaves those
// sent counted on the primary, those found deleted deleted, as before.
func (j *joining) earlierEntries(ctx context.Context, earlier []planned) {
	if len(earlier) == 0 {
		return
	}
	on, wings := map[string]int{}, map[string]bool{}
	for _, pl := range j.planned {
		if op, ok := j.final[pl.op.ID]; ok && pl.rec.Kind == Diaries && !pl.sent && op.State == outbox.Done && len(op.Error) == 0 {
			on[pl.rec.entryKey()]++
		}
	}
	for _, pl := range earlier {
		wings[pl.rec.Wing] = true
	}
	j.connect()
	listing, unread := primaryDiaryIDs(ctx, j.sent, wings) // stopped (Ctrl-C): none read
	for _, pl := range earlier {
		k := pl.rec.entryKey()
		switch {
		case unread[pl.rec.Wing] && pl.sent:
		case len(listing[pl.rec.Wing][catalogue.EntrySuffix(pl.rec.Content)]) > on[k]:
			on[k]++
		default:
			j.rep.DeletedOnPrimary[Diaries]++ // never verified: it is not meant to be there
			continue
		}
		j.rep.Skipped[Diaries]++
		j.diaries[pl.rec.Wing] = true
		j.targets = append(j.targets, verifyTarget{rec: pl.rec, earlier: true})
	}
}

// notSent says why an op the drain left is not on the primary yet, and
// what the next join does about it. kind is its record's.
func (j *joining) notSent(ctx context.Context, op outbox.Op, kind string) string {
	switch {
	case op.MaybeApplied || failedAs(op) == outbox.Lost:
		return "sent, but its answer was lost (" + errText(op.Error) + "): it may be on the primary already; the next join looks it up first and sends it only if it is not there"
	case j.primary != nil && j.primary.State() == "unauthorized":
		return j.runReason() // an earlier run's error is not this run's
	case len(op.Error) != 0 && j.triedNow(op):
		return "not sent yet (" + op.State.String() + "): " + errText(op.Error) + againWords
	}
	if b, ok := j.heldBy(context.WithoutCancel(ctx), op); ok {
		return notTriedWords + waitsWords + b.Short() + sameKey(kind) + againWords
	}
	return j.runReason()
}

// runReason is the failure of a record the run did not try, for the
// reason the run has: the primary refusing the token or unreachable (the
// primary's own line says why), or the run stopped.
func (j *joining) runReason() string {
	why := "the join was stopped"
	if j.primary != nil {
		switch s := j.primary.State(); {
		case s == "unauthorized":
			why = "the primary refused the token"
		case s != "up":
			why = "the primary was unreachable"
		}
	}
	return notTriedWords + why + againWords
}

// triedNow reports an op this run sent (an earlier run's error on one it
// did not is not this run's: attack94 F2). Without the drain's count of
// its attempts, it was.
func (j *joining) triedNow(op outbox.Op) bool {
	n, ok := j.tries[op.ID]
	return !ok || op.Attempts > n
}

// heldBy is the op that holds op back (refused, in doubt, held, or
// tried by this run and failed: its answer lost, its send cut, an error),
// following the ops before it on a shared causal key past those this run
// did not try; false when the first is only queued, not tried for the
// run's own reason (the primary unreachable, the run stopped), as op is,
// and counted with it (attack91 F3: a line each for 499 diary entries
// behind one not tried; attack94 F2: behind one an earlier run saw
// refused, requeued and not tried now).
// An op tried that failed is named, not passed over: the records behind
// it read "not tried: the join was stopped" (review29 F2).
func (j *joining) heldBy(ctx context.Context, op outbox.Op) (outbox.Op, bool) {
	b, waits, err := j.store.Blocker(ctx, op)
	for err == nil && waits && j.untried(b) {
		b, waits, err = j.store.Blocker(ctx, b) // an earlier op each time: it ends
	}
	return b, err == nil && waits // a failed look-up: the run's reason, as before a blocker was looked up
}

// untried: op is one this run did not try for its own reason, and no
// earlier run's send of it may have landed: queued (an earlier run's
// error on it is not this run's), or refused before and not asked about
// now (present could not reach the primary).
func (j *joining) untried(op outbox.Op) bool {
	if op.MaybeApplied || failedAs(op) == outbox.Lost {
		return false
	}
	return op.State == outbox.Queued && (len(op.Error) == 0 || !j.triedNow(op)) || op.State == outbox.Dead && j.unasked[op.ID]
}

// sameKey is what a record of kind shares with the op it waits for
// (catalogue.CausalKeys): distinct diary entries share their wing.
func sameKey(kind string) string {
	switch kind {
	case Diaries:
		return " in the same diary wing (its entries are sent in order)"
	case Facts:
		return " on the same fact (subject and predicate)"
	}
	return " on the same drawer or source file"
}

// notTriedWords begin the failure of a record a run did not try;
// waitsWords follow them for one behind another op; againWords end it.
const (
	notTriedWords = "not tried: "
	waitsWords    = "it waits for op "
	againWords    = "; run devbox-config join again to resume"
)

// notTried is failed with the records not tried for one reason (the
// primary unreachable, the join stopped) in one failure: their count and
// the command that lists them, where a line each (55 of the same words)
// buried the one saying why the run stopped (attack89 F2). A reason one
// record alone has, or waiting for another op (naming it), keeps its
// record's failure. It counts them all in rep.NotTried, the number --json
// gives beside the words (attack91 F3).
func (j *joining) notTried(failed []Failure) []Failure {
	n := map[string]int{}
	for _, f := range failed {
		if strings.HasPrefix(f.Error, notTriedWords) && !strings.HasPrefix(f.Error, notTriedWords+waitsWords) {
			n[f.Error]++
			j.rep.NotTried++
		}
	}
	out := make([]Failure, 0, len(failed))
	for _, f := range failed {
		switch c := n[f.Error]; {
		case c < 0: // counted in the reason's failure
		case c < 2:
			out = append(out, f)
		default:
			n[f.Error] = -1
			out = append(out, Failure{Kind: "records", Record: "not tried", Error: fmt.Sprintf("%d: %s (`%s` lists them, queued)", c, strings.TrimPrefix(f.Error, notTriedWords), j.outboxCmd("list", ""))})
		}
	}
	return out
}

// sentForEarlier finds the ops an earlier run queued, and stopped before
// sending, that this run sent and that are none of this run's writes (a
// write of this run differs when the local record or the flags did: an
// interrupted join with --origin-device, run again without it). Each one
// that put a record on the primary is in landed by the id the primary
// gave it; one that names none is counted as sent for the earlier run
// at once.
func (j *joining) sentForEarlier() {
	mine := map[string]bool{}
	for _, pl := range j.planned {
		mine[pl.op.ID] = true
	}
	j.landed = map[string]string{}
	for id, op := range j.final {
		if op.State != outbox.Done || len(op.Error) != 0 || j.settledBefore[id] || mine[id] {
			continue
		}
		res := resultOf(op)
		switch pid := primaryID(res); {
		case j.there(op, res):
		case pid != "":
			j.landed[pid] = kindOfTool(op.Tool)
		default:
			j.rep.SentQueuedEarlier[kindOfTool(op.Tool)]++
		}
	}
}

// resultOf is the primary's answer an op recorded (nil: none readable).
func resultOf(op outbox.Op) map[string]any {
	var res map[string]any
	json.Unmarshal(op.Result, &res) // unreadable reads as an answer naming nothing
	return res
}

// primaryID is the id the primary's answer gives the record ("": none).
func primaryID(res map[string]any) string {
	return cmp.Or(str(res, "drawer_id"), str(res, "entry_id"))
}

// there reports an answer that found the record on the primary: the
// server's or the outbox's guard found it, or a gateway's ledger answered
// from its record an op an earlier run had sent (it landed in that run:
// Ctrl-C came while it was in flight).
func (j *joining) there(op outbox.Op, res map[string]any) bool {
	return str(res, "skipped") != "" || str(res, "reason") == "already_exists" || res[ledger.ReplayedKey] == true && j.triedBefore[op.ID]
}

// settled counts one write the primary has: sent by this run, or skipped
// (an earlier run sent it, or the primary already held it); a record with
// a local id is kept for verification.
func (j *joining) settled(pl planned, op outbox.Op) {
	var res map[string]any
	if err := json.Unmarshal(op.Result, &res); err != nil {
		// The flusher records the primary's answer as JSON: an unreadable
		// one still reached the primary; it only names no id.
		j.log.Warn("the join outbox's record of an answer is unreadable", "op", op.Short(), "err", err)
	}
	id := primaryID(res)
	_, landed := j.landed[id]
	if pl.sent || j.there(op, res) && (id == "" || !landed) {
		j.rep.Skipped[pl.rec.Kind]++
	} else {
		// Sent now, or put there just before by an op an earlier run
		// queued for it (this run sent that op).
		delete(j.landed, id)
		j.rep.Sent[pl.rec.Kind]++
		if pl.rec.Kind == Diaries || pl.rec.Closed {
			j.wrote = append(j.wrote, writtenRecord{pl.rec, str(res, "entry_id")})
		}
	}
	if pl.rec.LocalID == "" {
		return
	}
	if id == "" && pl.rec.Kind == Diaries {
		j.diaries[pl.rec.Wing] = true
	}
	j.targets = append(j.targets, verifyTarget{rec: pl.rec, primaryID: id, earlier: pl.sent})
}

// verify names a second copy on the primary of what this run wrote with no
// server guard (diaries, closed facts: another palace joining at the same
// moment; never deleted), then compares a seeded sample of the records by
// content on both sides. A run the primary ended (it accepted nothing for
// o.Stall, or refused the token: a "primary" failure) is not verified: it
// ends there, with a note (attack87 F3: a FAILED line a record against a
// primary found down).
func (j *joining) verify(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	if slices.ContainsFunc(j.rep.Failed, func(f Failure) bool { return f.Kind == "primary" }) {
		if j.o.Verify != 0 {
			j.rep.Notes = append(j.rep.Notes, "not verified: the primary stopped the run (FAILED primary above), and what it left stays queued for the next join")
		}
		return
	}
	var listing map[string]map[string][]string
	if len(j.wrote) > 0 || (j.o.Verify != 0 && len(j.diaries) > 0) {
		for _, w := range j.wrote {
			if w.rec.Kind == Diaries {
				j.diaries[w.rec.Wing] = true
			}
		}
		listing, _ = primaryDiaryIDs(ctx, j.sent, j.diaries) // a wing not read: its entries named missing
		j.rep.Mismatches = append(j.rep.Mismatches, concurrentCopies(ctx, j.sent, j.wrote, listing, j.equalEntries())...)
	}
	if j.o.Verify != 0 {
		j.verifyFacts(ctx)
	}
	if j.o.Verify == 0 || len(j.targets) == 0 {
		return
	}
	// Equal entries count: each found one is verified against a copy no
	// other target holds (none left: missing).
	claimed := map[string]bool{}
	for _, t := range j.targets {
		claimed[t.primaryID] = true
	}
	for i := range j.targets {
		if t := &j.targets[i]; t.primaryID == "" && t.rec.Kind == Diaries {
			for _, id := range listing[t.rec.Wing][catalogue.EntrySuffix(t.rec.Content)] {
				if !claimed[id] {
					t.primaryID, claimed[id] = id, true
					break
				}
			}
		}
	}
	sort.Slice(j.targets, func(a, b int) bool { return j.targets[a].rec.LocalID < j.targets[b].rec.LocalID })
	picked := sample(j.targets, j.o.Verify, j.o.Seed)
	j.rep.Sampled = len(picked)
	j.o.Progress.Phase("verifying", len(picked))
	v, m, f := verify(ctx, j.reader(j.local, "local"), j.reader(j.sent, "primary"), picked, j.o.Progress.Set)
	j.rep.Verified += v
	j.rep.Mismatches = append(j.rep.Mismatches, m...)
	j.rep.Failed = append(j.rep.Failed, f...)
	j.o.Progress.Done()
	j.lap("verify")
}

// equalEntries counts the planned diary entries by wing and text suffix:
// how many the primary may hold of each from this palace.
func (j *joining) equalEntries() map[string]int {
	n := map[string]int{}
	for _, p := range j.planned {
		if p.rec.Kind == Diaries {
			n[p.rec.entryKey()]++
		}
	}
	return n
}

// checkpoint records the target's final state, with the counts and the
// high-water mark: complete (joined) only when nothing is left queued and
// nothing failed or mismatched; failed when nothing is left to send but
// something did; in_progress while ops are queued. A checkpoint that
// cannot be written is a failure.
func (j *joining) checkpoint() {
	j.cp.Counts = map[string]map[string]int{"sent": j.rep.Sent, "skipped": j.rep.Skipped, "sent_queued_earlier": j.rep.SentQueuedEarlier}
	if j.left == 0 {
		j.cp.State = StateFailed
		if j.rep.OK() {
			j.cp.State = StateComplete
			now := time.Now().UTC()
			j.cp.JoinedAt = &now
		}
		for _, op := range j.final {
			j.cp.HighWater = max(j.cp.HighWater, op.LocalSeq)
		}
	}
	j.cp.Failed = len(j.rep.Failed) + len(j.rep.Mismatches)
	j.cp.UpdatedAt = time.Now().UTC()
	if err := writeCheckpoint(j.cfg.Palace, j.target, j.cp); err != nil {
		j.rep.Failed = append(j.rep.Failed, Failure{Kind: "checkpoint", Record: checkpointPath(j.cfg.Palace), Error: err.Error()})
		return
	}
	j.rep.Checkpoint = checkpointPath(j.cfg.Palace)
}

// clearStayedLocal drops the edge outbox's record of writes it could not
// queue (outbox.StayedLocal) after a complete join of every replicated
// wing, which read the local palace after them and sent what the primary
// lacked. A resumed join read nothing anew: the record stays; so does
// the record of another primary than this join's (one `--env-file`
// named), which it sent nothing.
func (j *joining) clearStayedLocal() {
	if j.cp.State != StateComplete || len(j.o.Wings) > 0 || j.o.Resume {
		return
	}
	path := doctor.OutboxPath(j.cfg.Palace)
	if err := outbox.ClearStayedLocal(path, j.target, j.began); err != nil {
		j.log.Warn("the edge outbox's record of writes that stayed local is kept: edge status and doctor still name it", "file", path, "err", err)
	}
}
