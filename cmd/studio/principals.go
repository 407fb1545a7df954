package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/protocol"
)

// The team commands: principals, their tokens and whoami, over the admin
// API (/api/admin, /api/auth) with the client's token.

func newPrincipalsCmd(cfg *config) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "principals",
		Short: "List, add, change the role of, link to the sign-in proxy and revoke principals (admin)",
		Example: `  studio principals list
  studio principals add alice --role operator
  studio principals role alice approver
  studio principals link alice --proxy-user alice@corp.example
  studio principals unlink alice
  studio principals revoke alice`,
	}
	cmd.AddCommand(principalsListCmd(cfg), principalsAddCmd(cfg), principalsRoleCmd(cfg), principalsLinkCmd(cfg), principalsUnlinkCmd(cfg),
		principalsRevokeCmd(cfg))
	return cmd
}

func principalTable(w io.Writer, ps []protocol.PrincipalView) {
	t := newTable(w, "NAME", "ROLE", "ORIGIN", "PROXY USER", "CREATED", "STATE", "ID")
	for _, p := range ps {
		state, link := "active", "-"
		if p.DisabledAt != nil {
			state = "revoked " + ago(*p.DisabledAt)
		}
		if p.ProxyUser != nil {
			link = *p.ProxyUser
		}
		t.row(p.Name, string(p.Role), string(p.Origin), link, ago(p.CreatedAt), state, p.ID)
	}
	t.flush()
}

func principalsListCmd(cfg *config) *cobra.Command {
	var o *output
	c := &cobra.Command{
		Use: "list", Short: "List principals by name, revoked ones included", Args: cobra.NoArgs,
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, _ []string) error {
			ps, err := cl.ListPrincipals(ctx)
			if err != nil {
				return err
			}
			return o.emit(out, map[string]any{"principals": ps}, func(w io.Writer) { principalTable(w, ps) })
		}),
	}
	o = addOutput(c)
	return c
}

func parseRoleFlag(v string) (protocol.Role, error) {
	r, err := protocol.ParseRole(v)
	if err != nil {
		return "", usageError{fmt.Errorf("role must be one of %v, not %q", protocol.Roles, v)}
	}
	return r, nil
}

func principalsAddCmd(cfg *config) *cobra.Command {
	var role string
	var o *output
	c := &cobra.Command{
		Use: "add NAME --role ROLE", Short: "Add a principal; make its token with: studio tokens create NAME", Args: cobra.ExactArgs(1),
		Example: "  studio principals add ci-bot --role agent",
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, args []string) error {
			r, err := parseRoleFlag(role)
			if err != nil {
				return err
			}
			p, err := cl.CreatePrincipal(ctx, args[0], r)
			if err != nil {
				return err
			}
			return o.emit(out, p, func(w io.Writer) { principalTable(w, []protocol.PrincipalView{p}) })
		}),
	}
	o = addOutput(c)
	c.Flags().StringVar(&role, "role", "", "viewer, agent, operator, approver or admin (required)")
	_ = c.MarkFlagRequired("role")
	return c
}

func principalsRoleCmd(cfg *config) *cobra.Command {
	var o *output
	c := &cobra.Command{
		Use: "role NAME ROLE", Short: "Change a principal's role", Args: cobra.ExactArgs(2),
		Example: "  studio principals role alice approver",
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, args []string) error {
			r, err := parseRoleFlag(args[1])
			if err != nil {
				return err
			}
			p, err := cl.SetPrincipalRole(ctx, args[0], r)
			if err != nil {
				return err
			}
			return o.emit(out, p, func(w io.Writer) { principalTable(w, []protocol.PrincipalView{p}) })
		}),
	}
	o = addOutput(c)
	return c
}

func principalsLinkCmd(cfg *config) *cobra.Command {
	var user string
	var o *output
	c := &cobra.Command{
		Use: "link NAME --proxy-user USER", Args: cobra.ExactArgs(1),
		Short: "Let the sign-in proxy's USER sign in as the local principal NAME (its role stays yours to set)",
		Long: "link makes the sign-in proxy's user USER sign in as the local principal NAME. Without a link\n" +
			"the proxy's user of a local principal's name is refused: a proxy identity never becomes a local\n" +
			"principal by its name alone. The link is audited; unlink ends it.",
		Example: "  studio principals link alice --proxy-user alice@corp.example\n  studio principals link owner --proxy-user admin@corp.example",
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, args []string) error {
			p, err := cl.LinkPrincipal(ctx, args[0], user)
			if err != nil {
				return err
			}
			return o.emit(out, p, func(w io.Writer) { principalTable(w, []protocol.PrincipalView{p}) })
		}),
	}
	o = addOutput(c)
	c.Flags().StringVar(&user, "proxy-user", "", "the user as the sign-in proxy names them (required)")
	_ = c.MarkFlagRequired("proxy-user")
	return c
}

