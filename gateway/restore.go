package gateway

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/joakimp/devbox-config/catalogue"
	"github.com/joakimp/devbox-config/gateway/ledger"
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
	// before its next answer that carries records (provenance.Store.Fresh).
	Provenance *provenance.Store
	// Ledger, when set, is the gateway's op-id ledger: a delete whose op
	// it holds in doubt is settled as applied before its drawers are put
	// back, so that the op's resend does not delete them again.
	Ledger *ledger.Ledger
}

// Restored is what became of one kept drawer.
type Restored struct {
	Delete trash.Delete // the delete that kept it (Drawers: all of them)
	Drawer trash.Drawer
	// As is the id it is on the primary under now; Already, that it was
	// there before the restore (the id held the same content, wing and
	// room: for a diary entry, the delete was never made).
	As      string
	Already bool
	// Kept, when the restore replaced other content the id held: the
	// trash's delete that keeps that content (restoring it puts it back).
	Kept int64
	Err  error
	// diary: where the entry it put back is in diary_read (the zero
	// diaryPlace: no diary entry), whose keys reorigin stamps too.
	diary diaryPlace
}

// Restore puts back what each reference names: a delete's number (all
// its drawers) or a drawer id (that drawer, from the newest delete that
// kept it and no restore brought back). A drawer restored before is not
// restored again (a diary entry would be written twice); its Err says
// when and as what. By id, once a newer delete's version of the drawer
// was restored, an older one is not (it would come back beside that one,
// as a drawer of its own): its Err names the delete's number to give.
func (r Restorer) Restore(ctx context.Context, refs []string) ([]Restored, error) {
	if err := r.check(ctx); err != nil {
		return nil, err
	}
	var out []Restored
	for _, ref := range refs {
		d, err := r.Trash.Find(ctx, ref)
		if err != nil {
			return out, err
		}
		newer, err := r.newerRestored(ctx, ref, d.ID)
		if err != nil {
			return out, err
		}
		// Settled before a drawer is written, and not for a diary entry
		// refused as its delete still in flight (review29 F6).
		settle := sync.OnceValue(func() error { return r.settleOp(ctx, d) })
		for _, dr := range d.Drawers {
			res := Restored{Delete: d, Drawer: dr}
			if newer != "" && dr.PurgedAt == nil && dr.RestoredAt == nil {
				res.Err = fmt.Errorf("%s; delete %d keeps an older version, which would come back beside it: 'trash restore %d' restores that one", newer, d.ID, d.ID)
			} else {
				res.Err = r.claimed(ctx, &res, settle)
			}
			out = append(out, res)
		}
	}
	return out, nil
}

// claimed puts one drawer back while it holds it in the trash (Claim),
// so that a purge is before the restore (refused: purged) or names it,
// and records how it went. A diary entry, which MemPalace writes again
// as often as it is sent, stays claimed when its write fails (its answer
// may be what was lost), with the fence Claim keeps: the next restore
// takes the entry that write made, newer than the fence, for the
// restored one, and writes it only when there is none. Any other drawer's
// write is found by its id (put), and its claim released.
func (r Restorer) claimed(ctx context.Context, res *Restored, settle func() error) error {
	d, dr := res.Delete, res.Drawer
	prior, err := r.Trash.Claim(ctx, d.ID, dr.ID, r.fence(ctx, dr))
	if err != nil {
		if dr.PurgedAt != nil && dr.Live() != "" {
			err = fmt.Errorf("%w; %s", err, dr.Live())
		}
		return err
	}
	if prior != "" {
		res.As, err = r.entrySince(ctx, dr, prior)
	}
	if err == nil && res.As == "" {
		err = r.put(ctx, res, settle)
	}
	switch {
	case err != nil && dr.Kind == trash.KindDiary && !errors.Is(err, errDeleteInFlight) && !errors.Is(err, errNotSettled):
		return fmt.Errorf("%w; it stays taken: restore it again, which finds the entry if this restore wrote it, and writes it only if not", err)
	case err != nil:
		return errors.Join(err, r.Trash.Release(ctx, d.ID, dr.ID))
	}
	return errors.Join(r.Trash.MarkRestored(ctx, d.ID, dr.ID, res.As), r.reorigin(ctx, *res))
}

