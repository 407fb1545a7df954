package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/protocol"
)

// operatorClient builds the API client from --server and the token.
func operatorClient(cfg *config) (*httpapi.Client, error) {
	token, err := clientToken(cfg.dataDir)
	if err != nil {
		return nil, err
	}
	server := cfg.server
	if server == "" {
		server = "http://" + cfg.addr
	}
	return httpapi.NewClient(server, token, nil), nil
}

func newOperatorCmd(cfg *config) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Talk to a running daemon's operator: conversations, turns, streams",
	}
	cmd.PersistentFlags().StringVar(&cfg.server, "server", envOr("STUDIO_URL", ""), "daemon URL (env STUDIO_URL; default http://<addr>)")
	convs := &cobra.Command{Use: "conversations", Aliases: []string{"conv"}, Short: "Create, list, show, archive and delete conversations"}
	convs.AddCommand(convCreateCmd(cfg), convListCmd(cfg), convShowCmd(cfg), convArchiveCmd(cfg, true), convArchiveCmd(cfg, false),
		convRenameCmd(cfg), convDeleteCmd(cfg))
	cmd.AddCommand(convs, sendCmd(cfg), streamCmd(cfg), cancelCmd(cfg), ticketCmd(cfg), newLoadCmd(cfg),
		proposalsCmd(cfg), confirmCmd(cfg), denyCmd(cfg))
	return cmd
}

func printJSON(w io.Writer, v any) error {
	b, err := protocol.Marshal(v)
	if err != nil {
		return err
	}
	v2 := jsontext.Value(b)
	_ = v2.Indent()
	_, err = fmt.Fprintln(w, string(v2))
	return err
}

func convCreateCmd(cfg *config) *cobra.Command {
	var title, project string
	c := &cobra.Command{
		Use: "create", Short: "Create a conversation", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			var req protocol.CreateConversationRequest
			if title != "" {
				req.Title = &title
			}
			if project != "" {
				req.Project = &project
			}
			conv, err := cl.CreateConversation(cmd.Context(), req)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), conv)
		},
	}
	c.Flags().StringVar(&title, "title", "", "title")
	c.Flags().StringVar(&project, "project", "", "project")
	return c
}

func convListCmd(cfg *config) *cobra.Command {
	var status string
	c := &cobra.Command{
		Use: "list", Short: "List conversations, newest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			cursor := ""
			for {
				page, err := cl.ListConversations(cmd.Context(), status, cursor, 100)
				if err != nil {
					return err
				}
				for _, c := range page.Conversations {
					title := "(untitled)"
					if c.Title != nil {
						title = *c.Title
					}
					active := ""
					if c.ActiveRequestID != nil {
						active = " turn " + *c.ActiveRequestID + " active"
					}
					fmt.Fprintf(out, "%s  %-8s  seq %-5d  %s%s\n", c.ID, c.Status, c.LastSequence, title, active)
				}
				if page.NextCursor == "" {
					return nil
				}
				cursor = page.NextCursor
			}
		},
	}
	c.Flags().StringVar(&status, "status", "", "active or archived (default both)")
	return c
}

func convShowCmd(cfg *config) *cobra.Command {
	var after int64
	var raw bool
	c := &cobra.Command{
		Use: "show ID", Short: "Show a conversation and its frames", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			first := true
			for {
				page, err := cl.GetConversation(cmd.Context(), args[0], after, 500)
				if err != nil {
					return err
				}
				if first {
					first = false
					if err := printJSON(out, page.Conversation); err != nil {
						return err
					}
				}
				for _, rf := range page.Frames {
					b, _ := protocol.Marshal(rf)
					f, err := protocol.DecodeFrame(b)
					if err != nil {
						return err
					}
					printFrame(out, f, raw)
				}
				if !page.HasMore {
					return nil
				}
				after = page.NextAfterSequence
			}
		},
	}
	c.Flags().Int64Var(&after, "after", 0, "start after this sequence")
	c.Flags().BoolVar(&raw, "json", false, "print frames as JSON lines")
	return c
}

func convArchiveCmd(cfg *config, archive bool) *cobra.Command {
	use, status := "archive ID", "archived"
	if !archive {
		use, status = "unarchive ID", "active"
	}
	return convUpdateCmd(cfg, use, "Set a conversation "+status, 1, func([]string) protocol.UpdateConversationRequest {
		return protocol.UpdateConversationRequest{Status: &status}
	})
}

func convRenameCmd(cfg *config) *cobra.Command {
	return convUpdateCmd(cfg, "rename ID TITLE", "Rename a conversation", 2, func(args []string) protocol.UpdateConversationRequest {
		return protocol.UpdateConversationRequest{Title: &args[1]}
	})
}

// convUpdateCmd PATCHes the conversation named by the first argument.
func convUpdateCmd(cfg *config, use, short string, nargs int, req func(args []string) protocol.UpdateConversationRequest) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(nargs),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			conv, err := cl.UpdateConversation(cmd.Context(), args[0], req(args))
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), conv)
		},
	}
}

