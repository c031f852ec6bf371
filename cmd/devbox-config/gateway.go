package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/joakimp/devbox-config/gateway"
	"github.com/joakimp/devbox-config/gateway/ledger"
	"github.com/joakimp/devbox-config/ladder"
)

func newGatewayCmd(stdout, stderr io.Writer) *cobra.Command {
	var listen, upstream, config string
	cmd := &cobra.Command{
		Use:   "gateway --listen ADDR --upstream URL [--config FILE]",
		Short: "Per-device authorization, provenance and an audit log in front of the primary",
		Long: `gateway sits in front of 'mempalace serve' (unchanged, one shared token) and
gives every device its own token: requests are authorized by wing, knowledge-
graph grant, coordination identity and admin scope (deny by default), added_by
is stamped from the credential, results are filtered to readable wings, and
every request goes to a hash-chained audit log. The upstream's token comes from
MEMPALACE_UPSTREAM_TOKEN or the config's upstream_token_file, never argv.
There is no implicit 0.0.0.0: bind the docker0 gateway address behind the
tunnel (RFC 001 §6.2). The config reloads on change and on SIGHUP.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if listen == "" || upstream == "" {
				return usageError("--listen and --upstream are required")
			}
			host, _, err := net.SplitHostPort(listen)
			if err != nil || host == "" {
				return usageError("--listen %q: want HOST:PORT with an explicit host", listen)
			}
			log := newLogger(stderr, 0).With("component", "gateway")
			s := &gateway.Server{ConfigFile: config, Upstream: upstream, BindHost: host, Log: log}
			if err := s.Open(); err != nil {
				return exitError{1, err}
			}
			c, err := gateway.LoadConfig(config)
			if err != nil {
				return exitError{1, err}
			}
			tokenFile := c.UpstreamTokenFile
			// The op-id ledger: every write an edge resends reaches the
			// upstream once (RFC 001 §4.3).
			l, err := ledger.Open(c.LedgerPath(), c.LedgerRetention())
			if err != nil {
				return exitError{1, fmt.Errorf("op-id ledger: %w", err)}
			}
			defer l.Close()
			s.Ledger = gateway.OpLedger{L: l, Log: log}
			if tokenFile != "" {
				if _, err := gateway.ReadSecretFile(tokenFile); err != nil {
					return exitError{1, fmt.Errorf("upstream_token_file: %w", err)}
				}
			}
			s.UpstreamToken = upstreamTokenSource(os.LookupEnv, tokenFile, log)
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			go func() {
				for range hup {
					if err := s.Reload(); err != nil {
						log.Error("reload failed; the previous config stays", "err", err)
					}
				}
			}()
			go s.Watch(ctx)
			srv := &http.Server{Addr: listen, Handler: s, ReadHeaderTimeout: 10 * time.Second}
			go func() { <-ctx.Done(); srv.Close() }()
			log.Info("listening", "addr", listen, "upstream", upstream)
			if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
				return exitError{1, err}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "address to listen on, e.g. 172.17.0.1:8766 (no default)")
	cmd.Flags().StringVar(&upstream, "upstream", "", "the primary's MCP endpoint, e.g. http://127.0.0.1:8765/mcp")
	cmd.PersistentFlags().StringVar(&config, "config", gateway.DefaultConfigFile, "gateway config (JSONC)")

	// update applies an operator's change under the config's lock, to the
	// file as it is now (gateway.UpdateConfig).
	noConfig := func() error {
		return exitError{1, fmt.Errorf("no gateway config at %s: create one with '%s'", config, gateway.Hint(config, "init"))}
	}
	update := func(change func(*gateway.Config) error) error {
		if err := gateway.UpdateConfig(config, change); err != nil {
			var ee exitError
			switch {
			case errors.As(err, &ee):
				return ee
			case errors.Is(err, fs.ErrNotExist):
				return noConfig()
			}
			return exitError{1, err}
		}
		return nil
	}
	// load reads the config with the gateway's state folded in.
	load := func() (*gateway.Config, error) {
		c, err := gateway.LoadConfig(config)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, noConfig()
		}
		if err != nil {
			return nil, exitError{1, err}
		}
		st, err := gateway.LoadState(gateway.StateFile(config, c))
		if err != nil {
			return nil, exitError{1, err}
		}
		c.FoldState(st)
		return c, nil
	}
	device1 := func(c *gateway.Config, id string) (*gateway.Device, error) {
		d := c.Device(id)
		if d == nil {
			return nil, exitError{1, fmt.Errorf("no device %s", id)}
		}
		return d, nil
	}
	var label, kg string
	var read, write, agents []string
	var admin, coordinator bool
	device := &cobra.Command{Use: "device", Short: "Add, list and remove devices"}
	add := &cobra.Command{
		Use: "add ID", Short: "Add a device (then issue it a token)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d := gateway.Device{ID: args[0], Label: label, Read: read, Write: write, KG: kg, Agents: agents, Admin: admin, Coordinator: coordinator}
			err := update(func(c *gateway.Config) error {
				if c.Device(d.ID) != nil {
					return exitError{1, fmt.Errorf("device %s exists", d.ID)}
				}
				c.Devices = append(c.Devices, d)
				return nil
			})
			if err != nil {
				return err
			}
			fmt.Fprintln(stdout, "added device "+d.ID+": "+scopes(d))
			if len(d.Read) == 0 && len(d.Write) == 0 {
				what := "it can do nothing until given scopes"
				if d.KG != "none" || d.Admin {
					what = "it can read and write no wing until given some"
				}
				fmt.Fprintf(stderr, "devbox-config: warning: device %s has no --read and no --write wings: %s (--read WINGS, --write WINGS, --kg read|write, --agents NAMES, --admin); to give them, '%s' and add it again with them\n",
					d.ID, what, gateway.Hint(config, "device remove "+d.ID))
				return nil
			}
			fmt.Fprintf(stderr, "next: %s\n", gateway.Hint(config, "token issue "+d.ID))
			return nil
		},
	}
	f := add.Flags()
	f.StringVar(&label, "label", "", "human-readable label (never identity)")
	f.StringSliceVar(&read, "read", nil, "wing globs the device may read")
	f.StringSliceVar(&write, "write", nil, "wing globs the device may write")
	f.StringVar(&kg, "kg", "none", "knowledge-graph grant: none, read or write")
	f.StringSliceVar(&agents, "agents", nil, "from_agent names the device may use, e.g. opencode@laptop")
	f.BoolVar(&admin, "admin", false, "may run mine, sync, deletes and the other admin tools (no device may run a tool the catalogue does not know)")
	f.BoolVar(&coordinator, "coordinator", false, "sees every coordination event")
	list := &cobra.Command{
		Use: "list", Short: "List devices and their tokens (never the secrets)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := load()
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(stdout, 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "DEVICE\tLABEL\tREAD\tWRITE\tKG\tADMIN\tTOKENS")
			for _, d := range c.Devices {
				var toks []string
				for _, t := range d.Tokens {
					state := "live"
					switch {
					case t.Revoked:
						state = "revoked"
					case t.Expires != nil:
						state = "expires " + t.Expires.Format(time.DateOnly)
					}
					toks = append(toks, t.ID+":"+state)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%v\t%s\n", d.ID, d.Label, strings.Join(d.Read, ","), strings.Join(d.Write, ","), d.KG, d.Admin, strings.Join(toks, " "))
			}
			return w.Flush()
		},
	}
	remove := &cobra.Command{
		Use: "remove ID", Short: "Remove a device (its tokens stop working within a second)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return update(func(c *gateway.Config) error {
				for i, d := range c.Devices {
					if d.ID == args[0] {
						c.Devices = append(c.Devices[:i], c.Devices[i+1:]...)
						return nil
					}
				}
				return exitError{1, fmt.Errorf("no device %s", args[0])}
			})
		},
	}
	device.AddCommand(add, list, remove)

	token := &cobra.Command{Use: "token", Short: "Issue, rotate and revoke device tokens"}
	issue := func(rotate bool) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			var tok string
			var grace time.Duration
			err := update(func(c *gateway.Config) error {
				d, err := device1(c, args[0])
				if err != nil {
					return err
				}
				key, err := gateway.LoadSecret(c.SecretFile)
				if err != nil {
					return exitError{1, err}
				}
				if tok, err = gateway.Issue(key, d, time.Now()); err != nil {
					return exitError{1, err}
				}
				grace = c.Grace()
				return nil
			})
			if err != nil {
				return err
			}
			fmt.Fprintln(stdout, tok)
			msg := "shown once: put it in the device's .env as MEMPALACE_REMOTE_TOKEN"
			if rotate {
				msg += fmt.Sprintf("; the old token keeps working until %d days after this one is first used", int(grace.Hours()/24))
			}
			fmt.Fprintln(stderr, msg)
			return nil
		}
	}
	var tokenID string
	revoke := &cobra.Command{
		Use: "revoke DEVICE", Short: "Revoke a device's tokens (--token ID for one); effective within a second", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n := 0
			err := update(func(c *gateway.Config) error {
				d, err := device1(c, args[0])
				if err != nil {
					return err
				}
				n = gateway.Revoke(d, tokenID)
				return nil
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "revoked %d token(s)\n", n)
			return nil
		},
	}
	revoke.Flags().StringVar(&tokenID, "token", "", "only this token id")
	token.AddCommand(
		&cobra.Command{Use: "issue DEVICE", Short: "Issue a token (shown once)", Args: cobra.ExactArgs(1), RunE: issue(false)},
		&cobra.Command{Use: "rotate DEVICE", Short: "Issue the next token; the old one stays valid for the grace period after the new one's first use", Args: cobra.ExactArgs(1), RunE: issue(true)},
		revoke)

	var pubFile string
	audit := &cobra.Command{Use: "audit", Short: "Check the audit log"}
	verify := &cobra.Command{
		Use: "verify [FILE]", Short: "Verify the audit log's hash chain and signed checkpoints (default: the config's audit_log)", Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := ""
			if len(args) == 1 {
				file = args[0]
			} else {
				c, err := load()
				if err != nil {
					return err
				}
				file = c.AuditLog
				if pubFile == "" && c.SigningKeyFile != "" {
					pubFile = c.SigningKeyFile + ".pub"
				}
			}
			var pub ed25519.PublicKey
			if pubFile != "" {
				k, err := gateway.PublicKey(pubFile)
				if err != nil {
					return exitError{1, err}
				}
				pub = k
			}
			n, err := gateway.Verify(file, pub)
			if err != nil {
				return exitError{1, fmt.Errorf("%s: %w", file, err)}
			}
			fmt.Fprintf(stdout, "%s: %d lines, chain intact\n", file, n)
			return nil
		},
	}
	verify.Flags().StringVar(&pubFile, "pubkey", "", "Ed25519 public key of the checkpoints (default: the config's signing_key_file.pub)")
	audit.AddCommand(verify)
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Write a commented sample config (0600) at --config; never overwrites",
		Long: `init writes a commented sample gateway config at --config (default
gateway.jsonc) with mode 0600, creating its directory (0700) if it is
missing: the server secret, the audit log and its
signing key beside it, and one example device commented out. It refuses to
overwrite an existing file. Then: 'gateway device add', 'gateway token issue',
each with the same --config (devbox-config gateway --config FILE device add
...) unless it is ./gateway.jsonc.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := gateway.WriteSample(config); err != nil {
				return exitError{1, err}
			}
			fmt.Fprintf(stderr, "wrote %s (0600); next: %s\n", config, gateway.Hint(config, "device add ID ..."))
			return nil
		},
	}
	cmd.AddCommand(initCmd, device, token, audit)
	return cmd
}

// scopes says what a device may do, for `gateway device add`.
func scopes(d gateway.Device) string {
	list := func(globs []string) string {
		if len(globs) == 0 {
			return "none"
		}
		return strings.Join(globs, ",")
	}
	s := "read " + list(d.Read) + "; write " + list(d.Write) + "; kg " + d.KG + "; agents " + list(d.Agents)
	if d.Admin {
		s += "; admin"
	}
	if d.Coordinator {
		s += "; coordinator"
	}
	return s
}

// upstreamTokenSource is the gateway's upstream token: the environment's
// MEMPALACE_UPSTREAM_TOKEN (looked up per call, so a rotated secret in a
// restarted sidecar's env applies), else the config's upstream_token_file
// (re-read per call). lookup is os.LookupEnv outside tests.
func upstreamTokenSource(lookup func(string) (string, bool), tokenFile string, log *slog.Logger) func() string {
	return func() string {
		if t := ladder.UpstreamToken(lookup); t != "" {
			return t
		}
		if tokenFile == "" {
			return ""
		}
		b, err := gateway.ReadSecretFile(tokenFile)
		if err != nil {
			log.Error("upstream token unreadable", "err", err)
			return ""
		}
		return b
	}
}
