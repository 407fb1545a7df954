package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
)

// The policy commands: check a team's policy file before a daemon starts
// with it, and ask a running daemon what it decides and why.

// loadPolicy builds the policy engine of `studio serve`: the built-in
// policies with the four-eyes levels, and the team's files.
func loadPolicy(levels, paths []string) (*policy.Engine, error) {
	files, err := readPolicyFiles(paths)
	if err != nil {
		return nil, err
	}
	return policy.New(policy.Options{SecondApproverFor: levels, Files: files})
}

func readPolicyFiles(paths []string) ([]policy.File, error) {
	files := make([]policy.File, 0, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("policy: %w", err)
		}
		files = append(files, policy.File{Name: p, Text: b})
	}
	return files, nil
}

func newPolicyCmd(cfg *config) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Check a team's policy file; explain what the daemon decides and why",
		Example: `  studio policy check team.cedar
  studio policy explain --principal alice --action confirm --proposal 3f2a…
  echo '{"principal":"bob","action":"run_command","command":{"type":"delete_schedule","body":{"schedule":"nightly"}}}' | studio policy explain --request -`,
	}
	cmd.AddCommand(policyCheckCmd(), policyShowCmd(), policyExplainCmd(cfg))
	return cmd
}

func policyCheckCmd() *cobra.Command {
	var levels []string
	c := &cobra.Command{
		Use:   "check FILE...",
		Short: "Validate policy files as `studio serve --policy` would: each problem with its file, line and reason",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := policy.ParseLevels(levels); err != nil {
				return usageError{fmt.Errorf("--second-approver-for: %w", err)}
			}
			e, err := loadPolicy(levels, args)
			var invalid *policy.InvalidError
			if errors.As(err, &invalid) {
				for _, p := range invalid.Problems {
					fmt.Fprintln(cmd.ErrOrStderr(), p)
				}
				return fmt.Errorf("%d problems: the daemon would refuse to start with this policy", len(invalid.Problems))
			}
			if err != nil {
				return err
			}
			team := 0
			for _, p := range e.Policies() {
				if !strings.HasPrefix(p.Where, policy.BuiltinFile+":") {
					team++
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ok: %d policies of yours beside the %d built-in ones\n", team, len(e.Policies())-team)
			return nil
		},
	}
	c.Flags().StringSliceVar(&levels, "second-approver-for", nil, "check beside these four-eyes levels, as the daemon has them")
	return c
}

func policyShowCmd() *cobra.Command {
	var levels, files []string
	var schema bool
	c := &cobra.Command{
		Use:   "show",
		Short: "Print the effective policies (built-in, four-eyes, your files), the role table they give, and each action's least role",
		Example: `  studio policy show --second-approver-for destructive --policy team.cedar
  studio policy show --schema`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if schema {
				fmt.Fprint(out, policy.SchemaText())
				return nil
			}
			if _, err := policy.ParseLevels(levels); err != nil {
				return usageError{fmt.Errorf("--second-approver-for: %w", err)}
			}
			e, err := loadPolicy(levels, files)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "%s\n%s\n", e.Text(), policy.RoleTable(e))
			for _, a := range policy.Actions {
				if a.Action != policy.ActAlone {
					fmt.Fprintf(out, "%s: %s\n", a.Action, policy.LeastRole(e, a.Action))
				}
			}
			return nil
		},
	}
	c.Flags().StringSliceVar(&levels, "second-approver-for", nil, "the four-eyes levels, as the daemon has them")
	c.Flags().StringArrayVar(&files, "policy", nil, "a team's policy file, as the daemon has it; repeatable")
	c.Flags().BoolVar(&schema, "schema", false, "print the schema every policy is validated against")
	return c
}

func policyExplainCmd(cfg *config) *cobra.Command {
	var o *output
	var req policy.ExplainRequest
	var action, command, body, request, door string
	c := &cobra.Command{
		Use:   "explain",
		Short: "Ask the daemon what it decides for a principal, an action and a resource, and which policies decide it (admin)",
		Example: `  studio policy explain --principal alice --action confirm --proposal 3f2a…
  studio policy explain --principal bob --action read_conversation --conversation 7c1e…
  studio policy explain --principal carol --action run_command --command delete_schedule --body '{"schedule":"nightly"}'
  studio policy explain --request - < request.json`,
		Args: cobra.NoArgs,
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, _ []string) error {
			if request != "" {
				r, err := readExplainRequest(request)
				if err != nil {
					return err
				}
				req = r
			} else {
				req.Action, req.Door = policy.Action(action), policy.Door(door)
				if command != "" {
					req.Command = &policy.ExplainCommand{Type: command}
					if body != "" {
						v := jsontext.Value(body)
						if !v.IsValid() {
							return usageError{fmt.Errorf("--body is not JSON")}
						}
						req.Command.Body = v
					}
				}
			}
			x, err := cl.ExplainPolicy(ctx, req)
			if err != nil {
				return err
			}
			return o.emit(out, x, func(w io.Writer) { printExplanation(w, x) })
		}),
	}
	o = addOutput(c)
	f := c.Flags()
	f.StringVar(&req.Principal, "principal", "", "the principal's name (decided with its role as stored)")
	f.StringVar(&action, "action", "", "the action: "+actionNames())
	f.StringVar(&req.Proposal, "proposal", "", "a proposal's id")
	f.StringVar(&req.Conversation, "conversation", "", "a conversation's id")
	f.StringVar(&command, "command", "", "a command asked for directly: its type (with --body)")
	f.StringVar(&body, "body", "", "the command's JSON body")
	f.StringVar(&door, "door", "", "http (default) or mcp")
	f.StringVar(&request, "request", "", "the whole request as JSON, from a file or - for stdin (docs/teams.md)")
	return c
}

func actionNames() string {
	var names []string
	for _, a := range policy.Actions {
		if a.Action != policy.ActAlone {
			names = append(names, string(a.Action))
		}
	}
	return strings.Join(names, ", ")
}

func readExplainRequest(path string) (policy.ExplainRequest, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return policy.ExplainRequest{}, err
	}
	var req policy.ExplainRequest
	if err := protocol.DecodeRequest(b, &req); err != nil {
		return req, usageError{fmt.Errorf("--request: %w", err)}
	}
	return req, nil
}

// printExplanation writes the decision, then each deciding policy with
// its place and text.
func printExplanation(w io.Writer, x policy.Explanation) {
	fmt.Fprintf(w, "%s: %s %s %s\n", x.Decision, x.Principal.Name, x.Action, x.Resource)
	if len(x.Texts) == 0 {
		if x.Effect == policy.EffectDeny {
			fmt.Fprintln(w, "no policy permits it")
		}
		return
	}
	fmt.Fprintln(w, "decided by:")
	for _, p := range x.Texts {
		fmt.Fprintf(w, "\n%s (%s, %s)\n", p.ID, p.Effect, p.Where)
		for _, line := range strings.Split(strings.TrimRight(p.Text, "\n"), "\n") {
			fmt.Fprintln(w, "    "+line)
		}
	}
}
