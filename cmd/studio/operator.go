package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/protocol"
)

// operatorClient builds the API client from --server and the token.
// operatorClient checks the output format, then connects: a bad -o is
// refused before any request.
func (o *output) operatorClient(cfg *config) (*httpapi.Client, error) {
	if _, err := o.isJSON(); err != nil {
		return nil, err
	}
	return operatorClient(cfg)
}

func operatorClient(cfg *config) (*httpapi.Client, error) {
	token := cfg.token
	if token == "" {
		var err error
		if token, err = clientToken(cfg); err != nil {
			return nil, err
		}
	} else {
		cfg.tokenSource = "the --token flag"
	}
	server := cfg.server
	if server == "" {
		server = "http://" + cfg.addr
	}
	cl := httpapi.NewClient(server, token, nil)
	cl.UserAgent = httpapi.CLIUserAgent + readVersion().Version
	return cl, nil
}

func newOperatorCmd(cfg *config) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Talk to a running daemon's operator: conversations, turns, streams",
		Example: `  studio operator send "show the failed runs"
  studio operator conversations list -o json
  studio operator proposals
  studio operator confirm PROPOSAL_ID`,
	}
	convs := &cobra.Command{Use: "conversations", Aliases: []string{"conv"}, Short: "Create, list, show, archive and delete conversations"}
	convs.AddCommand(convCreateCmd(cfg), convListCmd(cfg), convShowCmd(cfg), convArchiveCmd(cfg, true), convArchiveCmd(cfg, false),
		convRenameCmd(cfg), convDeleteCmd(cfg), convRestoreCmd(cfg), convPinCmd(cfg, true), convPinCmd(cfg, false),
		convModelCmd(cfg), convSearchCmd(cfg))
	cmd.AddCommand(convs, sendCmd(cfg), streamCmd(cfg), cancelCmd(cfg), ticketCmd(cfg), newLoadCmd(cfg),
		proposalsCmd(cfg), confirmCmd(cfg), denyCmd(cfg), forkCmd(cfg), modelsCmd(cfg))
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
	var o *output
	c := &cobra.Command{
		Use: "create", Short: "Create a conversation", Args: cobra.NoArgs,
		Example: `  studio operator conversations create --title "nightly triage"
  id=$(studio operator conversations create -o json | jq -r .id)`,
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
			return o.emit(cmd.OutOrStdout(), conv, func(w io.Writer) { conversationFields(w, conv) })
		},
	}
	o = addOutput(c)
	c.Flags().StringVar(&title, "title", "", "title")
	c.Flags().StringVar(&project, "project", "", "project")
	return c
}

func convListCmd(cfg *config) *cobra.Command {
	var status string
	var o *output
	c := &cobra.Command{
		Use: "list", Short: "List conversations, pinned first, then newest first", Args: cobra.NoArgs,
		Example: `  studio operator conversations list
  studio operator conversations list --status archived -o json`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := o.operatorClient(cfg)
			if err != nil {
				return err
			}
			if err := oneOf("status", status, false, "active", "archived", "deleted"); err != nil {
				return err
			}
			all := protocol.ConversationList{Conversations: []protocol.Conversation{}}
			cursor := ""
			for {
				page, err := cl.ListConversations(cmd.Context(), status, cursor, 100)
				if err != nil {
					return err
				}
				all.Conversations = append(all.Conversations, page.Conversations...)
				if page.NextCursor == "" {
					break
				}
				cursor = page.NextCursor
			}
			return o.emit(cmd.OutOrStdout(), all, func(w io.Writer) { conversationTable(w, all.Conversations) })
		},
	}
	o = addOutput(c)
	c.Flags().StringVar(&status, "status", "", "active, archived, or deleted (those still recoverable); default active and archived")
	return c
}

// conversationFields is the table form of one conversation.
func conversationFields(w io.Writer, c protocol.Conversation) {
	fields(w, "id", c.ID, "title", orDash(c.Title), "project", orDash(c.Project), "status", c.Status,
		"last sequence", fmt.Sprint(c.LastSequence), "active turn", orDash(c.ActiveRequestID), "created", when(c.CreatedAt))
}