func principalsUnlinkCmd(cfg *config) *cobra.Command {
	var o *output
	c := &cobra.Command{
		Use: "unlink NAME", Short: "End a local principal's link to the sign-in proxy's user", Args: cobra.ExactArgs(1),
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, args []string) error {
			p, err := cl.UnlinkPrincipal(ctx, args[0])
			if err != nil {
				return err
			}
			return o.emit(out, p, func(w io.Writer) { principalTable(w, []protocol.PrincipalView{p}) })
		}),
	}
	o = addOutput(c)
	return c
}

func principalsRevokeCmd(cfg *config) *cobra.Command {
	var o *output
	c := &cobra.Command{
		Use: "revoke NAME", Short: "Revoke a principal for good, with all its tokens (its name stays taken)", Args: cobra.ExactArgs(1),
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, args []string) error {
			p, err := cl.DisablePrincipal(ctx, args[0])
			if err != nil {
				return err
			}
			return o.emit(out, p, func(w io.Writer) { principalTable(w, []protocol.PrincipalView{p}) })
		}),
	}
	o = addOutput(c)
	return c
}

func newTokensCmd(cfg *config) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tokens",
		Short: "Create, list and revoke principals' personal tokens (admin)",
		Example: `  studio tokens create alice --expires 90d
  studio tokens list
  studio tokens revoke 3f2a...`,
	}
	cmd.AddCommand(tokensCreateCmd(cfg), tokensListCmd(cfg), tokensRevokeCmd(cfg))
	return cmd
}

func tokenTable(w io.Writer, ts []protocol.TokenView) {
	t := newTable(w, "ID", "PRINCIPAL", "PREFIX", "CREATED", "LAST USED", "EXPIRES", "STATE")
	for _, tk := range ts {
		used, expires, state := "never", "never", "active"
		if tk.LastUsedAt != nil {
			used = ago(*tk.LastUsedAt)
		}
		if tk.ExpiresAt != nil {
			expires = when(*tk.ExpiresAt)
		}
		if tk.RevokedAt != nil {
			state = "revoked " + ago(*tk.RevokedAt)
		}
		t.row(tk.ID, tk.Principal, tk.Prefix, ago(tk.CreatedAt), used, expires, state)
	}
	t.flush()
}

func tokensCreateCmd(cfg *config) *cobra.Command {
	var expires string
	var o *output
	c := &cobra.Command{
		Use: "create NAME", Short: "Make a personal token for a principal; it is shown this once", Args: cobra.ExactArgs(1),
		Example: "  studio tokens create alice --expires 90d",
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, args []string) error {
			if expires != "" {
				if _, err := httpapi.ParseLifetime(expires); err != nil {
					return usageError{fmt.Errorf("--expires %q: a positive lifetime like 90d or 720h, at most 3650d", expires)}
				}
			}
			t, err := cl.CreateToken(ctx, args[0], expires)
			if err != nil {
				return err
			}
			return o.emit(out, t, func(w io.Writer) {
				fmt.Fprintln(w, t.Token)
				fmt.Fprintf(w, "# token %s for %s: shown this once; give it as STUDIO_TOKEN or --token\n", t.ID, t.Principal)
			})
		}),
	}
	o = addOutput(c)
	c.Flags().StringVar(&expires, "expires", "", "lifetime: 90d, 720h (default: does not expire)")
	return c
}

func tokensListCmd(cfg *config) *cobra.Command {
	var principal string
	var o *output
	c := &cobra.Command{
		Use: "list", Short: "List tokens by prefix, newest first (never the tokens)", Args: cobra.NoArgs,
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, _ []string) error {
			ts, err := cl.ListTokens(ctx, principal)
			if err != nil {
				return err
			}
			return o.emit(out, map[string]any{"tokens": ts}, func(w io.Writer) { tokenTable(w, ts) })
		}),
	}
	o = addOutput(c)
	c.Flags().StringVar(&principal, "principal", "", "only this principal's")
	return c
}

func tokensRevokeCmd(cfg *config) *cobra.Command {
	var o *output
	c := &cobra.Command{
		Use: "revoke ID", Short: "Revoke a token: refused from the next request on, on every daemon", Args: cobra.ExactArgs(1),
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, args []string) error {
			t, err := cl.RevokeToken(ctx, args[0])
			if err != nil {
				return err
			}
			return o.emit(out, t, func(w io.Writer) { tokenTable(w, []protocol.TokenView{t}) })
		}),
	}
	o = addOutput(c)
	return c
}

func newWhoamiCmd(cfg *config) *cobra.Command {
	var o *output
	c := &cobra.Command{
		Use: "whoami", Short: "The principal your token belongs to, and its role", Args: cobra.NoArgs,
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, _ []string) error {
			p, err := cl.Whoami(ctx)
			if err != nil {
				return err
			}
			return o.emit(out, p, func(w io.Writer) {
				fmt.Fprintf(w, "%s (%s, %s)", p.Name, p.Role, p.Origin)
				if len(p.Groups) > 0 {
					fmt.Fprintf(w, " groups %s", strings.Join(p.Groups, ","))
				}
				fmt.Fprintln(w)
			})
		}),
	}
	o = addOutput(c)
	return c
}
