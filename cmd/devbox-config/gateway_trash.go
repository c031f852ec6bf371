package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/gateway/provenance"
	"github.com/joakimp/devbox-config/gateway/trash"
)

const trashHelp = `Every delete through the gateway (delete_drawer, delete_drawers,
delete_by_source with dry_run false) and every update_drawer keeps what it
removes or replaces in the gateway's trash (trash_file, default trash.sqlite
beside the audit log) for trash_retention_days (default 30), with the device
that made it and the hash of its audit line.`

// newGatewayTrashCmd is `gateway trash list|restore|prune`.
func newGatewayTrashCmd(g *gatewayConfig, stdout, stderr io.Writer) *cobra.Command {
	var upstream string
	var noToken bool
	restore := &cobra.Command{
		Use:   "restore --upstream URL ID...",
		Short: "Put drawers back on the primary: ID is a delete's number (all its drawers) or a drawer id",
		Long: trashHelp + `

restore files each drawer again on the primary (--upstream, with the shared
upstream token from MEMPALACE_UPSTREAM_TOKEN or upstream_token_file):
a drawer filed over MCP comes back under the same id (its id derives from
wing, room and content); a mined drawer, or one whose content changed after
filing, comes back with the same content under the id wing, room and
content give; a diary entry is written again as a new entry, dated the
restore (one still on the primary, its delete never made, is not); an
update_drawer's replaced version is put back in place, under
the same id, or, when the drawer has been deleted since, filed again in
its wing and room (under the id its content gives). A restore never
destroys what the primary holds: when the drawer's id holds other content
(a later version, or a change made after the same content was filed
again), that content is kept in the trash first, as a delete of its own
that restore puts back, and the restore says its number. A drawer id
restores the newest of its entries no restore brought back; once that one
is restored, an older entry is restored only by its number (by id, it is
refused, naming it). What no restore
brings back: ` + trash.Lost + `.`,
		RunE: func(_ *cobra.Command, args []string) error {
			return restoreTrash(g, stdout, stderr, upstream, noToken, args)
		},
	}
	restore.Flags().StringVar(&upstream, "upstream", "", "the primary's MCP endpoint, as given to the gateway (e.g. http://127.0.0.1:8765/mcp)")
	restore.Flags().BoolVar(&noToken, "no-upstream-token", false, "the upstream runs without a token (loopback mempalace serve), as for the gateway")
	list := &cobra.Command{
		Use: "list", Short: "List what the trash keeps, newest first, and what each drawer comes back as", Long: trashHelp, Args: noArgs,
		RunE: func(*cobra.Command, []string) error { return listTrash(g, stdout, stderr) },
	}
	prune := &cobra.Command{
		Use: "prune", Short: "Remove what is older than the retention (the gateway also prunes as it goes)", Long: trashHelp, Args: noArgs,
		RunE: func(*cobra.Command, []string) error { return pruneTrash(g, stdout, stderr) },
	}
	purge := &cobra.Command{
		Use: "purge N|DRAWER_ID", Short: "Remove for good the content of a delete's drawers (N) or of every kept copy of a drawer", Args: exactArgs(1),
		Long: trashHelp + `

The trash holds what it keeps in clear. purge removes a kept drawer's content
and metadata for good (a credential deleted from the palace, say): N is a
delete's number (all its drawers), DRAWER_ID a drawer (every delete that
kept it). The drawer's id, wing and room stay, marked purged, with a note on
its delete; no restore brings it back, and a join's replay of it is still
refused. The trash's write-ahead log is emptied, so the content leaves its
files.`,
		RunE: func(_ *cobra.Command, args []string) error { return purgeTrash(g, stdout, stderr, args[0]) },
	}
	return group("trash", "List, restore, purge and prune what deletes through the gateway removed", list, restore, purge, prune)
}

// openTrash opens the config's trash; ok is false when there is none yet
// (no delete has gone through the gateway). A gateway that has served
// without its trash, or with a trash of 0 bytes, is refused, as its start
// is (gateway.Config.CheckKept): its trash is lost or elsewhere, not empty.
func openTrash(g *gatewayConfig, stderr io.Writer) (*trash.Store, bool, error) {
	c, err := g.load()
	if err != nil {
		return nil, false, err
	}
	if err := c.CheckNoOlderGateway(); err != nil { // restore's ledger and index too
		return nil, false, failed(err)
	}
	if fi, err := os.Stat(c.TrashPath()); errors.Is(err, os.ErrNotExist) || err == nil && gateway.Emptied(c.TrashPath(), fi) != "" {
		if err := c.CheckKept(g.file); err != nil {
			return nil, false, failed(err)
		}
		return nil, false, nil
	}
	st, err := trash.Open(c.TrashPath(), c.TrashRetention(), newLogger(stderr, slog.LevelWarn))
	if err != nil {
		return nil, false, failed(err)
	}
	return st, true, nil
}

// aheadSlack is how far ahead of this host's clock `trash list` lets a
// delete's date be before it marks it: clocks of one host's processes
// differ by less, a clock that ran ahead (then corrected) by more.
const aheadSlack = 5 * time.Minute