// when formats a wire timestamp (Unix seconds) for people, in UTC.
func when(ts float64) string {
	if ts == 0 {
		return "-"
	}
	return protocol.Time(ts).Format(time.RFC3339)
}

// ago formats a wire timestamp as the time since then.
func ago(ts float64) string {
	if ts == 0 {
		return "-"
	}
	return time.Since(protocol.Time(ts)).Truncate(time.Second).String() + " ago"
}

func convShowCmd(cfg *config) *cobra.Command {
	var after int64
	var o *output
	c := &cobra.Command{
		Use: "show ID", Short: "Show a conversation and its frames", Args: cobra.ExactArgs(1),
		Example: `  studio operator conversations show 3f2a...    # the transcript
  studio operator conversations show 3f2a... -o json --after 10`,
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, err := o.isJSON()
			if err != nil {
				return err
			}
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			id, err := resolveConversation(cmd.Context(), cl, args[0], false)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			doc := struct {
				Conversation protocol.Conversation `json:"conversation"`
				Frames       []protocol.RawFrame   `json:"frames"`
			}{Frames: []protocol.RawFrame{}}
			first := true
			for {
				page, err := cl.GetConversation(cmd.Context(), id, after, 500)
				if err != nil {
					return err
				}
				if first {
					first = false
					doc.Conversation = page.Conversation
					if !asJSON {
						conversationFields(out, page.Conversation)
					}
				}
				for _, rf := range page.Frames {
					if asJSON {
						doc.Frames = append(doc.Frames, rf)
						continue
					}
					b, _ := protocol.Marshal(rf)
					f, err := protocol.DecodeFrame(b)
					if err != nil {
						return err
					}
					printFrame(out, f, false)
				}
				if !page.HasMore {
					break
				}
				after = page.NextAfterSequence
			}
			if asJSON {
				return printJSON(out, doc)
			}
			fmt.Fprintln(out)
			return nil
		},
	}
	o = addOutput(c)
	c.Flags().Int64Var(&after, "after", 0, "start after this sequence")
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
	var o *output
	c := &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(nargs),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			id, err := resolveConversation(cmd.Context(), cl, args[0], false)
			if err != nil {
				return err
			}
			conv, err := cl.UpdateConversation(cmd.Context(), id, req(args))
			if err != nil {
				return err
			}
			return o.emit(cmd.OutOrStdout(), conv, func(w io.Writer) { conversationFields(w, conv) })
		},
	}
	o = addOutput(c)
	return c
}

func convDeleteCmd(cfg *config) *cobra.Command {
	var o *output
	c := &cobra.Command{
		Use: "delete ID", Short: "Delete a conversation (purged later by maintenance)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			id, err := resolveConversation(cmd.Context(), cl, args[0], false)
			if err != nil {
				return err
			}
			conv, err := cl.DeleteConversation(cmd.Context(), id)
			if err != nil {
				return err
			}
			return o.emit(cmd.OutOrStdout(), conv, func(w io.Writer) { fmt.Fprintln(w, "deleted", conv.ID) })
		},
	}
	o = addOutput(c)
	return c
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

