package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/joakimp/devbox-config/gateway/provenance"
	"github.com/joakimp/devbox-config/gateway/trash"
)

// Restorer puts drawers kept in the trash back on the primary: the
// operator's `gateway trash restore`, which calls the upstream with the
// shared upstream token, as the gateway does. A restore is recorded in the
// trash (each drawer's restored_at and the id it came back as), not in the
// audit log, whose one writer is the running gateway.
type Restorer struct {
	Trash    *trash.Store
	Upstream string        // the upstream's MCP endpoint
	Token    func() string // the shared upstream token
	Client   *http.Client  // nil: one with the gateway's call timeout
	// Provenance, when set, gets each restored drawer's origin as the
	// trash kept it (or forgets the id's stamp: unknown), so that the
	// trusted mark follows the text. The running gateway reads it again
	// within a second (provenance.Store.Refresh).
	Provenance *provenance.Store
}

// Restored is what became of one kept drawer.
type Restored struct {
	Delete trash.Delete // the delete that kept it (Drawers: all of them)
	Drawer trash.Drawer
	// As is the id it is on the primary under now; Already, that it was
	// there before the restore (add_drawer found the same content).
	As      string
	Already bool
	Err     error
}

// Restore puts back what each reference names: a delete's number (all
// its drawers) or a drawer id (that drawer, from the newest delete that
// kept it). A drawer restored before is not restored again (a diary entry
// would be written twice); its Err says when and as what.
func (r Restorer) Restore(ctx context.Context, refs []string) ([]Restored, error) {
	var out []Restored
	for _, ref := range refs {
		d, err := r.Trash.Find(ctx, ref)
		if err != nil {
			return out, err
		}
		for _, dr := range d.Drawers {
			res := Restored{Delete: d, Drawer: dr}
			if dr.RestoredAt != nil {
				res.Err = fmt.Errorf("restored already, on %s, as %s", dr.RestoredAt.Format(time.RFC3339), dr.RestoredAs)
			} else if res.As, res.Already, res.Err = r.put(ctx, dr); res.Err == nil {
				res.Err = errors.Join(r.Trash.MarkRestored(ctx, d.ID, dr.ID, res.As), r.reorigin(ctx, res))
			}
			out = append(out, res)
		}
	}
	return out, nil
}

// reorigin gives a restored drawer the origin the trash kept with it. A
// drawer add_drawer found already filed keeps its own.
func (r Restorer) reorigin(ctx context.Context, res Restored) error {
	if r.Provenance == nil || res.As == "" || (res.Already && res.Drawer.Kind != trash.KindPrior) {
		return nil
	}
	k := provenance.Drawer(res.As)
	if o := res.Drawer.Origin; o != nil {
		return r.Provenance.Record(ctx, provenance.Entry{Key: k, Stamp: *o, Replace: true})
	}
	return r.Provenance.Forget(ctx, k)
}

// put files one drawer again, as its kind says.
func (r Restorer) put(ctx context.Context, d trash.Drawer) (as string, already bool, err error) {
	switch d.Kind {
	case trash.KindPrior:
		res, err := r.call(ctx, "mempalace_update_drawer", map[string]any{"drawer_id": d.ID, "content": d.Content, "wing": d.Wing, "room": d.Room})
		if err != nil {
			return "", false, err
		}
		return d.ID, res["noop"] == true, nil
	case trash.KindDiary:
		args := map[string]any{"agent_name": d.Meta("agent"), "entry": d.Content, "wing": d.Wing}
		if topic := d.Meta("topic"); topic != "" {
			args["topic"] = topic
		}
		res, err := r.call(ctx, "mempalace_diary_write", args)
		if err != nil {
			return "", false, err
		}
		id, _ := res["entry_id"].(string)
		return id, false, nil
	}
	args := map[string]any{"wing": d.Wing, "room": d.Room, "content": d.Content}
	if by := d.Meta("added_by"); by != "" {
		args["added_by"] = by
	}
	if d.SourceFile != "" {
		args["source_file"] = d.SourceFile
	}
	res, err := r.call(ctx, "mempalace_add_drawer", args)
	if err != nil {
		return "", false, err
	}
	id, _ := res["drawer_id"].(string)
	return id, res["reason"] == "already_exists", nil
}

// call is one tools/call on the upstream; an answer that says it failed
// is an error.
func (r Restorer) call(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	client := cmp.Or(r.Client, &http.Client{Timeout: callTimeout})
	token := ""
	if r.Token != nil {
		token = r.Token()
	}
	status, resp := postMCP(ctx, client, r.Upstream, token, toolCall(json.RawMessage("1"), tool, args))
	var e struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	json.Unmarshal(resp, &e) // not JSON: the status says why
	switch {
	case e.Error != nil:
		return nil, fmt.Errorf("%s: the primary answered error %d: %s", tool, e.Error.Code, e.Error.Message)
	case status != http.StatusOK:
		return nil, fmt.Errorf("%s: the primary answered HTTP %d", tool, status)
	}
	res := resultOf(resp)
	if res == nil {
		return nil, fmt.Errorf("%s: the primary's answer holds no result", tool)
	}
	if res["success"] == false || res["error"] != nil {
		return nil, fmt.Errorf("%s: %v", tool, res["error"])
	}
	return res, nil
}
