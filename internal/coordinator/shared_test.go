package coordinator_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/testutil"
)

// Several daemons on one database (Config.Shared), in one process: two or
// three coordinators on one store, as daemons on one PostgreSQL share
// theirs. The store's control notifications are in-process here; the
// PostgreSQL tests and the process tests (cmd/studio) check them across
// processes.

// sharedEngine is an engine that shares its store; its coordinator is
// instance "a". Idle, it looks for queued turns every claimInterval
// besides when told of one.
func sharedEngine(t *testing.T, workers int, claimInterval time.Duration) *engine {
	t.Helper()
	return sharedEngineAfter(t, workers, claimInterval, nil)
}

// sharedEngineAfter is sharedEngine; before runs first, while no daemon
// runs yet.
func sharedEngineAfter(t *testing.T, workers int, claimInterval time.Duration, before func(*engine)) *engine {
	t.Helper()
	return newEngine(t, engineOpts{script: &toggleScript, workers: workers, before: before, tweak: func(c *coordinator.Config) {
		c.Shared, c.Instance, c.ClaimInterval = true, "a", claimInterval
	}})
}

// peer starts another daemon's coordinator on e's store.
func (e *engine) peer(instance string, workers int) *coordinator.Coordinator {
	e.t.Helper()
	return e.peerWith(instance, workers, nil)
}

// peerWith is peer with tweak applied to its configuration first.
func (e *engine) peerWith(instance string, workers int, tweak func(*coordinator.Config)) *coordinator.Coordinator {
	e.t.Helper()
	cfg := e.cfg
	cfg.Instance, cfg.Workers = instance, workers
	if tweak != nil {
		tweak(&cfg)
	}
	e.register(cfg)
	c := coordinator.New(cfg)
	if err := c.Recover(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Shutdown(context.Background()) })
	return c
}

func (e *engine) submitOn(c *coordinator.Coordinator, convID, instruction string) protocol.TurnAccepted {
	e.t.Helper()
	conv, err := e.db.GetConversation(e.ctx(), convID)
	if err != nil {
		e.t.Fatal(err)
	}
	last := conv.LastSequence()
	acc, err := c.SubmitTurn(e.ctx(), convID, protocol.TurnRequest{Instruction: instruction,
		Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &last})
	if err != nil {
		e.t.Fatal(err)
	}
	return acc
}

// busyAndQueued fills the one worker of e's daemon with a turn that runs
// until cancelled, then submits a turn that must wait for it.
func (e *engine) busyAndQueued() (busy protocol.TurnAccepted, queuedConv string, queued protocol.TurnAccepted) {
	e.t.Helper()
	busyConv, queuedConv := e.conversation(), e.conversation()
	busy = e.submit(busyConv, "block")
	e.waitTurn(busy.RequestID, func(t store.Turn) bool { return t.Status == store.TurnRunning })
	return busy, queuedConv, e.submit(queuedConv, "hello")
}

// TestSharedIdleDaemonClaimsQueuedTurn: a daemon whose one worker is busy
// does not hold its queued turn hostage: an idle daemon claims it, runs
// it to its end, and the submitter stops waiting for it.
func TestSharedIdleDaemonClaimsQueuedTurn(t *testing.T) {
	t.Parallel()
	e := sharedEngine(t, 1, 20*time.Millisecond)
	busy, queuedConv, queued := e.busyAndQueued()
	if got := e.waitTurn(queued.RequestID, func(store.Turn) bool { return true }); got.Status != store.TurnQueued || got.Owner != "a" {
		t.Fatalf("second turn = %s owned by %q, want queued on a", got.Status, got.Owner)
	}
	e.peer("b", 2)
	frames := e.waitDone(queuedConv, queued.RequestID)
	if k := kinds(frames); k[len(k)-1] != "done:completed" || countDone(e.frames(queuedConv), queued.RequestID) != 1 {
		t.Fatalf("claimed turn: %v", k)
	}
	// The submitter no longer queues it, and its own turn runs on.
	testutil.Eventually(t, func() bool { return e.coord.QueueDepth() == 0 }, "a's queue to empty")
	if got := e.waitTurn(busy.RequestID, func(store.Turn) bool { return true }); got.Status != store.TurnRunning || got.Owner != "a" {
		t.Fatalf("a's running turn = %s owned by %q", got.Status, got.Owner)
	}
}

