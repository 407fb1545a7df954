package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/protocol"
)

// studio approvals: what waits for the caller's decision. The daemon
// decides which proposals those are, by the confirm's own rule (the role
// the risk needs, four-eyes); this lists them oldest first, with how long
// each has left, and decides them as studio operator confirm and deny do.

func newApprovalsCmd(cfg *config) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "Proposals waiting for your decision: list, show, confirm, deny",
		Long: "approvals lists the pending proposals you may confirm, across every conversation you can see, oldest\n" +
			"first, with how long each has before it expires; show, confirm and deny act on one (an id or its prefix).",
		Example: `  studio approvals                    # what waits for you
  studio approvals show 7d3e1a2b
  studio approvals confirm 7d3e1a2b
  studio approvals deny 7d3e1a2b`,
	}
	list := approvalsListCmd(cfg)
	confirm, deny := confirmCmd(cfg), denyCmd(cfg)
	confirm.Example = "  studio approvals confirm 7d3e1a2b\n  studio approvals confirm --yes 7d3e1a2b -o json"
	deny.Example = "  studio approvals deny 7d3e1a2b"
	cmd.AddCommand(list, approvalsShowCmd(cfg), confirm, deny)
	// studio approvals alone is the list; a word after it is a subcommand.
	cmd.RunE = list.RunE
	cmd.Args = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			return unknownCommand(c, args[0])
		}
		return nil
	}
	cmd.Flags().AddFlagSet(list.Flags())
	return cmd
}

// waiting is the caller's decidable proposals, oldest first.
func waiting(ctx context.Context, cl *apiclient.Client) ([]protocol.ProposalState, error) {
	ps, err := cl.Decidable(ctx)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(ps, func(a, b protocol.ProposalState) int {
		switch {
		case a.CreatedAt < b.CreatedAt:
			return -1
		case a.CreatedAt > b.CreatedAt:
			return 1
		}
		return 0
	})
	return append([]protocol.ProposalState{}, ps...), nil
}

// conversationTitles are the titles of the conversations the caller sees
// (the first page of each status the list covers), by id.
func conversationTitles(ctx context.Context, cl *apiclient.Client) map[string]string {
	out := map[string]string{}
	if page, err := cl.ListConversations(ctx, "", "", 100); err == nil {
		for _, c := range page.Conversations {
			out[c.ID] = orDash(c.Title)
		}
	}
	return out
}

func approvalsListCmd(cfg *config) *cobra.Command {
	var o *output
	c := &cobra.Command{
		Use: "list", Short: "The proposals you may decide, oldest first, with their expiry", Args: cobra.NoArgs,
		Example: `  studio approvals list
  studio approvals list -o json | jq -r '.proposals[].id'`,
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, _ []string) error {
			ps, err := waiting(ctx, cl)
			if err != nil {
				return err
			}
			doc := struct {
				Proposals []protocol.ProposalState `json:"proposals"`
			}{ps}
			return o.emit(out, doc, func(w io.Writer) {
				if len(ps) == 0 {
					fmt.Fprintln(w, "nothing waits for your decision")
					return
				}
				titles := conversationTitles(ctx, cl)
				now := time.Now()
				t := newTable(w, "ID", "WAITING", "EXPIRES", "RISK", "SUMMARY", "PROPOSED BY", "CONVERSATION")
				for _, p := range ps {
					title, ok := titles[p.ConversationID]
					if !ok {
						title = shortID(p.ConversationID)
					}
					t.row(p.ID, now.Sub(protocol.Time(p.CreatedAt)).Truncate(time.Second).String(), expiryWords(p.ExpiresAt, now),
						riskWords(p), truncate(p.Summary, 80), orWord(p.SubmittedBy, "-"), title)
				}
				t.flush()
			})
		}),
	}
	o = addOutput(c)
	return c
}

// riskWords is a proposal's risk, and its impact when it has one.
func riskWords(p protocol.ProposalState) string {
	if p.Impact != "" {
		return p.Risk + ", " + p.Impact
	}
	return p.Risk
}

func approvalsShowCmd(cfg *config) *cobra.Command {
	var o *output
	c := &cobra.Command{
		Use: "show PROPOSAL_ID", Short: "Show a proposal: what it does, the exact command, who proposed it, when it expires", Args: cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(cfg, pendingProposalIDs),
		Example:           `  studio approvals show 7d3e1a2b`,
		RunE: appCmd(cfg, &o, func(ctx context.Context, cl *apiclient.Client, out io.Writer, args []string) error {
			id, err := resolveProposal(ctx, cl, args[0])
			if err != nil {
				return err
			}
			p, err := cl.Proposal(ctx, id)
			if err != nil {
				return err
			}
			return o.emit(out, p, func(w io.Writer) {
				mine := false
				if ps, err := cl.Decidable(ctx); err == nil {
					mine = slices.ContainsFunc(ps, func(q protocol.ProposalState) bool { return q.ID == p.ID })
				}
				proposalFields(w, p, conversationTitles(ctx, cl)[p.ConversationID], mine, time.Now())
			})
		}),
	}
	o = addOutput(c)
	return c
}

// proposalFields is the table form of one proposal: mine says the caller
// may decide it (the commands that do), else who waits for whom.
func proposalFields(w io.Writer, p protocol.ProposalState, title string, mine bool, now time.Time) {
	fmt.Fprintf(w, "%s\n\n", p.Summary)
	kv := []string{"id", p.ID, "status", p.Status, "risk", riskWords(p)}
	if p.Target != nil {
		kv = append(kv, "target", targetWords(p.Target, p.TargetName))
	}
	by, at := "proposed by", "proposed"
	if p.Origin == protocol.ProposalOriginRequest { // a person asked for it directly: no turn proposed it
		by, at = "requested by", "requested"
	}
	kv = append(kv, "conversation", p.ConversationID+" "+title, by, orWord(p.SubmittedBy, "-"), at, when(p.CreatedAt))
	if p.Status == "pending" {
		kv = append(kv, "expires", expiryWords(p.ExpiresAt, now))
	}
	if p.DecidedBy != "" {
		kv = append(kv, "decided by", p.DecidedBy)
	}
	kv = append(kv, "command type", p.CommandType, "hash", p.CommandHash)
	fields(w, kv...)
	cmd := jsontext.Value(append([]byte(nil), p.Command...))
	_ = cmd.Indent()
	fmt.Fprintf(w, "\ncommand:\n%s\n", cmd)
	switch {
	case p.Status != "pending":
	case mine:
		fmt.Fprintf(w, "\nconfirm: studio approvals confirm %s\ndeny:    studio approvals deny %s\n", p.ID, p.ID)
	default:
		fmt.Fprintln(w, "\nIt waits for someone else: your role does not confirm it, or you proposed it and it needs a second person.")
	}
}
