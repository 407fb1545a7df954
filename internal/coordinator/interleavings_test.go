package coordinator_test

import (
	"context"
	"flag"
	"fmt"
	"iter"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"pgregory.net/rapid"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/testutil"
)

// planProvider is a model whose every answer is written in the turn's
// instruction, "plan:<rounds>": one letter per model round, decided by how
// many tool results the turn holds so far. Tool rounds: R a read tool, E an
// effect, U an unknown tool, P and Q a proposal enabling and pausing the
// nightly-audit schedule. The last letter ends the turn: T text, F a
// retryable failure (every attempt), X a failure that is not retryable, H
// a model that hangs (the deadlines end it).
type planProvider struct{}

func (planProvider) Name() string { return "plan" }

func (planProvider) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		plan := strings.TrimPrefix(req.CurrentInstruction(), "plan:")
		k := len(req.CurrentToolResults())
		if k >= len(plan) {
			yield(model.Event{Kind: model.EventText, Text: "nothing more"}, nil)
			return
		}
		call := func(name, args string) {
			yield(model.Event{Kind: model.EventToolCall, ToolCall: model.ToolCall{ID: fmt.Sprintf("c%d", k), Name: name,
				Arguments: jsontext.Value(args)}}, nil)
		}
		switch plan[k] {
		case 'R':
			call("list_runs", `{"status":"failed"}`)
		case 'E':
			call("set_theme", `{"theme":"dark"}`)
		case 'U':
			call("no_such_tool", `{}`)
		case 'P':
			call("set_schedule_enabled", `{"schedule":"nightly-audit","enabled":true}`)
		case 'Q':
			call("set_schedule_enabled", `{"schedule":"nightly-audit","enabled":false}`)
		case 'T':
			if yield(model.Event{Kind: model.EventText, Text: "ok "}, nil) {
				yield(model.Event{Kind: model.EventText, Text: "done"}, nil)
			}
		case 'F':
			yield(model.Event{}, &protocol.Error{Code: protocol.ModelFailure, Message: "busy", Retryable: true})
		case 'X':
			yield(model.Event{}, protocol.Errorf(protocol.ModelFailure, "bad request"))
		case 'H':
			<-ctx.Done()
			yield(model.Event{}, ctx.Err())
		}
	}
}

// world is one interleaving run's bookkeeping.
type world struct {
	e        *engine
	convs    []string
	startSeq []int64 // each conversation's last sequence when the run began
	accepted []protocol.TurnAccepted
	faulted  bool  // a store fault happened in this run
	auditID  int64 // the newest audit row before this run
}

// active returns the conversation's active request, if any.
func (w *world) active(conv string) (string, bool) {
	c, err := w.e.db.GetConversation(context.Background(), conv)
	if err != nil || c.ActiveRequestID == nil {
		return "", false
	}
	return *c.ActiveRequestID, true
}

// pending returns the conversation's pending proposal, if any.
func (w *world) pending(conv string) (protocol.CommandProposal, bool) {
	ps, err := w.e.db.ListProposals(context.Background(), store.ListProposalsParams{ConversationID: conv,
		Statuses: []store.ProposalStatus{store.ProposalPending}, Limit: 1})
	if err != nil || len(ps) == 0 {
		return protocol.CommandProposal{}, false
	}
	p := ps[0]
	return protocol.CommandProposal{ID: p.ID, CommandHash: p.CommandHash, Target: p.Target}, true
}

// plans the model may be given.
var plans = rapid.SampledFrom([]string{"T", "RT", "ET", "UT", "PT", "QT", "PRT", "RPT", "PPT", "PQT", "EPT", "F", "X", "H", "RH", "PH", "RRF", "PX"})

// TestInterleavings drives random sequences of submissions, model output
// (read tools, effects, unknown tools, proposals, failures, hangs), cancels,
// confirms, denies, expiry, store outages and restarts across three
// conversations, some of them at the same instant, then lets everything
// end and checks the invariants: exactly one done per accepted turn and no
// turn left active or owned; every change the operator made to the
// application has a confirmed proposal; no proposal left executing unless a
// store fault happened; sequences contiguous. It runs 4 × 250 interleavings
// (RAPID_CHECKS or -rapid.checks set the count per part).
func TestInterleavings(t *testing.T) {
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue && os.Getenv("RAPID_CHECKS") == "" {
		_ = f.Value.Set("250")
	}
	for part := range 4 {
		t.Run(fmt.Sprint("part", part), func(t *testing.T) {
			t.Parallel()
			e := newEngine(t, engineOpts{provider: planProvider{}, workers: 2, tweak: func(c *coordinator.Config) {
				c.FirstEventTimeout, c.IdleTimeout, c.AttemptTimeout = 20*time.Millisecond, 20*time.Millisecond, time.Second
				c.RetryBackoff, c.MaxRetryBackoff, c.ModelRetries = time.Millisecond, 2*time.Millisecond, 1
				c.EndRetryBackoff, c.MaxEndRetryBackoff = time.Millisecond, 5*time.Millisecond
				c.MaxQueuedTurns = 2
			}})
			// The conversations live across runs: each run starts with
			// them idle and checks only what it added.
			convs := []string{e.conversation(), e.conversation(), e.conversation()}
			rapid.Check(t, func(rt *rapid.T) { interleave(rt, e, convs) })
		})
	}
}