// fence is, for a diary entry, the stamp of the newest entry in its
// wing's diary before the restore writes it ("0" for none: every stamp
// is newer); "" for any other drawer, or when the primary did not list
// it (a restore that loses its answer then cannot be finished: the next
// writes the entry again).
func (r Restorer) fence(ctx context.Context, dr trash.Drawer) string {
	if dr.Kind != trash.KindDiary {
		return ""
	}
	room, ok := diaryNewest(ctx, r.result, dr.Wing, "")
	if !ok {
		return ""
	}
	return cmp.Or(room.newest, "0")
}

// entrySince is the id of the entry of dr's text in its wing's diary
// newer than fence, which an earlier restore of dr wrote ("": none).
func (r Restorer) entrySince(ctx context.Context, dr trash.Drawer, fence string) (string, error) {
	suffix, found := catalogue.EntrySuffix(dr.Content), ""
	_, ok := diaryNewest(ctx, r.result, dr.Wing, fence, func(row map[string]any) {
		id, _ := row["drawer_id"].(string)
		if _, sfx, _ := catalogue.DiaryEntryID(id); sfx == suffix && found == "" {
			found = id
		}
	})
	if !ok {
		return "", fmt.Errorf("the primary did not list %s's diary, where an earlier restore of this entry may have written it: nothing written; restore again", dr.Wing)
	}
	return found, nil
}

// result is a call's result, for diaryNewest (nil: no answer).
func (r Restorer) result(ctx context.Context, tool string, args map[string]any) map[string]any {
	_, resp := r.post(ctx, tool, args)
	return resultOf(resp)
}

// checkTimeout bounds restore's first look at the upstream.
const checkTimeout = 10 * time.Second

// check asks the upstream for its tools before anything is restored: an
// upstream that is not reached, is a gateway, refuses the token or is no
// MCP endpoint is refused up front, with the fix (a tool call's error
// would say what a device should do).
func (r Restorer) check(ctx context.Context) error {
	// tools/list answers at once; a primary that says nothing in this long
	// is stuck (callTimeout, made for event_wait, kept an operator waiting
	// five and a half minutes for the first word).
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	client := cmp.Or(r.Client, upstreamClient(nil, callTimeout))
	token := ""
	if r.Token != nil {
		token = r.Token()
	}
	look := lookAtUpstream(ctx, client, r.Upstream, token)
	switch {
	case errors.Is(look.err, context.DeadlineExceeded) && ctx.Err() != nil:
		return fmt.Errorf("the primary at --upstream %s does not answer tools/list within %s: it is stuck, or the URL leads to something that never answers (check mempalace serve there, or give its /mcp, the URL the gateway's own --upstream names)", r.Upstream, checkTimeout)
	case look.err != nil && plainToTLS(r.Upstream, look.err):
		return fmt.Errorf("--upstream %s asks for TLS (https), and the server there answered in plain HTTP or closed the handshake: give http://%s (mempalace serve speaks plain HTTP), the URL the gateway's own --upstream names", r.Upstream, strings.TrimPrefix(r.Upstream, "https://"))
	case errors.Is(look.err, io.EOF):
		return fmt.Errorf("the server at --upstream %s took the connection and closed it without answering tools/list: it is not mempalace serve's /mcp (give that, http://HOST:PORT/mcp, the URL the gateway's own --upstream names)", r.Upstream)
	case look.err != nil:
		return fmt.Errorf("the primary at --upstream %s does not answer: %w (start mempalace serve, or give its /mcp, the URL the gateway's own --upstream names)", r.Upstream, look.err)
	case look.gateway:
		how := "restore files drawers with the upstream token, which only the primary takes"
		if look.status == 0 {
			how = "its /healthz said so; the upstream token was not sent"
		}
		return fmt.Errorf("--upstream %s is a devbox-config gateway, not the primary: give mempalace serve's /mcp, the URL the gateway's own --upstream names (%s)", r.Upstream, how)
	case look.status == http.StatusUnauthorized && token == "":
		return fmt.Errorf("the primary at --upstream %s asks for a token (HTTP 401), and none was sent (--no-upstream-token): drop the flag and set MEMPALACE_UPSTREAM_TOKEN in this shell (or upstream_token_file in the config) to mempalace serve's MEMPALACE_MCP_HTTP_TOKEN", r.Upstream)
	case look.status == http.StatusUnauthorized:
		return fmt.Errorf("the primary at --upstream %s refused the upstream token (HTTP 401): set MEMPALACE_UPSTREAM_TOKEN in this shell (or upstream_token_file in the config) to the primary's token, mempalace serve's MEMPALACE_MCP_HTTP_TOKEN; the running gateway needs no restart", r.Upstream)
	case !look.mcp:
		return fmt.Errorf("--upstream %s answered HTTP %d to tools/list, not an MCP answer: give mempalace serve's /mcp (http://HOST:PORT/mcp), the URL the gateway's own --upstream names", r.Upstream, look.status)
	}
	return nil
}