func convDeleteCmd(cfg *config) *cobra.Command {
	return &cobra.Command{
		Use: "delete ID", Short: "Delete a conversation (purged later by maintenance)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			if _, err := cl.DeleteConversation(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "deleted", args[0])
			return nil
		},
	}
}

// printFrame writes one frame for a human, or as a JSON line.
func printFrame(w io.Writer, f protocol.Frame, raw bool) {
	if raw {
		b, _ := protocol.EncodeFrame(f)
		fmt.Fprintln(w, string(b))
		return
	}
	switch p := f.Payload.(type) {
	case protocol.TextPayload:
		if p.Role == protocol.RoleUser {
			fmt.Fprintf(w, "\n[%d] > %s\n", f.Sequence, p.Content)
		} else {
			fmt.Fprint(w, p.Content)
		}
	case protocol.ToolCallPayload:
		fmt.Fprintf(w, "\n[%d] tool %s %s (%s)\n", f.Sequence, p.Tool, string(p.Arguments), p.Mode)
	case protocol.ToolResultPayload:
		if p.OK {
			fmt.Fprintf(w, "[%d] tool result ok %s\n", f.Sequence, truncate(string(p.Result), 200))
		} else {
			fmt.Fprintf(w, "[%d] tool result %s: %s\n", f.Sequence, p.Error.Code, p.Error.Message)
		}
	case protocol.UICommandPayload:
		b, _ := protocol.Marshal(p.Effect)
		fmt.Fprintf(w, "\n[%d] effect %s requested: %s\n", f.Sequence, p.EffectID, b)
	case protocol.ProposalPayload:
		fmt.Fprintf(w, "\n[%d] PROPOSAL %s (%s): %s\n      confirm: studio operator confirm %s\n", f.Sequence, p.Proposal.ID, p.Proposal.Risk, p.Proposal.Summary, p.Proposal.ID)
	case protocol.ConfirmationPayload:
		fmt.Fprintf(w, "[%d] proposal %s %s\n", f.Sequence, p.ProposalID, p.State)
	case protocol.ErrorPayload:
		fmt.Fprintf(w, "\n[%d] error %s: %s\n", f.Sequence, p.Error.Code, p.Error.Message)
	case protocol.DonePayload:
		fmt.Fprintf(w, "\n[%d] done: %s\n", f.Sequence, p.Outcome)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func sendCmd(cfg *config) *cobra.Command {
	var convID, space, route, project string
	var wait bool
	c := &cobra.Command{
		Use:   `send "INSTRUCTION"`,
		Short: "Submit a turn and print the reply as it streams",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			if convID == "" {
				conv, err := cl.CreateConversation(ctx, protocol.CreateConversationRequest{})
				if err != nil {
					return err
				}
				convID = conv.ID
				fmt.Fprintln(cmd.ErrOrStderr(), "conversation", convID)
			}
			page, err := cl.GetConversation(ctx, convID, 0, 1)
			if err != nil {
				return err
			}
			last := page.LatestSequence
			snap := protocol.ContextSnapshot{Space: space, Route: route}
			if project != "" {
				snap.Project = &project
			}
			acc, err := cl.SubmitTurn(ctx, convID, protocol.TurnRequest{Instruction: args[0], Context: snap, ExpectedLastSequence: &last})
			if err != nil {
				return err
			}
			var outcome protocol.Outcome
			err = cl.Follow(ctx, convID, acc.AcceptedSequence, reconnecting(cmd), func(f protocol.Frame) error {
				if f.RequestID != acc.RequestID {
					return nil
				}
				printFrame(out, f, false)
				if d, ok := f.Payload.(protocol.DonePayload); ok {
					outcome = d.Outcome
					return httpapi.ErrStopStream
				}
				if c, ok := f.Payload.(protocol.ConfirmationPayload); ok && c.State == protocol.ConfirmationRequired && !wait {
					// The turn waits for a human; do not hold the terminal.
					fmt.Fprintf(out, "\nwaiting for confirmation: studio operator confirm %s (or deny); follow with: studio operator stream --conversation %s --after %d\n",
						c.ProposalID, convID, f.Sequence)
					outcome = protocol.OutcomeCompleted
					return httpapi.ErrStopStream
				}
				return nil
			})
			if err != nil {
				return err
			}
			if outcome != protocol.OutcomeCompleted {
				return fmt.Errorf("turn %s ended %s", acc.RequestID, outcome)
			}
			return nil
		},
	}
	c.Flags().StringVar(&convID, "conversation", "", "conversation id (default: a new one)")
	c.Flags().BoolVar(&wait, "wait", false, "keep streaming while a proposal awaits confirmation")
	c.Flags().StringVar(&space, "space", "mission", "the cockpit space you are looking at")
	c.Flags().StringVar(&route, "route", "/", "the cockpit route you are looking at")
	c.Flags().StringVar(&project, "project", "", "project")
	return c
}

func streamCmd(cfg *config) *cobra.Command {
	var convID string
	var after int64
	var raw bool
	c := &cobra.Command{
		Use: "stream", Short: "Follow a conversation's frames from a cursor", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			err = cl.Follow(cmd.Context(), convID, after, reconnecting(cmd), func(f protocol.Frame) error {
				printFrame(out, f, raw)
				return nil
			})
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
	}
	c.Flags().StringVar(&convID, "conversation", "", "conversation id")
	c.Flags().Int64Var(&after, "after", 0, "replay frames after this sequence")
	c.Flags().BoolVar(&raw, "json", false, "print frames as JSON lines")
	_ = c.MarkFlagRequired("conversation")
	return c
}

// reconnecting tells the user the stream dropped and when it resumes.
func reconnecting(cmd *cobra.Command) func(error, time.Duration) {
	return func(err error, wait time.Duration) {
		fmt.Fprintf(cmd.ErrOrStderr(), "stream interrupted (%v); reconnecting from the cursor in %s\n", err, wait)
	}
}

func cancelCmd(cfg *config) *cobra.Command {
	var convID string
	c := &cobra.Command{
		Use: "cancel REQUEST_ID", Short: "Cancel a turn (idempotent)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			t, err := cl.Cancel(cmd.Context(), convID, args[0])
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), t)
		},
	}
	c.Flags().StringVar(&convID, "conversation", "", "conversation id")
	_ = c.MarkFlagRequired("conversation")
	return c
}