func interleave(rt *rapid.T, e *engine, convs []string) {
	w := &world{e: e, convs: convs}
	if rows, err := e.db.ListAdminEvents(context.Background(), store.ListAdminEventsParams{Limit: 1}); err == nil && len(rows) == 1 {
		w.auditID = rows[0].ID
	}
	for _, c := range convs {
		conv, err := e.db.GetConversation(context.Background(), c)
		if err != nil {
			rt.Fatal(err)
		}
		w.startSeq = append(w.startSeq, conv.LastSequence())
	}
	conv := rapid.IntRange(0, 2)
	actions := map[string]func(*rapid.T){
		"submit": func(rt *rapid.T) {
			c := w.convs[conv.Draw(rt, "conv")]
			acc, err := e.trySubmit(c, "plan:"+plans.Draw(rt, "plan"))
			switch {
			case err == nil:
				w.accepted = append(w.accepted, acc)
			case protocol.IsCode(err, protocol.Conflict), protocol.IsCode(err, protocol.StaleContext),
				protocol.IsCode(err, protocol.RateLimited), protocol.IsCode(err, protocol.ServiceFailure):
			default:
				if !w.faulted || !strings.Contains(err.Error(), "injected") {
					rt.Fatalf("submit: %v", err)
				}
			}
		},
		"cancel": func(rt *rapid.T) {
			c := w.convs[conv.Draw(rt, "conv")]
			if rid, ok := w.active(c); ok {
				turn, err := e.coord.CancelTurn(e.ctx(), c, rid)
				w.check(rt, "cancel", turn, err)
			}
		},
		"confirm": func(rt *rapid.T) {
			c := w.convs[conv.Draw(rt, "conv")]
			if p, ok := w.pending(c); ok {
				res, err := e.coord.Confirm(e.ctx(), c, p.ID, confirmReq(p))
				w.check(rt, "confirm", res, err)
			}
		},
		"deny": func(rt *rapid.T) {
			c := w.convs[conv.Draw(rt, "conv")]
			if p, ok := w.pending(c); ok {
				res, err := e.coord.Deny(e.ctx(), c, p.ID)
				w.check(rt, "deny", res, err)
			}
		},
		"confirm and cancel at once": func(rt *rapid.T) {
			c := w.convs[conv.Draw(rt, "conv")]
			p, ok := w.pending(c)
			rid, active := w.active(c)
			if !ok || !active {
				return
			}
			var wg sync.WaitGroup
			wg.Go(func() { res, err := e.coord.Confirm(e.ctx(), c, p.ID, confirmReq(p)); w.check(rt, "confirm", res, err) })
			wg.Go(func() { turn, err := e.coord.CancelTurn(e.ctx(), c, rid); w.check(rt, "cancel", turn, err) })
			wg.Wait()
		},
		"confirm and deny at once": func(rt *rapid.T) {
			c := w.convs[conv.Draw(rt, "conv")]
			p, ok := w.pending(c)
			if !ok {
				return
			}
			var wg sync.WaitGroup
			wg.Go(func() { res, err := e.coord.Confirm(e.ctx(), c, p.ID, confirmReq(p)); w.check(rt, "confirm", res, err) })
			wg.Go(func() { res, err := e.coord.Deny(e.ctx(), c, p.ID); w.check(rt, "deny", res, err) })
			wg.Wait()
		},
		"expire": func(rt *rapid.T) {
			e.clock.Advance(11 * time.Minute)
			if err := e.coord.ExpireDue(e.ctx()); err != nil && !w.faulted {
				rt.Fatalf("expire: %v", err)
			}
		},
		"store outage": func(rt *rapid.T) {
			w.faulted = true
			e.store.FailWrites.Store(true)
		},
		"store back": func(rt *rapid.T) { e.store.FailWrites.Store(false) },
		// The turns advance between two actions: an interleaving, not a wait.
		"let it run": func(rt *rapid.T) {
			time.Sleep(time.Duration(rapid.IntRange(0, 3).Draw(rt, "ms")) * time.Millisecond)
		},
		"restart": func(rt *rapid.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			e.coord.Shutdown(ctx)
			cancel()
			e.store.FailWrites.Store(false)
			e.coord = coordinator.New(e.cfg)
			e.app.SettleProposalsWith(e.coord)
			if err := e.coord.Recover(e.ctx()); err != nil {
				rt.Fatalf("recover: %v", err)
			}
		},
	}
	steps := rapid.IntRange(1, 12).Draw(rt, "steps")
	names := make([]string, 0, len(actions))
	for name := range actions {
		names = append(names, name)
	}
	slices.Sort(names)
	pick := rapid.SampledFrom(names)
	for range steps {
		actions[pick.Draw(rt, "action")](rt)
	}
	w.settle(rt)
	w.verify(rt)
}