// plainToTLS: err is what an https request to a plain-HTTP server meets:
// its plain answer to the handshake (net/http says so only in text), or
// the connection closed during it (mempalace serve closes it).
func plainToTLS(upstream string, err error) bool {
	var rh tls.RecordHeaderError
	return strings.HasPrefix(upstream, "https://") &&
		(errors.Is(err, io.EOF) || errors.As(err, &rh) || strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"))
}

// settleOp records the op a delete was sent under as applied in the
// op-id ledger, when the ledger holds no answer for it (its answer and
// the look-up after it were lost: the trash says unconfirmed), before
// any drawer is put back: the op's resend is then answered from the
// ledger and removes nothing (attack26 F1: it deleted the restored
// drawers again).
func (r Restorer) settleOp(ctx context.Context, d trash.Delete) error {
	if r.Ledger == nil || d.OpID == "" {
		return nil
	}
	ids := make([]string, len(d.Drawers))
	for i, dr := range d.Drawers {
		ids[i] = dr.ID
	}
	res := textResult(deletedAnswer(d.Tool, ids, doomed{source: d.Source, rows: len(ids)},
		"the primary's answer was lost; the operator restored what this op removed (trash restore), which settled it as applied"))
	if _, err := r.Ledger.Applied(ctx, d.Device, d.OpID, encodeJSON(res)); err != nil {
		return fmt.Errorf("delete %d: its op %s %w, so its resend could delete again what a restore brings back: nothing restored: %w", d.ID, d.OpID, errNotSettled, err)
	}
	return nil
}

// errNotSettled: settleOp could not record the delete's op applied.
var errNotSettled = errors.New("could not be settled in the op-id ledger")

// newerRestored says, for a restore by drawer id (ref), which delete newer
// than the one Find picked (id) kept that drawer and was restored already,
// when and as what ("": none, or ref is a delete's number).
func (r Restorer) newerRestored(ctx context.Context, ref string, id int64) (string, error) {
	if _, err := strconv.ParseInt(ref, 10, 64); err == nil {
		return "", nil
	}
	ds, err := r.Trash.List(ctx)
	if err != nil {
		return "", err
	}
	for _, d := range ds { // newest first
		for _, dr := range d.Drawers {
			if d.ID > id && dr.ID == ref && dr.RestoredAt != nil {
				return fmt.Sprintf("its newest kept version (delete %d) was restored on %s, as %s", d.ID, dr.RestoredAt.Format(time.RFC3339), dr.RestoredAs), nil
			}
		}
	}
	return "", nil
}

// reorigin gives a restored drawer the origin the trash kept with it. A
// drawer add_drawer found already filed keeps its own. A trash row with
// none (unknown when it was kept, or kept by a release before the trash
// kept origins, whose gateway left the deleted drawer's stamp in the
// index: attack83 F3) takes the stamp the index still holds for the
// drawer's id, if it is from before the delete; an update's replaced version does not (that stamp names
// the updater). With neither, the drawer reads as of unknown origin.
func (r Restorer) reorigin(ctx context.Context, res Restored) error {
	if r.Provenance == nil || res.As == "" || (res.Already && res.Drawer.Kind != trash.KindPrior) {
		return nil
	}
	keys, o := append([]provenance.Key{provenance.Drawer(res.As)}, res.diary.keys(res.Drawer.Content)...), res.Drawer.Origin
	if o == nil && res.Drawer.Kind != trash.KindPrior {
		// Only a stamp from before the delete names the deleted version's
		// writer: one filed since (the id written again) names another's.
		if st, known := r.Provenance.Lookup(provenance.Drawer(res.Drawer.ID)); known && !st.At.After(res.Delete.Time) {
			o = &st
		}
	}
	if o == nil {
		return r.Provenance.Forget(ctx, keys...)
	}
	st := *o
	if st.Device != "" {
		st.Agent = cmp.Or(st.Agent, res.diary.agent)
	}
	entries := make([]provenance.Entry, len(keys))
	for i, k := range keys {
		entries[i] = provenance.Entry{Key: k, Stamp: st, Replace: true}
	}
	return r.Provenance.Record(ctx, entries...)
}

// put files one drawer again, as its kind says (putDiary, putDrawer),
// and never over other content without keeping that in the trash first
// (over). An update's replaced version goes back in place; when the
// drawer is gone (deleted since), it is filed again in its wing and room,
// as a deleted drawer is.
func (r Restorer) put(ctx context.Context, res *Restored, settle func() error) error {
	d := res.Drawer
	switch d.Kind {
	case trash.KindPrior:
		if err := settle(); err != nil {
			return err
		}
		now, err := r.now(ctx, d.ID)
		if err != nil {
			return err
		}
		if now != nil {
			return r.over(ctx, res, d.ID, now)
		}
	case trash.KindDiary:
		return r.putDiary(ctx, res, settle)
	}
	if err := settle(); err != nil {
		return err
	}
	return r.putDrawer(ctx, res)
}

// putDiary files a diary entry again. A delete the primary never made
// (kept pending or unconfirmed) left the entry there: writing it would
// make a second copy. Its text changed since (an update_drawer) is put
// back in place (over); a delete still in flight may yet remove it
// (review28b F7).
func (r Restorer) putDiary(ctx context.Context, res *Restored, settle func() error) error {
	d := res.Drawer
	now, err := r.now(ctx, d.ID)
	if err != nil {
		return err
	}
	if now != nil {
		if inFlight, err := r.inFlight(ctx, res.Delete); err != nil || inFlight {
			return cmp.Or(err, errDeleteInFlight)
		}
	}
	if err := settle(); err != nil {
		return err
	}
	if now != nil {
		return r.over(ctx, res, d.ID, now)
	}
	args := map[string]any{"agent_name": d.Meta("agent"), "entry": d.Content, "wing": d.Wing}
	if topic := d.Meta("topic"); topic != "" {
		args["topic"] = topic
	}
	w, err := r.call(ctx, "mempalace_diary_write", args)
	res.As, res.diary = str(w["entry_id"]), diaryPlace{str(w["agent"]), str(w["timestamp"])}
	return err
}

// putDrawer files a drawer again in its wing and room; an id taken by
// other content since (an update_drawer) is put back over, that content
// kept in the trash first (over).
func (r Restorer) putDrawer(ctx context.Context, res *Restored) error {
	d := res.Drawer
	args := map[string]any{"wing": d.Wing, "room": d.Room, "content": d.Content}
	if by := d.Meta("added_by"); by != "" {
		args["added_by"] = by
	}
	if d.SourceFile != "" {
		args["source_file"] = d.SourceFile
	}
	a, err := r.call(ctx, "mempalace_add_drawer", args)
	if err != nil {
		return err
	}
	res.As, _ = a["drawer_id"].(string)
	if a["reason"] != "already_exists" {
		return nil
	}
	now, err := r.now(ctx, res.As)
	if err != nil {
		return err
	}
	if now == nil {
		return fmt.Errorf("add_drawer found %s on the primary and get_drawer then did not: restore again", res.As)
	}
	return r.over(ctx, res, res.As, now)
}

// errDeleteInFlight refuses the restore of a diary entry still on the
// primary whose delete may still be in flight: it would be recorded
// restored, and then the delete would remove it.
var errDeleteInFlight = errors.New("its delete may still be in flight (pending, or unconfirmed: sent, its answer not awaited) and the entry is still on the primary: nothing written; restore again once it is settled, or once the delete is older than the gateway's write bound")

// inFlight: d is pending, or unconfirmed (the gateway gave up on its
// answer while the request may still wait for MemPalace's lock: review29
// F5), and recent enough that the primary may still get it (a kept
// delete is settled within writeBound of being kept, which is more than
// the upstream call's timeout), unless the op-id ledger holds its op
// abandoned: in flight in a gateway process that has ended (killed,
// crashed), which no longer sends it (attack94 F1).
func (r Restorer) inFlight(ctx context.Context, d trash.Delete) (bool, error) {
	if d.State != trash.StatePending && d.State != trash.StateUnconfirmed || r.Trash.Now().Sub(d.Time) >= writeBound {
		return false, nil
	}
	if r.Ledger == nil || d.OpID == "" {
		return true, nil
	}
	gone, err := r.Ledger.Abandoned(ctx, d.Device, d.OpID)
	if err != nil {
		return true, fmt.Errorf("delete %d: the op-id ledger could not say whether its op %s is still in flight: nothing restored: %w", d.ID, d.OpID, err)
	}
	return !gone, nil
}

// over puts the kept drawer under id, which holds now: nothing is done
// when now is the same (Already); otherwise now is kept in the trash
// first, as a delete of its own (Kept, which restores it), and
// update_drawer replaces it.
func (r Restorer) over(ctx context.Context, res *Restored, id string, now map[string]any) error {
	d := res.Drawer
	res.As, res.diary = id, diaryEntryOf(now)
	if now["content"] == d.Content && now["wing"] == d.Wing && now["room"] == d.Room {
		res.Already = true
		return nil
	}
	cur := keptDrawer("update_drawer", now, "")
	if r.Provenance != nil {
		if st, known := r.Provenance.Lookup(provenance.Drawer(id)); known {
			cur.Origin = &st
		}
	}
	k := kept{tool: "update_drawer", drawers: []string{id}}
	var err error
	if k.id, err = r.Trash.Keep(ctx, trash.Delete{Device: "operator", Label: "trash restore", Tool: "update_drawer", Drawers: []trash.Drawer{cur}}); err != nil {
		return fmt.Errorf("%s holds other content, which could not be kept in the trash, so it was not replaced: %w", id, err)
	}
	const tool = "mempalace_update_drawer"
	status, resp := r.post(ctx, tool, map[string]any{"drawer_id": id, "content": d.Content, "wing": d.Wing, "room": d.Room})
	state, note, _, drop := k.outcome(status, resp)
	if drop {
		err = r.Trash.Drop(ctx, k.id)
	} else {
		res.Kept = k.id
		note = strings.TrimSuffix(fmt.Sprintf("what restoring delete %d replaced; %s", res.Delete.ID, note), "; ")
		err = r.Trash.Settle(ctx, k.id, state, note, nil)
	}
	_, aerr := toolAnswer(tool, status, resp)
	if aerr != nil && res.Kept != 0 {
		aerr = fmt.Errorf("%w (what %s held is kept in the trash as delete %d)", aerr, id, res.Kept)
	}
	return errors.Join(aerr, err)
}

// now reads what id holds on the primary (nil: no drawer).
func (r Restorer) now(ctx context.Context, id string) (map[string]any, error) {
	const tool = "mempalace_get_drawer"
	status, resp := r.post(ctx, tool, map[string]any{"drawer_id": id})
	if msg, _ := resultOf(resp)["error"].(string); status == http.StatusOK && strings.HasPrefix(msg, "Drawer not found") {
		return nil, nil
	}
	return toolAnswer(tool, status, resp)
}

// call is one tools/call on the upstream; an answer that says it failed
// is an error.
func (r Restorer) call(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	status, resp := r.post(ctx, tool, args)
	return toolAnswer(tool, status, resp)
}

// post sends one tools/call to the upstream.
func (r Restorer) post(ctx context.Context, tool string, args map[string]any) (int, []byte) {
	client := cmp.Or(r.Client, upstreamClient(nil, callTimeout))
	token := ""
	if r.Token != nil {
		token = r.Token()
	}
	return postMCP(ctx, client, r.Upstream, token, toolCall(json.RawMessage("1"), tool, args))
}

// toolAnswer is a tools/call's result; an answer that says it failed is an
// error.
func toolAnswer(tool string, status int, resp []byte) (map[string]any, error) {
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
