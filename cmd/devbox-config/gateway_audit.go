package main

import (
	"cmp"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/joakimp/devbox-config/gateway"
)

const auditVerifyHelp = `verify checks the audit log's hash chain and its signed checkpoints, and
says how many lines follow the last checkpoint: no signature covers them, so
the chain alone cannot tell whether lines were cut from the log's end. The
gateway signs a checkpoint every audit_checkpoint_lines lines (default 100),
audit_checkpoint_seconds (default 60) after a line none covers yet, and when
it stops, and writes each to audit_anchor too (a file outside the log's
directory, or stderr for the service manager's journal). --anchor FILE reads
those anchors (a journal's text works: each line's JSON from its first '{'),
repeated for each of a rotated anchor file's files (a compressed one is read
as it lies), and fails when the log is shorter than an anchor says, or
differs from it, or when two anchors vouch for two logs (one line, two
heads; or a later anchor with fewer lines: a log cut back and written on,
or begun anew, whose earlier anchors belong to the old log).
A rotated log is verified as one: give its files oldest first, as they lie
(a gzip-compressed one is read as its content), from the first the gateway
wrote; a broken line is named by its file and line there, and its line in
the whole log, which the checkpoints and anchors count.`

// newGatewayAuditCmd is `gateway audit verify [FILE...]` and `gateway audit
// digest [FILE]`.
func newGatewayAuditCmd(g *gatewayConfig, stdout io.Writer) *cobra.Command {
	var pubFile string
	var anchorFiles []string
	verify := &cobra.Command{
		Use: "verify [FILE...]", Short: "Verify the audit log's hash chain, signed checkpoints and end (default: the config's audit_log; FILEs: its rotated files, oldest first)", Long: auditVerifyHelp,
		RunE: func(_ *cobra.Command, args []string) error { return verifyAudit(g, stdout, args, pubFile, anchorFiles) },
	}
	verify.Flags().StringVar(&pubFile, "pubkey", "", "Ed25519 public key of the checkpoints (default: the config's signing_key_file.pub)")
	verify.Flags().StringArrayVar(&anchorFiles, "anchor", nil, "anchors the gateway wrote (its audit_anchor file, or a journal's text; repeat it for each rotated file, gzip read as it lies): fail if the log was cut below them")
	var q digestQuery
	digest := &cobra.Command{
		Use: "digest [FILE]", Short: "Print the digest an audit line carries of a call's arguments (or, with --string, of a string it cut)", Long: auditDigestHelp, Args: maxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return printDigest(g, cmd.InOrStdin(), stdout, args, q)
		},
	}
	digest.Flags().StringVar(&q.device, "device", "", "the device id that sent the call (the line's device)")
	digest.Flags().StringVar(&q.tool, "tool", "", "the tool it called, as the tools/call named it (mempalace_add_drawer)")
	digest.Flags().StringVar(&q.secretFile, "secret-file", "", "the server secret to key the digest with (default: the config's secret_file): a secret rotated out, for lines written under it")
	digest.Flags().BoolVar(&q.asString, "string", false, "FILE's bytes are a method, tool, wing or other string a line cut at 256 bytes (its 'digest …')")
	return group("audit", "Check the audit log", verify, digest)
}

const auditDigestHelp = `digest prints the args_digest an audit line carries for a call the device
--device made to the tool --tool with the arguments (a JSON object, as the
tools/call sent them) in FILE (default: standard input): grep the log for it.
The digest is keyed with a key derived from the server secret (secret_file)
and takes in the device and the tool, so only who holds the secret can match
a request to its line: a reader of the log cannot test guesses of the
content, and a device that sends a guess obtains a digest under its own id
and tool only. With --string, FILE's bytes are a string a line of the device
--device cut (a method, tool, wing or rule over 256 bytes keeps its first
bytes, its length and this digest; no --device for a line that names no
device); --tool is not used then. A call with no arguments ({}) has no
args_digest: its line carries none, so digest refuses it. Lines written
before the server secret was rotated are keyed with the old one: give it
with --secret-file.`

// digestQuery is what `audit digest` is asked for: the digest of a
// call's arguments the device sent to the tool, or of a cut string.
type digestQuery struct {
	device, tool string
	asString     bool
	secretFile   string // --secret-file: another secret than the config's
}

