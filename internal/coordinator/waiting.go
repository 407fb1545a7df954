package coordinator

import (
	"context"
	"sync"
	"unicode/utf8"

	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Turns sent while another runs (protocol.WhenBusy): a submission that
// enqueues or interrupts waits in the store behind its conversation's
// active turn (store.SubmitTurn), with no owner and no frame. The
// transaction that ends the active turn makes the first waiting one
// active, claimable by any daemon with a free worker (claims.go), so a
// waiting turn survives restarts and runs on whichever daemon is free;
// an interrupt also cancels the active turn the usual way (CancelTurn).
// Readers see the line as TurnProgress.Waiting, kept here per
// conversation and read again from the store whenever it may have moved.

// waitingLines caches each conversation's line of waiting turns, as last
// read from the store; an entry that is absent is read again.
type waitingLines struct {
	mu sync.Mutex
	m  map[string][]protocol.WaitingTurn
}

// maxWaitingLines bounds the conversations remembered; past it the map
// starts afresh (an entry only saves a read).
const maxWaitingLines = 4096

// forget drops a conversation's line: the next reader reads it again, and
// the conversation's readers are woken.
func (c *Coordinator) lineMoved(convID string) {
	c.lines.mu.Lock()
	delete(c.lines.m, convID)
	c.lines.mu.Unlock()
	c.progressed.Notify(convID)
}

// waitingLine is the conversation's line of waiting turns (nil when none,
// or when the store cannot say: progress is a courtesy).
func (c *Coordinator) waitingLine(ctx context.Context, convID string, fresh bool) []protocol.WaitingTurn {
	c.lines.mu.Lock()
	line, ok := c.lines.m[convID]
	c.lines.mu.Unlock()
	if ok && !fresh {
		return line
	}
	ts, err := c.store.ListWaitingTurns(ctx, convID)
	if err != nil {
		return nil
	}
	line = waitingView(ts)
	c.lines.mu.Lock()
	if c.lines.m == nil || len(c.lines.m) >= maxWaitingLines {
		c.lines.m = make(map[string][]protocol.WaitingTurn)
	}
	c.lines.m[convID] = line
	c.lines.mu.Unlock()
	return line
}

// waitingView is the wire form of the stored line.
func waitingView(ts []store.Turn) []protocol.WaitingTurn {
	var out []protocol.WaitingTurn
	for i, t := range ts {
		out = append(out, protocol.WaitingTurn{RequestID: t.RequestID, Position: i + 1, Preview: preview(t.Instruction),
			Since: protocol.Timestamp(t.CreatedAt), CancelRequested: t.CancelRequestedAt != nil})
	}
	return out
}

// preview is the start of an instruction, at most protocol.PreviewChars
// characters.
func preview(s string) string {
	if utf8.RuneCountInString(s) <= protocol.PreviewChars {
		return s
	}
	r := []rune(s)
	return string(r[:protocol.PreviewChars-1]) + "…"
}

// withLine adds the conversation's line of waiting turns to an active
// turn's progress.
func (c *Coordinator) withLine(ctx context.Context, p *protocol.TurnProgress, convID string, fresh bool) *protocol.TurnProgress {
	if p == nil {
		return nil
	}
	if line := c.waitingLine(ctx, convID, fresh); len(line) > 0 {
		v := *p
		v.Waiting = line
		return &v
	}
	return p
}

// mayInterrupt decides an interrupt before anything is stored: it cancels
// the active turn, so it is asked as a cancel is (cancel_turn), and
// closing a pending proposal another principal's turn made is denying it
// (deny), whichever door the submission came through. A conversation that
// cannot be read is left to the submission (not_found).
func (c *Coordinator) mayInterrupt(ctx context.Context, convID string) error {
	conv, err := c.store.GetConversation(ctx, convID)
	if err != nil {
		return nil
	}
	if err := policy.Ask(ctx, policy.CancelTurn, policy.ConversationOf(conv)); err != nil {
		return err
	}
	pending, err := c.store.ListProposals(ctx, store.ListProposalsParams{ConversationID: convID,
		Statuses: []store.ProposalStatus{store.ProposalPending}, Limit: 100})
	if err != nil {
		return err
	}
	who, _ := protocol.PrincipalFrom(ctx)
	for _, p := range pending {
		if p.SubmittedBy != who.Name {
			if err := policy.Ask(ctx, policy.Deny, policy.ProposalOf(p, conv)); err != nil {
				return err
			}
		}
	}
	return nil
}