// defaultTitle is a new conversation's title from its first instruction:
// the first words, at most about 60 characters.
func defaultTitle(instruction string) string {
	var b strings.Builder
	for i, w := range strings.Fields(instruction) {
		if i == 8 || (b.Len() > 0 && b.Len()+1+len(w) > 60) {
			b.WriteString(" …")
			break
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	return truncate(b.String(), 60)
}

func sendCmd(cfg *config) *cobra.Command {
	var convID, space, route, project, model, title string
	var wait, cancelOnInterrupt bool
	var o *output
	c := &cobra.Command{
		Use:   `send "INSTRUCTION"`,
		Short: "Submit a turn and print the reply as it streams",
		Long: `send submits a turn and prints the reply as it streams. On a terminal a status line shows what
the turn is doing (queued and its place in line, working, calling a tool, retrying the model and
when, waiting for your confirmation). A turn runs on the
server: Ctrl-C stops following it and says how to cancel it, or cancels it with --cancel-on-interrupt.`,
		Example: `  studio operator send "how many runs failed today?"
  studio operator send --conversation 3f2a... "pause the nightly schedule"
  studio operator send --cancel-on-interrupt "summarize the audit log"
  studio operator send --model local --title "triage" "what failed overnight?"
  studio operator send -o json "show the failed runs" | jq -c 'select(.type == "proposal")'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, err := o.isJSON()
			if err != nil {
				return err
			}
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			sigCtx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			ctx := sigCtx
			// With -o json stdout carries only frames, one JSON object a
			// line; the status line and notes stay on stderr (none when
			// stderr is not a terminal, as always).
			status := newSpinner(cmd.ErrOrStderr())
			defer status.stop()
			out := status.output(cmd.OutOrStdout())
			note := out
			if asJSON {
				note = cmd.ErrOrStderr()
			}
			if convID != "" {
				if convID, err = resolveConversation(ctx, cl, convID, false); err != nil {
					return err
				}
				if cmd.Flags().Changed("title") {
					if _, err := cl.UpdateConversation(ctx, convID, protocol.UpdateConversationRequest{Title: &title}); err != nil {
						return err
					}
				}
			} else {
				if title == "" {
					title = defaultTitle(args[0])
				}
				conv, err := cl.CreateConversation(ctx, protocol.CreateConversationRequest{Title: &title})
				if err != nil {
					return err
				}
				convID = conv.ID
				fmt.Fprintln(cmd.ErrOrStderr(), "conversation", convID)
			}
			if cmd.Flags().Changed("model") {
				if _, err := cl.UpdateConversation(ctx, convID, protocol.UpdateConversationRequest{Model: &model}); err != nil {
					return err
				}
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
			status.set(turnQueued)
			var outcome protocol.Outcome
			progress := func(p *protocol.TurnProgress) {
				if p != nil && p.RequestID == acc.RequestID {
					status.set(progressWords(p))
				}
			}
			err = cl.FollowProgress(ctx, convID, acc.AcceptedSequence, status.reconnecting, progress, func(f protocol.Frame) error {
				if f.RequestID != acc.RequestID {
					return nil
				}
				status.set(turnStateOf(f))
				status.print(func() { printFrame(out, f, asJSON) })
				if d, ok := f.Payload.(protocol.DonePayload); ok {
					outcome = d.Outcome
					return httpapi.ErrStopStream
				}
				if c, ok := f.Payload.(protocol.ConfirmationPayload); ok && c.State == protocol.ConfirmationRequired && !wait {
					// The turn waits for a human; do not hold the terminal.
					status.print(func() {
						fmt.Fprintf(note, "\nwaiting for confirmation: studio operator confirm %s (or deny); follow with: studio operator stream --conversation %s --after %d\n",
							c.ProposalID, convID, f.Sequence)
					})
					outcome = protocol.OutcomeCompleted
					return httpapi.ErrStopStream
				}
				return nil
			})
			status.stop()
			if err != nil {
				return err
			}
			if outcome == "" && sigCtx.Err() != nil && cmd.Context().Err() == nil {
				return interrupted(cmd, cl, convID, acc.RequestID, cancelOnInterrupt)
			}
			if outcome != protocol.OutcomeCompleted {
				return fmt.Errorf("turn %s ended %s", acc.RequestID, outcome)
			}
			return nil
		},
	}
	c.Flags().StringVar(&convID, "conversation", "", "conversation id (default: a new one)")
	c.Flags().BoolVar(&wait, "wait", false, "keep streaming while a proposal awaits confirmation")
	c.Flags().BoolVar(&cancelOnInterrupt, "cancel-on-interrupt", false, "on Ctrl-C, cancel the turn instead of leaving it running on the server")
	c.Flags().StringVar(&space, "space", "mission", "the cockpit space you are looking at")
	c.Flags().StringVar(&route, "route", "/", "the cockpit route you are looking at")
	c.Flags().StringVar(&project, "project", "", "project")
	c.Flags().StringVar(&model, "model", "", "the configured model the conversation's turns use from this one on (see studio operator models)")
	c.Flags().StringVar(&title, "title", "", "a new conversation's title (default: the instruction's first words); with --conversation, renames it")
	o = addOutput(c)
	return c
}

// interrupted handles Ctrl-C during send: the turn goes on unless asked to
// cancel it; either way the user learns what happened and what to do.
func interrupted(cmd *cobra.Command, cl *httpapi.Client, convID, requestID string, cancel bool) error {
	errw := cmd.ErrOrStderr()
	if !cancel {
		fmt.Fprintf(errw, "\ninterrupted: the turn continues on the server.\n  follow it: studio operator stream --conversation %s\n  cancel it: studio operator cancel --conversation %s %s\n",
			convID, convID, requestID)
		return exitError{exitInterrupted, errors.New("interrupted")}
	}
	ctx, done := context.WithTimeout(context.Background(), 15*time.Second)
	defer done()
	t, err := cl.Cancel(ctx, convID, requestID)
	if err != nil {
		return fmt.Errorf("interrupted; cancelling turn %s failed: %w", requestID, err)
	}
	fmt.Fprintf(errw, "\ninterrupted: cancelled turn %s (now %s)\n", requestID, t.Status)
	return exitError{exitInterrupted, errors.New("interrupted")}
}

func streamCmd(cfg *config) *cobra.Command {
	var convID string
	var after int64
	var raw bool
	c := &cobra.Command{
		Use: "stream", Short: "Follow a conversation's frames from a cursor", Args: cobra.NoArgs,
		Example: `  studio operator stream --conversation 3f2a... --after 12
  studio operator stream --conversation 3f2a... --json | jq .type`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			convID, err := resolveConversation(cmd.Context(), cl, convID, false)
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
	var o *output
	c := &cobra.Command{
		Use: "cancel REQUEST_ID", Short: "Cancel a turn (idempotent)", Args: cobra.ExactArgs(1),
		Example: `  studio operator cancel --conversation 3f2a... 9b1c...`,
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			convID, err := resolveConversation(cmd.Context(), cl, convID, false)
			if err != nil {
				return err
			}
			t, err := cl.Cancel(cmd.Context(), convID, args[0])
			if err != nil {
				return err
			}
			return o.emit(cmd.OutOrStdout(), t, func(w io.Writer) {
				fields(w, "turn", t.RequestID, "conversation", t.ConversationID, "status", t.Status, "error code", orDash(t.ErrorCode))
			})
		},
	}
	o = addOutput(c)
	c.Flags().StringVar(&convID, "conversation", "", "conversation id")
	_ = c.MarkFlagRequired("conversation")
	return c
}

func ticketCmd(cfg *config) *cobra.Command {
	var convID string
	var after int64
	var o *output
	c := &cobra.Command{
		Use: "ticket", Short: "Issue a one-use 60-second stream ticket", Args: cobra.NoArgs,
		Example: `  studio operator ticket --conversation 3f2a... --after 0 -o json`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := operatorClient(cfg)
			if err != nil {
				return err
			}
			convID, err := resolveConversation(cmd.Context(), cl, convID, false)
			if err != nil {
				return err
			}
			t, err := cl.CreateTicket(cmd.Context(), protocol.StreamTicketRequest{ConversationID: convID, AfterSequence: after})
			if err != nil {
				return err
			}
			return o.emit(cmd.OutOrStdout(), t, func(w io.Writer) { fields(w, "ticket", t.Ticket, "expires", when(t.ExpiresAt)) })
		},
	}
	o = addOutput(c)
	c.Flags().StringVar(&convID, "conversation", "", "conversation id")
	c.Flags().Int64Var(&after, "after", 0, "the cursor the ticket is for")
	_ = c.MarkFlagRequired("conversation")
	return c
}

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
			if err := oneOf("status", status, true, strings.Split(allProposalStatuses, ",")...); err != nil {
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
		Example: `  studio operator deny 7d3e...`,
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
