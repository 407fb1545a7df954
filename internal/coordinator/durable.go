package coordinator

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Riding out the database. A turn's writes — its frames, its proposals'
// transitions, the execution of a confirmed command and the recording of
// its outcome — go through durable (appender.go: after the turn's
// frames settle) and durableWrite: a write that fails because the
// database is unavailable for now (store.Transient: a restart, a failover,
// a lock held by a paused daemon) is tried again with a capped backoff for
// up to Config.OutageBudget before the turn gives up, and meanwhile the
// turn's progress says so (database_unavailable), for the dock and the
// CLI. A write refused for good (a conflict, a fence) is not retried.
//
// A write whose COMMIT went unanswered may have landed: before it is tried
// again, what it wrote is looked for (landed), so a retry never writes a
// frame twice; a command's execution is made at most once by its fence
// (store.Fence.Execute).

// Defaults of the outage handling.
const (
	DefaultOutageBudget = 60 * time.Second
	// DefaultCallTimeout is Config.CallTimeout's default: one try of a
	// write, one read.
	DefaultCallTimeout = 30 * time.Second
)

// call is ctx bounded by the deadline of one database call.
func (c *Coordinator) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.CallTimeout)
}

// durableWrite is durable without settling the turn's frames first.
func (o *owner) durableWrite(what string, write func(ctx context.Context) error, landed func(ctx context.Context) (bool, error)) error {
	return o.durableTry(what, write, landed, false)
}

func (o *owner) durableTry(what string, write func(ctx context.Context) error, landed func(ctx context.Context) (bool, error), leased bool) error {
	c := o.c
	start := time.Now()
	wait := c.cfg.OutageBackoff
	var unsure bool
	reported := false
	defer func() {
		if reported {
			o.restoreProgress()
		}
	}()
	for attempt := 1; ; attempt++ {
		if leased {
			if pe := c.leaseErr(); pe != nil && !unsure {
				return pe
			}
		}
		o.lapsed() // a decision waiting on this write is answered once the lease lapses
		ctx, cancel := c.call(context.WithoutCancel(o.ctx))
		var err error
		if unsure && landed != nil {
			var ok bool
			if ok, err = landed(ctx); err == nil && ok {
				cancel()
				return nil
			}
		}
		if err == nil {
			err = write(ctx)
		}
		cancel()
		if err == nil || !store.Transient(err) {
			return err
		}
		unsure = unsure || store.IsCommitUnknown(err)
		if time.Since(start)+wait > c.cfg.OutageBudget {
			c.log.Error(what+": the database stayed unavailable; giving up", "conversation", o.turn.ConversationID, "request", o.turn.RequestID, "attempts", attempt,
				"budget", c.cfg.OutageBudget, "err", err)
			return err
		}
		c.log.Warn(what+": the database is unavailable; retrying", "conversation", o.turn.ConversationID, "request", o.turn.RequestID, "attempt", attempt, "wait", wait, "err", err)
		if !reported {
			o.saveProgress()
			reported = true
		}
		o.report(protocol.ProgressDatabaseUnavailable, func(p *protocol.TurnProgress) {
			p.Attempt, p.ErrorCode, p.RetryAt = attempt+1, protocol.ServiceFailure, protocol.Timestamp(c.now().Add(wait))
		})
		if !o.outageWait(wait) {
			return err
		}
		wait = min(2*wait, store.MaxOutageBackoff)
	}
}

// lapsed answers the decision being applied at once when this daemon can
// no longer prove its lease (answerOnLapse): its client may take it to
// another daemon, while this owner goes on with what it started.
func (o *owner) lapsed() {
	if o.onLapse != nil {
		o.onLapse()
	}
}

// answerOnLapse sets how r, the decision being applied, is answered if
// the lease cannot be proven while it waits on the database (lapsed); the
// answer uses the refusal. The returned func unsets it. r answered so
// has no reply left: whatever the owner answers later goes nowhere.
func (o *owner) answerOnLapse(r *decisionRequest, answer func(pe *protocol.Error) (protocol.ProposalResult, error)) func() {
	o.onLapse = func() {
		if r.reply == nil {
			return
		}
		pe := o.c.leaseErr()
		if pe == nil {
			return
		}
		res, err := answer(pe)
		r.answer(res, err)
		r.reply = nil
	}
	return func() { o.onLapse = nil }
}

// outageWait waits d before the next try of a write; false when the
// shutdown's deadline passed or, while the turn talks to the model, a
// cancel came (the turn then ends cancelled). Executing a command and
// ending the turn are not interrupted: they finish what they started, and
// a cancel is answered when they did.
func (o *owner) outageWait(d time.Duration) bool {
	interruptible := o.phase == phaseRunning
	timer := time.NewTimer(d)
	defer timer.Stop()
	var lease <-chan time.Time // while a decision waits: its answer once the lease lapses
	if o.onLapse != nil {
		t := time.NewTicker(leaseLook)
		defer t.Stop()
		lease = t.C
	}
	for {
		select {
		case <-lease:
			o.lapsed()
		case <-timer.C:
			return true
		case <-o.c.abandon:
			return false
		case <-o.box.sig:
			o.takeCancels(!interruptible && o.phase != phaseEnding)
			o.answerStaleDecisions()
			if interruptible && o.cancelWanted {
				return false
			}
		}
	}
}

// saveProgress keeps the progress a database outage interrupts, and
// restoreProgress puts it back when the outage is over.
func (o *owner) saveProgress() {
	o.prog.mu.Lock()
	o.prog.saved = o.prog.v
	o.prog.mu.Unlock()
}

func (o *owner) restoreProgress() {
	o.prog.mu.Lock()
	if o.prog.v.State == protocol.ProgressDatabaseUnavailable {
		o.prog.v = o.prog.saved
	}
	o.prog.mu.Unlock()
	o.c.progressed.Notify(o.turn.ConversationID)
}

// framesLanded reports whether the last frames of the turn's conversation
// are payloads, appended by this turn: an append whose commit went
// unanswered landed.
func (o *owner) framesLanded(ctx context.Context, payloads []protocol.Payload) (bool, error) {
	conv, err := o.c.store.GetConversation(ctx, o.turn.ConversationID)
	if err != nil {
		return false, err
	}
	after := conv.NextSequence - 1 - int64(len(payloads))
	if after < 0 {
		return false, nil
	}
	got, err := o.c.store.ListFrames(ctx, store.ListFramesParams{ConversationID: o.turn.ConversationID, AfterSequence: after, Limit: len(payloads)})
	if err != nil || len(got) != len(payloads) {
		return false, err
	}
	for i, f := range got {
		want, err := protocol.EncodePayload(payloads[i])
		if err != nil {
			return false, err
		}
		if f.RequestID != o.turn.RequestID || f.Type != payloads[i].FrameType() || !bytes.Equal(f.Payload, want) {
			return false, nil
		}
	}
	return true, nil
}

// lost is how an owner stops when a write was refused by its fence:
// another daemon took the turn over (this daemon lost its lease, or the
// turn was taken from it). It writes nothing more: the new owner ends the
// turn.
func (o *owner) lost(what string, err error) {
	o.fenced = true
	o.c.log.Warn(what+": this daemon no longer owns the turn; stopping its work here", "request", o.turn.RequestID,
		"conversation", o.turn.ConversationID, "err", err)
}

// serviceError logs an internal failure and types it for the client.
func (c *Coordinator) serviceError(what string, err error) *protocol.Error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe
	}
	c.log.Error(what, "err", err)
	return &protocol.Error{Code: protocol.ServiceFailure, Retryable: true, Message: what + " failed: the state database did not accept the write"}
}