func listTrash(g *gatewayConfig, stdout, stderr io.Writer) error {
	st, ok, err := openTrash(g, stderr)
	if err != nil || !ok {
		if ok = err == nil; ok {
			fmt.Fprintln(stdout, "the trash is empty: no delete has gone through the gateway")
		}
		return err
	}
	defer st.Close() // read only
	ds, err := st.List(context.Background())
	if err != nil {
		return failed(err)
	}
	fmt.Fprintf(stdout, "%s: %d delete(s), each kept %d days\n", st.Path(), len(ds), int(st.Retention().Hours()/24))
	now := st.Now() // the clock the trash prunes by
	for _, d := range ds {
		fmt.Fprint(stdout, d.Summary())
		switch {
		case d.Time.Before(now.Add(-st.Retention())):
			fmt.Fprint(stdout, "  (past the retention: the next prune, gateway start or delete removes it)")
		case d.Time.After(now.Add(aheadSlack)): // a host clock that ran ahead when it was made (attack108 F3)
			fmt.Fprintf(stdout, "  (dated ahead of this host's clock: kept until %s", d.Time.Add(st.Retention()).UTC().Format(time.RFC3339))
			if slices.ContainsFunc(d.Drawers, func(dr trash.Drawer) bool { return dr.PurgedAt == nil }) {
				fmt.Fprintf(stdout, "; `trash purge %d` removes its content now", d.ID) // not offered once purged (attack109 F5)
			}
			fmt.Fprint(stdout, ")")
		}
		fmt.Fprintln(stdout)
		for _, dr := range d.Drawers {
			fmt.Fprintf(stdout, "    %s  %s/%s  %s\n", dr.ID, dr.Wing, dr.Room, drawerNote(dr))
		}
	}
	return nil
}

// drawerNote is what `trash list` says of a kept drawer: how it comes
// back, or when it was restored and as what (and the later delete that
// took that out of the palace again, or the update that replaced its
// text), purged or held by a restore.
func drawerNote(dr trash.Drawer) string {
	back := "comes back as " + dr.ComesBackAs()
	if dr.RestoredAt != nil {
		back = fmt.Sprintf("restored %s as %s", dr.RestoredAt.Format(time.RFC3339), dr.RestoredAs)
		switch a := dr.DeletedAgain; {
		case a != nil && a.Tool == "update_drawer":
			back += fmt.Sprintf(", whose text update_drawer %d replaced at %s (the drawer is in the palace; %d's line keeps the text restored)", a.Delete, a.At.Format(time.RFC3339), a.Delete)
		case a != nil:
			back += fmt.Sprintf(", which delete %d took out of the palace again at %s (its line says where it is now)", a.Delete, a.At.Format(time.RFC3339))
		}
	}
	switch {
	case dr.PurgedAt != nil:
		purged := "purged by the operator " + dr.PurgedAt.Format(time.RFC3339) + ": its content is gone from the trash"
		if live := dr.Live(); live != "" {
			return purged + "; " + live
		}
		if dr.RestoredAt != nil {
			return purged + "; it was " + back
		}
		return purged
	case dr.RestoringAt != nil && dr.RestoredAt == nil:
		return back + fmt.Sprintf(" (a restore took it at %s and has not recorded the end: it may be in the palace)", dr.RestoringAt.Format(time.RFC3339))
	}
	return back
}

func pruneTrash(g *gatewayConfig, stdout, stderr io.Writer) error {
	st, ok, err := openTrash(g, stderr)
	if err != nil || !ok {
		return err
	}
	defer st.Close() // its error says nothing the prune's does not
	n, err := st.Prune(context.Background())
	if err != nil {
		return failed(err)
	}
	fmt.Fprintf(stdout, "pruned %d delete(s) older than %d days\n", n, int(st.Retention().Hours()/24))
	return nil
}

// purgeTrash is `gateway trash purge N|DRAWER_ID`.
func purgeTrash(g *gatewayConfig, stdout, stderr io.Writer, ref string) error {
	st, ok, err := openTrash(g, stderr)
	if err != nil {
		return err
	}
	if !ok {
		return failed(errors.New("the trash is empty: no delete has gone through the gateway"))
	}
	defer st.Close() // the purge is committed, its log emptied
	c, err := g.load()
	if err != nil {
		return err
	}
	if _, err := os.Stat(c.SecretFile); err != nil { // the gateway's: a purged entry's digest is keyed as it checks it
		return failed(fmt.Errorf("secret_file: %w", err))
	}
	secret, err := gateway.LoadSecret(c)
	if err != nil {
		return failed(fmt.Errorf("secret_file: %w", err))
	}
	st.Key = gateway.PurgeKey(secret)
	ids, live, err := st.Purge(context.Background(), ref)
	if err != nil {
		return failed(err)
	}
	fmt.Fprintf(stdout, "purged %s from delete(s) %s for good: its content is gone from %s and its log; 'trash list' notes the purge\n", ref, joinIDs(ids), st.Path())
	for _, dr := range live {
		fmt.Fprintf(stdout, "but drawer %s is not gone from the palace: %s\n", dr.ID, dr.Live())
	}
	return nil
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ", ")
}

