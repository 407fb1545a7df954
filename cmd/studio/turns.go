package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/protocol"
)

// The turn commands of studio operator: send (streams the reply, with a
// status line on a terminal), stream, cancel and ticket, and how a frame
// is printed.

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

// sendOptions are the flags of studio operator send.
type sendOptions struct {
	convID, space, route, project, model, title string
	wait, cancelOnInterrupt                     bool
	whenBusy                                    string
}

func sendCmd(cfg *config) *cobra.Command {
	var so sendOptions
	var o *output
	c := &cobra.Command{
		Use:   `send "INSTRUCTION"`,
		Short: "Submit a turn and print the reply as it streams",
		Long: `send submits a turn and prints the reply as it streams. On a terminal a status line shows what
the turn is doing (queued and its place in line, working, calling a tool, retrying the model and
when, waiting for your confirmation). A turn runs on the
server: Ctrl-C stops following it and says how to cancel it, or cancels it with --cancel-on-interrupt.
While another turn of the conversation runs, send is refused (conflict) unless --when-busy says
otherwise: enqueue waits behind it (and those already waiting), interrupt cancels it and runs next.`,
		Example: `  studio operator send "how many runs failed today?"
  studio operator send --conversation 3f2a... "pause the nightly schedule"
  studio operator send --cancel-on-interrupt "summarize the audit log"
  studio operator send --conversation 3f2a... --when-busy enqueue "and then restart the failed run"
  studio operator send --model local --title "triage" "what failed overnight?"
  studio operator send -o json "show the failed runs" | jq -c 'select(.type == "proposal")'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, err := o.isJSON()
			if err != nil {
				return err
			}
			if so.whenBusy != "" && !slices.Contains(protocol.WhenBusyValues, protocol.WhenBusy(so.whenBusy)) {
				return usageError{fmt.Errorf("--when-busy must be reject, enqueue or interrupt, not %q", so.whenBusy)}
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
			convID, err := so.conversation(ctx, cmd, cl, args[0])
			if err != nil {
				return err
			}
			acc, after, err := so.submit(ctx, cl, convID, args[0])
			if err != nil {
				return err
			}
			status.set(turnQueued)
			if acc.Waiting > 0 {
				status.set(waitingWords(acc.Waiting))
				status.print(func() {
					fmt.Fprintf(cmd.ErrOrStderr(), "turn %s waits behind the running turn (number %d in line)\n", acc.RequestID, acc.Waiting)
				})
			}
			outcome, err := so.follow(ctx, cl, convID, acc, after, status, out, note, asJSON)
			status.stop()
			if err != nil {
				return err
			}
			if outcome == "" && sigCtx.Err() != nil && cmd.Context().Err() == nil {
				return interrupted(cmd, cl, convID, acc.RequestID, so.cancelOnInterrupt)
			}
			if outcome != protocol.OutcomeCompleted {
				return fmt.Errorf("turn %s ended %s", acc.RequestID, outcome)
			}
			return nil
		},
	}
	c.Flags().StringVar(&so.convID, "conversation", "", "conversation id (default: a new one)")
	c.Flags().BoolVar(&so.wait, "wait", false, "keep streaming while a proposal awaits confirmation")
	c.Flags().BoolVar(&so.cancelOnInterrupt, "cancel-on-interrupt", false, "on Ctrl-C, cancel the turn instead of leaving it running on the server")
	c.Flags().StringVar(&so.space, "space", "mission", "the cockpit space you are looking at")
	c.Flags().StringVar(&so.route, "route", "/", "the cockpit route you are looking at")
	c.Flags().StringVar(&so.project, "project", "", "project")
	c.Flags().StringVar(&so.model, "model", "", "the configured model the conversation's turns use from this one on (see studio operator models)")
	c.Flags().StringVar(&so.whenBusy, "when-busy", "", "while another turn of the conversation runs: reject (the default), enqueue (run after it) or interrupt (cancel it, then run)")
	c.Flags().StringVar(&so.title, "title", "", "a new conversation's title (default: the instruction's first words); with --conversation, renames it")
	o = addOutput(c)
	_ = c.RegisterFlagCompletionFunc("conversation", completeWith(cfg, conversationIDs("")))
	_ = c.RegisterFlagCompletionFunc("model", completeWith(cfg, modelNames))
	enumFlag(c, "space", false, spaceValues)
	return c
}

// conversation is the conversation send submits to: --conversation's
// (renamed with --title) or a new one titled after the instruction; with
// --model, its model from this turn on.
func (so sendOptions) conversation(ctx context.Context, cmd *cobra.Command, cl *apiclient.Client, instruction string) (string, error) {
	var convID string
	if so.convID != "" {
		id, err := resolveConversation(ctx, cl, so.convID, false)
		if err != nil {
			return "", err
		}
		convID = id
		if cmd.Flags().Changed("title") {
			if _, err := cl.UpdateConversation(ctx, convID, protocol.UpdateConversationRequest{Title: &so.title}); err != nil {
				return "", err
			}
		}
	} else {
		title := so.title
		if title == "" {
			title = defaultTitle(instruction)
		}
		conv, err := cl.CreateConversation(ctx, protocol.CreateConversationRequest{Title: &title})
		if err != nil {
			return "", err
		}
		convID = conv.ID
		fmt.Fprintln(cmd.ErrOrStderr(), "conversation", convID)
	}
	if cmd.Flags().Changed("model") {
		if _, err := cl.UpdateConversation(ctx, convID, protocol.UpdateConversationRequest{Model: &so.model}); err != nil {
			return "", err
		}
	}
	return convID, nil
}

// submit submits the instruction as the conversation's next turn, after
// its latest frame, with the cockpit context of the flags, as the command
// line's: the answer comes as data, not as navigation. after is where
// following the turn starts: after its instruction, or, for a turn that
// waits behind another, after the latest frame.
func (so sendOptions) submit(ctx context.Context, cl *apiclient.Client, convID, instruction string) (acc protocol.TurnAccepted, after int64, err error) {
	page, err := cl.GetConversation(ctx, convID, 0, 1)
	if err != nil {
		return protocol.TurnAccepted{}, 0, err
	}
	last := page.LatestSequence
	snap := protocol.ContextSnapshot{Space: so.space, Route: so.route}
	if so.project != "" {
		snap.Project = &so.project
	}
	acc, err = cl.SubmitTurn(ctx, convID, protocol.TurnRequest{Instruction: instruction, Context: snap, ExpectedLastSequence: &last,
		Client: protocol.ClientCLI, WhenBusy: protocol.WhenBusy(so.whenBusy)})
	if err != nil || acc.Waiting > 0 {
		return acc, last, err
	}
	return acc, acc.AcceptedSequence, nil
}

// waitingWords is the status line of a turn waiting behind another.
func waitingWords(position int) string {
	return fmt.Sprintf("waiting behind the running turn: number %d in line", position)
}

// follow prints the turn's frames to out as they stream and what it is
// doing on the status line, until it ends or (without --wait) waits for a
// confirmation, which it notes with how to go on. The outcome is "" when
// the stream stopped first (an interrupt).
func (so sendOptions) follow(ctx context.Context, cl *apiclient.Client, convID string, acc protocol.TurnAccepted, after int64, status *spinner, out, note io.Writer, asJSON bool) (protocol.Outcome, error) {
	var outcome protocol.Outcome
	fw := newFrameWriter(out, asJSON, false)
	progress := func(p *protocol.TurnProgress) {
		if p == nil {
			return
		}
		if p.RequestID == acc.RequestID {
			status.set(progressWords(p))
		}
		for _, w := range p.Waiting {
			if w.RequestID == acc.RequestID {
				status.set(waitingWords(w.Position))
			}
		}
	}
	err := cl.FollowProgress(ctx, convID, after, status.reconnecting, progress, func(f protocol.Frame) error {
		if f.RequestID != acc.RequestID {
			return nil
		}
		status.set(turnStateOf(f))
		status.print(func() { fw.write(f) })
		if d, ok := f.Payload.(protocol.DonePayload); ok {
			outcome = d.Outcome
			return apiclient.ErrStopStream
		}
		if c, ok := f.Payload.(protocol.ConfirmationPayload); ok && c.State == protocol.ConfirmationRequired && !so.wait {
			// The turn waits for a human; do not hold the terminal.
			status.print(func() {
				fmt.Fprintf(note, "The turn waits for a decision on proposal %s; after it, follow the turn with: studio operator stream --conversation %s --after %d\n",
					shortID(c.ProposalID), convID, f.Sequence)
			})
			outcome = protocol.OutcomeCompleted
			return apiclient.ErrStopStream
		}
		return nil
	})
	return outcome, err
}

// interrupted handles Ctrl-C during send: the turn goes on unless asked to
// cancel it; either way the user learns what happened and what to do.
func interrupted(cmd *cobra.Command, cl *apiclient.Client, convID, requestID string, cancel bool) error {
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
			cl, convID, err := conversationClient(cmd.Context(), cfg, convID)
			if err != nil {
				return err
			}
			fw := newFrameWriter(cmd.OutOrStdout(), raw, true)
			err = cl.Follow(cmd.Context(), convID, after, reconnecting(cmd), func(f protocol.Frame) error {
				fw.write(f)
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
	_ = c.RegisterFlagCompletionFunc("conversation", completeWith(cfg, conversationIDs("")))
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
			cl, convID, err := conversationClient(cmd.Context(), cfg, convID)
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
	_ = c.RegisterFlagCompletionFunc("conversation", completeWith(cfg, conversationIDs("")))
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
			cl, convID, err := conversationClient(cmd.Context(), cfg, convID)
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
	_ = c.RegisterFlagCompletionFunc("conversation", completeWith(cfg, conversationIDs("")))
	return c
}
