package doctor

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/joakimp/devbox-config/ladder"
	"github.com/joakimp/devbox-config/render"
)

// CheckRenderRefuses is render-refuses (§4.1): each harness config render,
// given this environment, would leave alone (unparseable, read-only, a
// dangling link: render's refusal, with its file and fix) or, opted in,
// keep on the user's own entry while no .proposed says so yet
// (proposed-pending's, once one does). It is render's own decision, its
// dry run, so doctor exits 0 only when render would set every harness it
// manages (attack88 F5).
func CheckRenderRefuses(opts Options, plan RenderPlan) []Finding {
	if plan.err != nil {
		return nil // a usage error only, and no target is named
	}
	var out []Finding
	for _, r := range plan.results {
		f := Finding{ID: IDRenderRefuses, Severity: Warn, Section: "§4.1"}
		switch what, fix := r.KeptWhy(); {
		case r.Action == render.ActionSkipped:
			msg, fix := refusalOf(r, plan.global)
			f.Message, f.Fix = opts.maskQuoted(msg), opts.maskQuoted(fix)
		case r.Action == "kept-user-edit" && r.Mode != string(ladder.Solitary) && !exists(r.ProposedFile):
			f.Message = fmt.Sprintf("%s (%s): %s; render would put the environment's entry in %s, and %s keeps using yours until you merge it", opts.mask(r.File), r.Target, what, opts.mask(r.ProposedFile), r.Target)
			f.Fix = fix
		default:
			continue
		}
		out = append(out, f)
	}
	return out
}

// RenderPlan is render's dry run in this environment (nothing written):
// what render-refuses and proposed-pending read, run once a doctor run
// (review28 S1: twice, once for each).
type RenderPlan struct {
	results []render.Result
	global  []ladder.Warning
	err     error
}

// PlanRender runs render's dry run as render would, given opts.
func PlanRender(opts Options) RenderPlan {
	res, global, err := render.Run(render.Options{Home: opts.Home, HomeFromFlag: opts.HomeFromFlag, Env: opts.Env, LookPath: opts.LookPath}, true)
	return RenderPlan{res, global, err}
}

// refusalOf is render's warning for skipping r (the last of its own, not
// the environment's global ones), FILE: what (fix: how), split.
func refusalOf(r render.Result, global []ladder.Warning) (msg, fix string) {
	own := slices.DeleteFunc(slices.Clone(r.Warnings), func(w string) bool {
		return slices.ContainsFunc(global, func(g ladder.Warning) bool { return g.String() == w })
	})
	msg, fix = r.File+": left alone", "fix the file named, then run doctor again"
	if len(own) > 0 {
		msg = own[len(own)-1]
	}
	if i := strings.LastIndex(msg, " (fix: "); i > 0 && strings.HasSuffix(msg, ")") {
		msg, fix = msg[:i], msg[i+len(" (fix: "):len(msg)-1]
	}
	return fmt.Sprintf("render would leave %s alone: %s", r.Target, msg), fix
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