// restoreTrash makes the gateway's own start checks of --upstream and
// the upstream token first, then restores refs.
func restoreTrash(g *gatewayConfig, stdout, stderr io.Writer, upstream string, noToken bool, refs []string) error {
	if upstream == "" || len(refs) == 0 {
		return usageError("trash restore: give --upstream URL and at least one ID (a delete's number or a drawer id; see 'trash list')")
	}
	if problem, fix := checkUpstream(upstream); problem != "" {
		return usageError("--upstream %q %s: %s", upstream, problem, fix)
	}
	seen := map[string]bool{} // a ref named twice is restored once
	refs = slices.DeleteFunc(slices.Clone(refs), func(r string) bool { twice := seen[r]; seen[r] = true; return twice })
	c, err := g.load()
	if err != nil {
		return err
	}
	if err := checkUpstreamToken(c, g.file, noToken); err != nil {
		return err
	}
	if err := c.CheckKept(g.file); err != nil { // it would make a missing ledger or provenance index anew, which the next start then takes as kept
		return failed(err)
	}
	st, ok, err := openTrash(g, stderr)
	if err != nil {
		return err
	}
	if !ok {
		return failed(errors.New("the trash is empty: no delete has gone through the gateway"))
	}
	defer st.Close() // its writes are committed one by one
	log := slog.New(slog.NewTextHandler(stderr, nil))
	prov, err := provenance.Open(c.ProvenancePath(), log)
	if err != nil {
		return failed(err)
	}
	defer prov.Close() // its writes are committed one by one
	// The ledger, so that a delete's op it holds in doubt is settled as
	// applied before its drawers come back: an edge's resend of it is then
	// answered from the ledger instead of deleting them again.
	l, err := ledger.OpenOptions(c.LedgerPath(), ledger.Options{Retention: c.LedgerRetention(), Log: log})
	if err != nil {
		return failed(fmt.Errorf("op-id ledger: %w", err))
	}
	defer l.Close() // its writes are committed one by one
	r := gateway.Restorer{Trash: st, Upstream: upstream, Token: upstreamTokenSource(os.LookupEnv, c.UpstreamTokenFile, log), Provenance: prov, Ledger: l}
	rs, err := r.Restore(context.Background(), refs)
	failures := printRestored(stdout, rs)
	if err != nil {
		return failed(err)
	}
	if failures > 0 {
		return failed(fmt.Errorf("%d of %d drawer(s) not restored", failures, len(rs)))
	}
	return nil
}

// printRestored says what became of each drawer, under its delete; it
// returns how many were not restored.
func printRestored(stdout io.Writer, rs []gateway.Restored) (failures int) {
	var heading int64
	for _, x := range rs {
		if x.Delete.ID != heading {
			heading = x.Delete.ID
			fmt.Fprintln(stdout, "delete "+x.Delete.Summary())
		}
		fmt.Fprintln(stdout, "    "+restoredLine(x))
		if x.Err != nil {
			failures++
		}
	}
	if len(rs) > 0 {
		fmt.Fprintln(stdout, "no restore brings back "+trash.Lost)
	}
	return failures
}

// restoredLine says what became of one drawer.
func restoredLine(x gateway.Restored) string {
	d := x.Drawer
	kept := ""
	if x.Kept != 0 {
		kept = fmt.Sprintf("; what the drawer held (other content) is kept in the trash as delete %d ('trash restore %d' puts it back)", x.Kept, x.Kept)
	}
	switch {
	case x.Err != nil:
		return d.ID + ": not restored: " + x.Err.Error()
	case x.Already && d.Kind == trash.KindDiary:
		return d.ID + ": still on the primary: the delete did not happen; nothing written"
	case x.Already:
		return d.ID + ": already on the primary as " + x.As + ", with the same content (nothing re-filed)"
	case d.Kind == trash.KindPrior && x.As == d.ID && x.Kept != 0:
		return d.ID + ": the replaced version is back in place, under the same id" + kept
	case d.Kind == trash.KindPrior:
		return fmt.Sprintf("%s: the drawer is no longer on the primary (deleted since): the replaced version is filed again in %s/%s as %s%s", d.ID, d.Wing, d.Room, x.As, kept)
	case d.Kind == trash.KindDiary && x.As == d.ID:
		return d.ID + ": still on the primary with other text (changed since the delete was kept): the kept text is back in place, under the same id" + kept
	case d.Kind == trash.KindDiary:
		return fmt.Sprintf("%s: written again as a new diary entry, %s, dated now (it was dated %s)", d.ID, x.As, d.Meta("filed_at"))
	case x.As == d.ID:
		return fmt.Sprintf("%s: back under the same id, with the same content (filed now; it was filed %s)%s", d.ID, d.Meta("filed_at"), kept)
	}
	return fmt.Sprintf("%s: back with the same content under a new id, %s (its id did not derive from wing, room and content: a mined drawer's derives from its source file and chunk, an updated drawer keeps its first id; it was filed %s)%s", d.ID, x.As, d.Meta("filed_at"), kept)
}