// printDigest prints the digest q asks for of the bytes of args[0] (else
// of in) under the config's server secret, which it never creates.
func printDigest(g *gatewayConfig, in io.Reader, stdout io.Writer, args []string, q digestQuery) error {
	if !q.asString && (q.device == "" || q.tool == "") {
		return usageError("--device and --tool are required: the id of the device that sent the call and the tool it named (the digest takes them in)")
	}
	c, err := g.load()
	if err != nil {
		return err
	}
	c.SecretFile = cmp.Or(q.secretFile, c.SecretFile)
	if _, err := os.Stat(c.SecretFile); err != nil {
		return failed(fmt.Errorf("secret_file: %w", err))
	}
	secret, err := gateway.LoadSecret(c)
	if err != nil {
		return failed(fmt.Errorf("secret_file: %w", err))
	}
	var b []byte
	if len(args) == 1 {
		b, err = os.ReadFile(args[0])
	} else {
		b, err = io.ReadAll(in)
	}
	if err != nil {
		return failed(err)
	}
	if q.asString {
		fmt.Fprintln(stdout, gateway.StringDigestOf(secret, q.device, b))
		return nil
	}
	d, err := gateway.DigestOf(secret, q.device, q.tool, b)
	if err != nil {
		return failed(err)
	}
	if d == "" {
		return failed(errors.New("the arguments are empty ({}): a call without arguments has no args_digest, its line carries none; grep the log for the line's device and tool instead"))
	}
	fmt.Fprintln(stdout, d)
	return nil
}

// verifyAudit checks the audit log in the files args, oldest first (else
// the config's) with the public key pubFile (else the config's signing
// key's), against the anchors in anchorFiles if given.
func verifyAudit(g *gatewayConfig, stdout io.Writer, args []string, pubFile string, anchorFiles []string) error {
	files := args
	// The config gives the log (unless FILEs do) and the key (unless
	// --pubkey does). FILEs may be checked where no config is, copies
	// taken off the gateway's host: their signatures are then not checked,
	// and the output says so.
	every, after := gateway.CheckpointEvery, gateway.CheckpointAfter
	if _, err := os.Stat(g.file); len(files) == 0 || (pubFile == "" && err == nil) {
		c, err := g.load()
		if err != nil {
			return err
		}
		if len(files) == 0 {
			files = []string{c.AuditLog}
		}
		if pubFile == "" && c.SigningKeyFile != "" {
			pubFile = c.SigningKeyFile + ".pub"
		}
		every, after = cmp.Or(c.AuditCheckpointLines, every), cmp.Or(time.Duration(c.AuditCheckpointSeconds)*time.Second, after)
	}
	var pub ed25519.PublicKey
	if pubFile != "" {
		k, err := gateway.PublicKey(pubFile)
		if err != nil {
			return failed(err)
		}
		pub = k
	}
	var anchors []gateway.Anchor
	if len(anchorFiles) > 0 {
		var err error
		if anchors, err = gateway.ReadAnchors(anchorFiles...); err != nil {
			return failed(err)
		}
	}
	r, err := gateway.VerifyLog(files, pub, anchors)
	if err != nil {
		return failed(err)
	}
	printVerified(stdout, files, r, pubFile != "", every, after)
	return nil
}

// printVerified says what verifyAudit found of the log in files: its
// lines, the last checkpoint (keyed: a public key was given; every and
// after, the gateway's checkpoint cadence) and the anchor.
func printVerified(stdout io.Writer, files []string, r gateway.Report, keyed bool, every int, after time.Duration) {
	log := files[0]
	if len(files) > 1 {
		log = fmt.Sprintf("%s … %s (%d files)", files[0], files[len(files)-1], len(files))
	}
	fmt.Fprintf(stdout, "%s: %d lines, chain intact\n", log, r.Lines)
	switch {
	case r.Checkpoint == 0 && keyed:
		fmt.Fprintf(stdout, "no checkpoint yet: no signature covers any of its %d lines; the gateway signs the first after %d lines, %s after the first line, or when it stops\n", r.Lines, every, after)
	case r.Checkpoint == 0:
		fmt.Fprintf(stdout, "no signed checkpoint: no signature covers any of its %d lines (set signing_key_file)\n", r.Lines)
	case !r.Signed:
		fmt.Fprintf(stdout, "last checkpoint at line %d (%s), its signature not checked (no public key: --pubkey); %d line(s) after it\n", r.Checkpoint, r.CheckpointAt.Format(time.RFC3339), r.Unsigned)
	default:
		fmt.Fprintf(stdout, "last signed checkpoint at line %d (%s); %d line(s) after it are not covered by a signature\n", r.Checkpoint, r.CheckpointAt.Format(time.RFC3339), r.Unsigned)
	}
	if r.FileCounted > 0 {
		fmt.Fprintf(stdout, "%d checkpoint(s) signed by an older release count their file's lines alone, not the log's (it restarted on a rotated log): their signatures verify over that count, and still cover every line before them\n", r.FileCounted)
	}
	if r.Anchor.Lines > 0 {
		fmt.Fprintf(stdout, "anchor: the log reaches line %d with the head the anchor recorded at %s\n", r.Anchor.Lines, r.Anchor.Time.Format(time.RFC3339))
	} else {
		fmt.Fprintln(stdout, "without --anchor, a cut of the log's end is not detected")
	}
}
