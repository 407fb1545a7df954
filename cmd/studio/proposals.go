package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/protocol"
)

// The proposal commands of studio operator: proposals (the pending ones),
// confirm (shows the command, asks unless --yes) and deny.

func proposalsCmd(cfg *config) *cobra.Command {
	var status string
	var o *output
	c := &cobra.Command{
		Use: "proposals", Short: "List proposals awaiting confirmation (summary, risk, target, time left)", Args: cobra.NoArgs,
		Example: `  studio operator proposals
  studio operator proposals --status succeeded,failed -o json`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := o.operatorClient(cfg)
			if err != nil {
				return err
			}
			if err := oneOf("status", status, true, proposalStatusValues...); err != nil {
				return err
			}
			ps, err := cl.Proposals(cmd.Context(), status)
			if err != nil {
				return err
			}
			doc := struct {
				Proposals []protocol.ProposalState `json:"proposals"`
			}{append([]protocol.ProposalState{}, ps...)}
			return o.emit(cmd.OutOrStdout(), doc, func(w io.Writer) {
				if len(ps) == 0 {
					fmt.Fprintln(w, "no proposals")
					return
				}
				now := float64(time.Now().UnixMicro()) / 1e6
				t := newTable(w, "ID", "RISK", "STATUS", "SUMMARY", "TARGET", "CONVERSATION")
				for _, p := range ps {
					left := p.Status
					if d := time.Duration((p.ExpiresAt - now) * float64(time.Second)); p.Status == "pending" {
						left = "expired"
						if d > 0 {
							left = d.Truncate(time.Second).String() + " left"
						}
					}
					t.row(p.ID, p.Risk, left, p.Summary, targetString(p.Target), p.ConversationID)
				}
				t.flush()
			})
		},
	}
	o = addOutput(c)
	c.Flags().StringVar(&status, "status", "pending", "statuses, comma separated (pending, executing, succeeded, failed, expired, cancelled, conflict)")
	enumFlag(c, "status", true, proposalStatusValues)
	return c
}

func targetString(t *protocol.ResourceVersion) string {
	if t == nil {
		return "(none)"
	}
	return fmt.Sprintf("%s %s version %s", t.Kind, t.ID, t.Version)
}

// isTerminal reports whether r (stdin, stdout) is a terminal: a person at
// it, not a pipe, a file or a journal.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// proposalResultFields is the table form of a confirm or deny answer.
func proposalResultFields(w io.Writer, res protocol.ProposalResult) {
	proposalResultLines(w, res, false)
}

// proposalResultLines writes a confirm or deny answer; denied says the
// answer is to a deny, whose success is the proposal cancelled: its
// cancellation reason is what was asked for, not an error.
func proposalResultLines(w io.Writer, res protocol.ProposalResult, denied bool) {
	if denied && res.Status == protocol.ResultCancelled {
		fields(w, "proposal", res.ProposalID, "status", "denied")
		return
	}
	kv := []string{"proposal", res.ProposalID, "status", string(res.Status)}
	if len(res.Result) > 0 {
		kv = append(kv, "result", truncate(string(res.Result), 300))
	}
	if res.Error != nil {
		kv = append(kv, "error", string(res.Error.Code)+": "+res.Error.Message)
	}
	fields(w, kv...)
}

func confirmCmd(cfg *config) *cobra.Command {
	var yes bool
	var o *output
	c := &cobra.Command{
		Use: "confirm PROPOSAL_ID", Short: "Confirm a proposal: shows the exact command, hash and target, asks unless --yes", Args: cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(cfg, pendingProposalIDs),
		Example: `  studio operator confirm 7d3e...
  studio operator confirm --yes 7d3e... -o json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, err := o.isJSON()
			if err != nil {
				return err
			}
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			pid, err := resolveProposal(ctx, cl, args[0])
			if err != nil {
				return err
			}
			p, err := cl.Proposal(ctx, pid)
			if err != nil {
				return err
			}
			// The command is always shown to a person about to confirm; with
			// -o json it goes to stderr so stdout stays one JSON document.
			show := out
			if asJSON {
				show = cmd.ErrOrStderr()
			}
			cmdJSON := jsontext.Value(append([]byte(nil), p.Command...))
			_ = cmdJSON.Indent()
			fmt.Fprintf(show, "%s (%s)\ncommand %s:\n%s\nhash    %s\ntarget  %s\nstatus  %s\n", p.Summary, p.Risk, p.CommandType,
				cmdJSON, p.CommandHash, targetString(p.Target), p.Status)
			if p.Status != "pending" {
				return exitError{exitConflict, fmt.Errorf("proposal %s is %s, not pending", p.ID, p.Status)}
			}
			if !yes {
				// Only a person at a terminal can answer the question; a script
				// piping input in says so explicitly with --yes.
				if !isTerminal(cmd.InOrStdin()) {
					return usageError{errors.New("not confirmed: stdin is not a terminal, so there is no one to ask; use --yes to confirm without asking")}
				}
				fmt.Fprint(show, "Confirm and execute? [y/N] ")
				line, _ := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
				if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
					return errors.New("not confirmed")
				}
			}
			req := protocol.ConfirmProposalRequest{ExpectedCommandHash: p.CommandHash}
			if p.Target != nil {
				req.ExpectedTargetVersion = &p.Target.Version
			}
			res, err := cl.Confirm(ctx, p.ConversationID, p.ID, req)
			if err != nil {
				return err
			}
			if err := o.emit(out, res, func(w io.Writer) { proposalResultFields(w, res) }); err != nil {
				return err
			}
			switch res.Status {
			case "succeeded":
				return nil
			case "conflict", "expired", "cancelled", "executing":
				return exitError{exitConflict, fmt.Errorf("proposal %s", res.Status)}
			}
			return fmt.Errorf("proposal %s", res.Status)
		},
	}
	o = addOutput(c)
	c.Flags().BoolVar(&yes, "yes", false, "confirm without asking")
	return c
}

func denyCmd(cfg *config) *cobra.Command {
	var o *output
	c := &cobra.Command{
		Use: "deny PROPOSAL_ID", Short: "Deny a pending proposal", Args: cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(cfg, pendingProposalIDs),
		Example:           `  studio operator deny 7d3e...`,
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			pid, err := resolveProposal(cmd.Context(), cl, args[0])
			if err != nil {
				return err
			}
			p, err := cl.Proposal(cmd.Context(), pid)
			if err != nil {
				return err
			}
			res, err := cl.Deny(cmd.Context(), p.ConversationID, p.ID)
			if err != nil {
				return err
			}
			return o.emit(cmd.OutOrStdout(), res, func(w io.Writer) { proposalResultLines(w, res, true) })
		},
	}
	o = addOutput(c)
	return c
}