// check fails the run on an answer no client should ever see: anything but
// a typed refusal, or (during an outage) the store's failure.
func (w *world) check(rt *rapid.T, what string, v any, err error) {
	if err == nil {
		return
	}
	if protocol.CodeOf(err) != "" {
		return // typed: conflict, stale_context, audit_unavailable, service_failure...
	}
	if w.faulted && strings.Contains(err.Error(), "injected") {
		return
	}
	rt.Fatalf("%s answered an untyped error: %v (%+v)", what, err, v)
}

// settle ends the run: the store comes back and every turn is driven to its
// end (pending proposals denied, the rest cancelled).
func (w *world) settle(rt *rapid.T) {
	e := w.e
	e.store.FailWrites.Store(false)
	testutil.Eventually(rt, func() bool {
		busy := false
		for _, c := range w.convs {
			rid, ok := w.active(c)
			if !ok {
				continue
			}
			busy = true
			if p, ok := w.pending(c); ok {
				_, _ = e.coord.Deny(e.ctx(), c, p.ID)
				continue
			}
			if _, err := e.coord.CancelTurn(e.ctx(), c, rid); err != nil {
				rt.Fatalf("cancel while settling: %v", err)
			}
		}
		return !busy
	}, "every turn to end; still active: ", activeTurns{w})
}

// activeTurns describes the world's active turns when printed: when a
// wait for them to end fails, not before.
type activeTurns struct{ w *world }

func (a activeTurns) String() string { return a.w.describeActive() }

func (w *world) describeActive() string {
	var out []string
	for _, c := range w.convs {
		if rid, ok := w.active(c); ok {
			t, _ := w.e.db.GetTurn(context.Background(), rid)
			out = append(out, fmt.Sprintf("%s %s cancel=%v frames=%s", rid, t.Status, t.CancelRequestedAt != nil, describe(w.e.frames(c))))
		}
	}
	return strings.Join(out, "; ")
}

func (w *world) verify(rt *rapid.T) {
	e := w.e
	ctx := context.Background()
	confirmed := 0
	for _, acc := range w.accepted {
		t, err := e.db.GetTurn(ctx, acc.RequestID)
		if err != nil || !t.Status.Terminal() {
			rt.Fatalf("turn %s is %s after settling (%v)", acc.RequestID, t.Status, err)
		}
		ps, err := e.db.ListProposals(ctx, store.ListProposalsParams{RequestID: acc.RequestID, Limit: 100})
		if err != nil {
			rt.Fatal(err)
		}
		for _, p := range ps {
			d := e.decisions(p.ID)
			if slices.Contains(d, "confirmed") {
				confirmed++
			}
			switch {
			case p.Status == store.ProposalPending:
				rt.Fatalf("proposal %s still pending after its turn ended", p.ID)
			case p.Status == store.ProposalExecuting && !w.faulted:
				rt.Fatalf("proposal %s executing without a store fault (audit %v)", p.ID, d)
			case p.Status == store.ProposalSucceeded && !slices.Equal(d, []string{"confirmed", "executed"}):
				rt.Fatalf("succeeded proposal %s audited %v", p.ID, d)
			}
		}
	}
	for i, c := range w.convs {
		after := w.startSeq[i]
		fs, err := e.db.ListFrames(ctx, store.ListFramesParams{ConversationID: c, AfterSequence: after, Limit: 10000})
		if err != nil {
			rt.Fatal(err)
		}
		done := map[string]int{}
		for j, f := range fs {
			if f.Sequence != after+int64(j)+1 {
				rt.Fatalf("conversation %s: frame %d has sequence %d", c, after+int64(j)+1, f.Sequence)
			}
			if f.Type == protocol.FrameDone {
				done[f.RequestID]++
			}
		}
		for _, acc := range w.accepted {
			if acc.ConversationID == c && done[acc.RequestID] != 1 {
				rt.Fatalf("turn %s has %d done frames", acc.RequestID, done[acc.RequestID])
			}
		}
	}
	// Every change the operator made is one a human confirmed.
	if changes := w.operatorChanges(rt); changes > confirmed {
		rt.Fatalf("%d application changes by the operator, %d confirmed proposals", changes, confirmed)
	}
	testutil.Eventually(rt, func() bool { return e.coord.Owners() == 0 }, "the owners to end after every turn ended")
}

// operatorChanges counts this run's application audit rows by the operator.
func (w *world) operatorChanges(rt *rapid.T) int {
	rows, err := w.e.db.ListAdminEvents(context.Background(), store.ListAdminEventsParams{Action: studio.ActionCommand, Limit: 100})
	if err != nil {
		rt.Fatal(err)
	}
	n := 0
	for _, r := range rows {
		if r.Actor == studio.ActorOperator && r.ID > w.auditID {
			n++
		}
	}
	return n
}