func ticketCmd(cfg *config) *cobra.Command {
	var convID string
	var after int64
	c := &cobra.Command{
		Use: "ticket", Short: "Issue a one-use 60-second stream ticket", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			t, err := cl.CreateTicket(cmd.Context(), protocol.StreamTicketRequest{ConversationID: convID, AfterSequence: after})
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), t)
		},
	}
	c.Flags().StringVar(&convID, "conversation", "", "conversation id")
	c.Flags().Int64Var(&after, "after", 0, "the cursor the ticket is for")
	_ = c.MarkFlagRequired("conversation")
	return c
}

func proposalsCmd(cfg *config) *cobra.Command {
	var status string
	c := &cobra.Command{
		Use: "proposals", Short: "List proposals awaiting confirmation (summary, risk, target, time left)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			ps, err := cl.Proposals(cmd.Context(), status)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if len(ps) == 0 {
				fmt.Fprintln(out, "no proposals")
				return nil
			}
			now := float64(time.Now().UnixMicro()) / 1e6
			for _, p := range ps {
				left := "expired"
				if d := time.Duration((p.ExpiresAt - now) * float64(time.Second)); d > 0 && p.Status == "pending" {
					left = d.Truncate(time.Second).String() + " left"
				} else if p.Status != "pending" {
					left = p.Status
				}
				fmt.Fprintf(out, "%s  %-7s  %-12s  %s\n    target %s  conversation %s\n", p.ID, p.Risk, left, p.Summary, targetString(p.Target), p.ConversationID)
			}
			return nil
		},
	}
	c.Flags().StringVar(&status, "status", "pending", "statuses, comma separated (pending, executing, succeeded, failed, expired, cancelled, conflict)")
	return c
}

func targetString(t *protocol.ResourceVersion) string {
	if t == nil {
		return "(none)"
	}
	return fmt.Sprintf("%s %s version %s", t.Kind, t.ID, t.Version)
}

func confirmCmd(cfg *config) *cobra.Command {
	var yes bool
	c := &cobra.Command{
		Use: "confirm PROPOSAL_ID", Short: "Confirm a proposal: shows the exact command, hash and target, asks unless --yes", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			p, err := cl.Proposal(ctx, args[0])
			if err != nil {
				return err
			}
			cmdJSON := jsontext.Value(append([]byte(nil), p.Command...))
			_ = cmdJSON.Indent()
			fmt.Fprintf(out, "%s (%s)\ncommand %s:\n%s\nhash    %s\ntarget  %s\nstatus  %s\n", p.Summary, p.Risk, p.CommandType,
				cmdJSON, p.CommandHash, targetString(p.Target), p.Status)
			if p.Status != "pending" {
				return fmt.Errorf("proposal %s is %s, not pending", p.ID, p.Status)
			}
			if !yes {
				fmt.Fprint(out, "Confirm and execute? [y/N] ")
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
			if err := printJSON(out, res); err != nil {
				return err
			}
			if res.Status != "succeeded" {
				return fmt.Errorf("proposal %s", res.Status)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&yes, "yes", false, "confirm without asking")
	return c
}

func denyCmd(cfg *config) *cobra.Command {
	return &cobra.Command{
		Use: "deny PROPOSAL_ID", Short: "Deny a pending proposal", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			p, err := cl.Proposal(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			res, err := cl.Deny(cmd.Context(), p.ConversationID, p.ID)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), res)
		},
	}
}