// TestSharedCancelReachesOwner: a cancel sent to one daemon interrupts the
// model stream of the daemon that runs the turn (a ten-minute pause) and
// is answered cancelled.
func TestSharedCancelReachesOwner(t *testing.T) {
	t.Parallel()
	e := sharedEngine(t, 2, 20*time.Millisecond)
	b := e.peer("b", 2)
	conv := e.conversation()
	acc := e.submit(conv, "block")
	e.waitTurn(acc.RequestID, func(t store.Turn) bool { return t.Status == store.TurnRunning })
	got, err := b.CancelTurn(e.ctx(), conv, acc.RequestID)
	if err != nil || got.Status != "cancelled" {
		t.Fatalf("cancel on b = %+v, %v", got, err)
	}
	if k := kinds(e.waitDone(conv, acc.RequestID)); k[len(k)-1] != "done:cancelled" {
		t.Fatalf("frames %v", k)
	}
	// A queued turn of another daemon is cancelled at once.
	e2 := sharedEngine(t, 1, 20*time.Millisecond)
	b2 := e2.peer("b", 1)
	c1, c2, c3 := e2.conversation(), e2.conversation(), e2.conversation()
	busyA := e2.submit(c1, "block")
	busyB := e2.submitOn(b2, c3, "block") // b's one worker: it claims nothing
	for _, r := range []string{busyA.RequestID, busyB.RequestID} {
		e2.waitTurn(r, func(t store.Turn) bool { return t.Status == store.TurnRunning })
	}
	q := e2.submit(c2, "hello")
	e2.waitTurn(q.RequestID, func(t store.Turn) bool { return t.Status == store.TurnQueued })
	if got, err := b2.CancelTurn(e2.ctx(), c2, q.RequestID); err != nil || got.Status != "cancelled" {
		t.Fatalf("cancel of a queued turn on b = %+v, %v", got, err)
	}
	if n := countDone(e2.frames(c2), q.RequestID); n != 1 {
		t.Fatalf("%d done frames", n)
	}
}

// deadInstance registers an instance whose lease expired, and reaps it.
func (e *engine) deadInstance(id string, work func()) {
	e.t.Helper()
	now := e.clock.Now()
	if _, err := e.db.RegisterInstance(e.ctx(), store.RegisterInstanceParams{Instance: store.Instance{ID: id, Address: "x", PID: 1, Version: "t",
		StartedAt: now, HeartbeatAt: now, LeaseExpiresAt: now.Add(time.Second)}}); err != nil {
		e.t.Fatal(err)
	}
	work()
	if _, err := e.db.ReapInstances(e.ctx(), store.ReapInstancesParams{Now: now.Add(time.Minute), Except: "a"}); err != nil {
		e.t.Fatal(err)
	}
}

// TestSharedReapDeadDaemon: the work of a daemon whose lease expired is
// taken over exactly once however many daemons reap at the same time: its
// running turn ends with error(service_restarted) and done(failed); a
// turn waiting on a proposal it was executing goes on elsewhere, the
// proposal recorded from its marker — not executed (nothing changed,
// failed with not_executed) or executed (succeeded, its result read back
// from what its write recorded), never indeterminate; its queued turn
// runs elsewhere.
func TestSharedReapDeadDaemon(t *testing.T) {
	t.Parallel()
	var running, awaiting, executed, queued string
	var runTurn, awaitTurn, executedTurn, queuedTurn store.Turn
	var prop, ran store.Proposal
	var ranAudit store.AdminEvent
	// The dead daemon's work is in the store before any daemon runs.
	e := sharedEngineAfter(t, 2, 20*time.Millisecond, func(e *engine) {
		ctx := e.ctx()
		conversation := func() string {
			c, err := e.db.CreateConversation(ctx, store.CreateConversationParams{ID: uuid.NewString(), Now: e.clock.Now()})
			if err != nil {
				t.Fatal(err)
			}
			return c.ID
		}
		running, awaiting, executed, queued = conversation(), conversation(), conversation(), conversation()
		e.deadInstance("dead", func() {
			turn := func(conv, instruction string, start bool) store.Turn {
				tr, _, err := e.db.SubmitTurn(ctx, store.SubmitTurnParams{ConversationID: conv, RequestID: conv + "-r", Instruction: instruction,
					ContextJSON: []byte(`{"snapshot":{"space":"mission","route":"/"}}`), ContextHash: "h", Now: e.clock.Now(), Instance: "dead"})
				if err != nil {
					t.Fatal(err)
				}
				if start {
					if tr, err = e.db.StartTurn(ctx, store.StartTurnParams{RequestID: tr.RequestID, Now: e.clock.Now(), Instance: "dead"}); err != nil {
						t.Fatal(err)
					}
				}
				return tr
			}
			runTurn = turn(running, "block", true)
			awaitTurn = turn(awaiting, "toggle", true)
			executedTurn = turn(executed, "toggle", true)
			queuedTurn = turn(queued, "hello", false)
			confirmed := func(conv string, tr store.Turn) store.Proposal {
				p, err := e.db.CreateProposal(ctx, store.CreateProposalParams{Now: e.clock.Now(), Proposal: store.Proposal{ID: "p-" + conv,
					ConversationID: conv, RequestID: tr.RequestID, CallID: "call_1", CommandType: "set_schedule_enabled",
					Command: []byte(`{"enabled":true,"schedule":"nightly-audit"}`), CommandHash: "h", Risk: protocol.RiskMutate,
					Summary: "Enable nightly-audit", IdempotencyKey: "k-" + conv, ExpiresAt: e.clock.Now().Add(time.Hour)}})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := e.db.AwaitConfirmation(ctx, store.AwaitConfirmationParams{RequestID: tr.RequestID}); err != nil {
					t.Fatal(err)
				}
				if p, err = e.db.ConfirmProposal(ctx, store.ConfirmProposalParams{ID: p.ID, Now: e.clock.Now(), Instance: "dead",
					Audit: store.AppendAdminEventParams{Actor: protocol.AuditActor, Action: protocol.AuditAction, TargetID: &p.ID,
						Details: []byte(`{"decision":"confirmed"}`), Now: e.clock.Now()}}); err != nil {
					t.Fatal(err)
				}
				return p
			}
			prop = confirmed(awaiting, awaitTurn)
			ran = confirmed(executed, executedTurn)
			// The dead daemon's command wrote (its marker set in the same
			// transaction), and the daemon died before recording it.
			var err error
			ranAudit, err = e.db.AppendAdminEvent(store.WithFence(ctx, store.Fence{Instance: "dead", ProposalID: ran.ID, ProposalEpoch: ran.Epoch,
				Execute: true, Now: e.clock.Now()}), store.AppendAdminEventParams{Actor: protocol.AuditActor, Action: "studio.app.command",
				Details: []byte(`{"command_type":"set_schedule_enabled","run_ids":["r-1"]}`), Now: e.clock.Now()})
			if err != nil {
				t.Fatal(err)
			}
		})
	})
	ctx := e.ctx()
	b, c := e.peer("b", 2), e.peer("c", 2)
	reapers := []*coordinator.Coordinator{e.coord, b, c}
	w, err := e.db.OrphanedWork(ctx, store.OrphanedWorkParams{})
	var ids []string
	for _, t := range w.Turns {
		ids = append(ids, t.RequestID)
	}
	// (The queued turn is there too unless an idle daemon claimed it
	// already: a busy or dead daemon holds no queued work hostage.)
	if err != nil || !slices.Contains(ids, runTurn.RequestID) || !slices.Contains(ids, awaitTurn.RequestID) || !slices.Contains(ids, executedTurn.RequestID) {
		t.Fatalf("orphaned work = %+v, %v", w, err)
	}
	var wg sync.WaitGroup
	for _, r := range reapers {
		wg.Go(func() {
			if err := r.ReapOrphans(ctx, w); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	k := kinds(e.waitDone(running, runTurn.RequestID))
	if !slices.Equal(k[len(k)-2:], []string{"error:service_restarted", "done:failed"}) {
		t.Fatalf("dead daemon's running turn: %v", k)
	}
	// Not executed: the command never ran; the model hears so, and the
	// turn goes on to its end elsewhere.
	k = kinds(e.waitDone(awaiting, awaitTurn.RequestID))
	if !slices.Equal(k[len(k)-4:], []string{"confirmation:failed", "tool_result:service_restarted", "text", "done:completed"}) {
		t.Fatalf("dead daemon's awaiting turn: %v", k)
	}
	if got := e.decisions(prop.ID); !slices.Equal(got, []string{"confirmed", "failed"}) {
		t.Fatalf("proposal audit %v, want confirmed then failed (not executed)", got)
	}
	if p := e.proposal(prop.ID); p.Status != store.ProposalFailed || p.ErrorCode == nil || *p.ErrorCode != "not_executed" || p.ExecutedAt != nil {
		t.Fatalf("proposal = %s (%v), executed at %v; want failed, not_executed", p.Status, p.ErrorCode, p.ExecutedAt)
	}
	if e.schedule().Enabled {
		t.Fatal("the proposal recorded as not executed changed the schedule")
	}
	// Executed: recorded from its marker with what its write recorded.
	k = kinds(e.waitDone(executed, executedTurn.RequestID))
	if !slices.Equal(k[len(k)-4:], []string{"confirmation:executed", "tool_result", "text", "done:completed"}) {
		t.Fatalf("dead daemon's executed turn: %v", k)
	}
	if got := e.decisions(ran.ID); !slices.Equal(got, []string{"confirmed", "executed"}) {
		t.Fatalf("executed proposal audit %v, want confirmed then executed", got)
	}
	p := e.proposal(ran.ID)
	var result struct {
		ReadBack bool            `json:"readBack"`
		AuditID  int64           `json:"auditId"`
		Audit    json.RawMessage `json:"audit"`
	}
	if err := json.Unmarshal(p.Result, &result); err != nil || p.Status != store.ProposalSucceeded || !result.ReadBack ||
		result.AuditID != ranAudit.ID || !strings.Contains(string(result.Audit), "r-1") {
		t.Fatalf("executed proposal = %s with result %s (%v); want succeeded, read back from audit row %d", p.Status, p.Result, err, ranAudit.ID)
	}
	if k := kinds(e.waitDone(queued, queuedTurn.RequestID)); k[len(k)-1] != "done:completed" {
		t.Fatalf("dead daemon's queued turn: %v", k)
	}
	for _, conv := range []string{running, awaiting, executed, queued} {
		if n := countDone(e.frames(conv), conv+"-r"); n != 1 {
			t.Fatalf("%s: %d done frames", conv, n)
		}
	}
	// Nothing is left to reap.
	if w, _ := e.db.OrphanedWork(ctx, store.OrphanedWorkParams{}); len(w.Turns)+len(w.Proposals) != 0 {
		t.Fatalf("orphaned work after reaping: %+v", w)
	}
}

// TestSharedConfirmAdoptsParkedTurn: a turn parked on a human belongs to no
// daemon: a confirm sent to another daemon executes it there, once, and
// that daemon continues the turn; the first daemon's parked owner steps
// aside.
func TestSharedConfirmAdoptsParkedTurn(t *testing.T) {
	t.Parallel()
	e := sharedEngine(t, 2, 20*time.Millisecond)
	b := e.peer("b", 2)
	conv := e.conversation()
	acc, prop := e.toggle(conv)
	if got := e.waitTurn(acc.RequestID, func(store.Turn) bool { return true }); got.Owner != "" {
		t.Fatalf("parked turn owned by %q", got.Owner)
	}
	res, err := b.Confirm(e.ctx(), conv, prop.ID, confirmReq(prop))
	if err != nil || res.Status != protocol.ResultSucceeded {
		t.Fatalf("confirm on b = %+v, %v", res, err)
	}
	e.checkOneEnding(conv, acc.RequestID, prop)
	testutil.Eventually(t, func() bool { return e.coord.Owners() == 0 }, "a's owners to end")
}

// TestSharedShutdownHandsQueuedTurnsOver: a daemon that shuts down gives
// its queued turns back to the shared queue instead of failing them; a
// daemon that stays runs them.
func TestSharedShutdownHandsQueuedTurnsOver(t *testing.T) {
	t.Parallel()
	e := sharedEngine(t, 1, 20*time.Millisecond)
	busy, queuedConv, queued := e.busyAndQueued()
	e.coord.Shutdown(e.ctx())
	if got := e.waitTurn(queued.RequestID, func(store.Turn) bool { return true }); got.Status != store.TurnQueued || got.Owner != "" {
		t.Fatalf("after shutdown the queued turn is %s owned by %q, want queued, no one's", got.Status, got.Owner)
	}
	e.peer("b", 1)
	if k := kinds(e.waitDone(queuedConv, queued.RequestID)); k[len(k)-1] != "done:completed" {
		t.Fatalf("handed-over turn: %v", k)
	}
	if k := kinds(e.waitDone(busy.ConversationID, busy.RequestID)); k[len(k)-1] != "done:failed" {
		t.Fatalf("the running turn of the daemon that stopped: %v", k)
	}
}

// firstResolve runs before on the first ResolveTarget, then resolves: a
// hook between a confirm's read of its proposal and its check of the
// target.
type firstResolve struct {
	coordinator.Commands
	once   sync.Once
	before func()
}

func (f *firstResolve) ResolveTarget(ctx context.Context, cmd studio.Command) (*protocol.ResourceVersion, error) {
	f.once.Do(f.before)
	return f.Commands.ResolveTarget(ctx, cmd)
}

// TestSharedConfirmLosesToAnotherDaemon: two daemons take confirms of one
// parked proposal; b has read it pending when a executes it (and so
// changes its target). b's confirm answers the stored outcome, succeeded,
// as a repeat does, not a conflict about a proposal that "is succeeded"
// (CI's three-daemon test met it once in twenty confirms).
func TestSharedConfirmLosesToAnotherDaemon(t *testing.T) {
	t.Parallel()
	e := sharedEngine(t, 2, 20*time.Millisecond)
	conv := e.conversation()
	acc, prop := e.toggle(conv)
	var first protocol.ProposalResult
	var firstErr error
	b := e.peerWith("b", 2, func(cfg *coordinator.Config) {
		cfg.Commands = &firstResolve{Commands: cfg.Commands, before: func() {
			first, firstErr = e.coord.Confirm(e.ctx(), conv, prop.ID, confirmReq(prop))
		}}
	})

	res, err := b.Confirm(e.ctx(), conv, prop.ID, confirmReq(prop))
	if firstErr != nil || first.Status != protocol.ResultSucceeded {
		t.Fatalf("confirm on a = %+v, %v", first, firstErr)
	}
	if err != nil || res.Status != protocol.ResultSucceeded {
		t.Fatalf("the losing confirm on b = %+v, %v; want the stored outcome, succeeded", res, err)
	}
	e.checkOneEnding(conv, acc.RequestID, prop)
}

// TestSharedIndeterminateWithMarkerIsReconciled: proposals an earlier
// release left indeterminate (executing, no owner, an indeterminate audit
// row) are settled at a reaper's look when their execution marker says
// they ran: recorded executed, their result read back, audited; one
// without the marker stays for reconcile_proposal.
func TestSharedIndeterminateWithMarkerIsReconciled(t *testing.T) {
	t.Parallel()
	var ran, unknown store.Proposal
	e := sharedEngineAfter(t, 2, 20*time.Millisecond, func(e *engine) {
		ctx := e.ctx()
		e.deadInstance("old", func() {
			for i, p := range []*store.Proposal{&ran, &unknown} {
				conv, err := e.db.CreateConversation(ctx, store.CreateConversationParams{ID: uuid.NewString(), Now: e.clock.Now()})
				if err != nil {
					t.Fatal(err)
				}
				tr, _, err := e.db.SubmitTurn(ctx, store.SubmitTurnParams{ConversationID: conv.ID, RequestID: uuid.NewString(), Instruction: "toggle",
					ContextJSON: []byte(`{"snapshot":{"space":"mission","route":"/"}}`), ContextHash: "h", Now: e.clock.Now(), Instance: "old"})
				if err != nil {
					t.Fatal(err)
				}
				if tr, err = e.db.StartTurn(ctx, store.StartTurnParams{RequestID: tr.RequestID, Now: e.clock.Now(), Instance: "old"}); err != nil {
					t.Fatal(err)
				}
				if *p, err = e.db.CreateProposal(ctx, store.CreateProposalParams{Now: e.clock.Now(), Proposal: store.Proposal{ID: uuid.NewString(),
					ConversationID: conv.ID, RequestID: tr.RequestID, CallID: "call_1", CommandType: "set_schedule_enabled",
					Command: []byte(`{"enabled":true,"schedule":"nightly-audit"}`), CommandHash: "h", Risk: protocol.RiskMutate,
					Summary: "Enable nightly-audit", IdempotencyKey: uuid.NewString(), ExpiresAt: e.clock.Now().Add(time.Hour)}}); err != nil {
					t.Fatal(err)
				}
				if *p, err = e.db.ConfirmProposal(ctx, store.ConfirmProposalParams{ID: p.ID, Now: e.clock.Now(), Instance: "old",
					Audit: store.AppendAdminEventParams{Actor: protocol.AuditActor, Action: protocol.AuditAction, TargetID: &p.ID,
						Details: []byte(`{"decision":"confirmed"}`), Now: e.clock.Now()}}); err != nil {
					t.Fatal(err)
				}
				if i == 0 { // it ran: its write set the marker
					if _, err := e.db.AppendAdminEvent(store.WithFence(ctx, store.Fence{Instance: "old", ProposalID: p.ID, ProposalEpoch: p.Epoch,
						Execute: true, Now: e.clock.Now()}), store.AppendAdminEventParams{Actor: protocol.AuditActor, Action: "studio.app.command",
						Details: []byte(`{"command_type":"set_schedule_enabled"}`), Now: e.clock.Now()}); err != nil {
						t.Fatal(err)
					}
				}
				// An earlier release's takeover: no owner, indeterminate.
				if _, _, err := e.db.FinishTurn(ctx, store.FinishTurnParams{RequestID: tr.RequestID, Status: store.TurnFailed,
					Error: protocol.Errorf(protocol.ServiceRestarted, "stopped"), Now: e.clock.Now(), Instance: "old"}); err != nil {
					t.Fatal(err)
				}
				if _, err := e.db.DisownProposal(ctx, store.DisownProposalParams{ID: p.ID, From: "old",
					Audit: &store.AppendAdminEventParams{Actor: protocol.AuditActor, Action: protocol.AuditAction, TargetID: &p.ID,
						Details: []byte(`{"decision":"indeterminate"}`), Now: e.clock.Now()}}); err != nil {
					t.Fatal(err)
				}
			}
		})
	})
	if err := e.coord.ReapOrphans(e.ctx(), store.OrphanedWork{}); err != nil {
		t.Fatal(err)
	}
	if got := e.decisions(ran.ID); !slices.Equal(got, []string{"confirmed", "indeterminate", "executed"}) {
		t.Fatalf("the marked proposal's audit %v, want it recorded executed", got)
	}
	if p := e.proposal(ran.ID); p.Status != store.ProposalSucceeded || !strings.Contains(string(p.Result), `"readBack":true`) {
		t.Fatalf("the marked proposal is %s with result %s", p.Status, p.Result)
	}
	if p := e.proposal(unknown.ID); p.Status != store.ProposalExecuting || p.Owner != "" || len(e.decisions(unknown.ID)) != 2 {
		t.Fatalf("the unmarked proposal is %s owned by %q with audit %v; want it left for reconcile_proposal", p.Status, p.Owner, e.decisions(unknown.ID))
	}
}
