package coordinator_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/testutil"
)

// The database restarts, fails over, or answers a commit that it never
// acknowledges; a daemon is paused between a confirmation and its command
// while another takes its work over. See durable.go and store.Fence.

// textOf joins the assistant text a turn streamed.
func textOf(frames []protocol.Frame, requestID string) string {
	var b strings.Builder
	for _, f := range ofRequest(frames, requestID) {
		if p, ok := f.Payload.(protocol.TextPayload); ok && p.Role == protocol.RoleAssistant {
			b.WriteString(p.Content)
		}
	}
	return b.String()
}

// waitProgress waits until the conversation's active turn reports state.
func (e *engine) waitProgress(c *coordinator.Coordinator, convID string, state protocol.ProgressState) protocol.TurnProgress {
	e.t.Helper()
	deadline := time.After(testutil.Patience) // a safety net
	for {
		sig := c.ProgressSignal(convID)
		p, err := c.ActiveTurn(e.ctx(), convID)
		if err != nil {
			e.t.Fatal(err)
		}
		if p != nil && p.State == state {
			return *p
		}
		select {
		case <-sig:
		case <-deadline:
			e.t.Fatalf("the active turn never reported %s (last %+v)", state, p)
		}
	}
}

// TestTurnRidesOutADatabaseOutage: the database goes away while a turn
// streams; the turn says so (database_unavailable) instead of failing,
// and when the database is back it completes with every word once.
func TestTurnRidesOutADatabaseOutage(t *testing.T) {
	t.Parallel()
	e := newEngine(t, engineOpts{script: chatter(), tweak: func(c *coordinator.Config) {
		c.OutageBackoff = time.Millisecond
	}})
	conv := e.conversation()
	first := e.store.Arm("AppendFrames", func(arg any) bool {
		p := arg.(store.AppendFramesParams)
		_, ok := p.Frames[0].Payload.(protocol.TextPayload)
		return ok
	})
	acc := e.submit(conv, "talk")
	<-first.Reached()
	e.store.Outage.Store(true)
	first.Release()
	p := e.waitProgress(e.coord, conv, protocol.ProgressDatabaseUnavailable)
	if p.Attempt < 2 || p.ErrorCode != protocol.ServiceFailure || p.RetryAt == 0 {
		t.Fatalf("progress during the outage = %+v", p)
	}
	e.store.Outage.Store(false)
	frames := e.waitDone(conv, acc.RequestID)
	if k := kinds(frames); k[len(k)-1] != "done:completed" {
		t.Fatalf("turn through an outage: %v", k)
	}
	if got, want := textOf(frames, acc.RequestID), strings.Repeat("word ", 100); got != want {
		t.Fatalf("text through an outage = %q, want every word once", got)
	}
	if e.store.Faults.Load() == 0 {
		t.Fatal("no write met the outage")
	}
}

// TestOutageLongerThanTheBudgetFailsTheTurn: past the outage budget the
// turn gives up with service_failure, once the database takes its end.
func TestOutageLongerThanTheBudgetFailsTheTurn(t *testing.T) {
	t.Parallel()
	e := newEngine(t, engineOpts{script: chatter(), tweak: func(c *coordinator.Config) {
		c.OutageBackoff, c.OutageBudget = time.Millisecond, 50*time.Millisecond
		c.EndRetryBackoff, c.MaxEndRetryBackoff = time.Millisecond, 10*time.Millisecond
	}})
	conv := e.conversation()
	first := e.store.Arm("AppendFrames", nil)
	acc := e.submit(conv, "talk")
	<-first.Reached()
	e.store.Outage.Store(true)
	first.Release()
	// The turn gave up its writes: only its end is retried now.
	end := e.store.Arm("FinishTurn", nil)
	<-end.Reached()
	e.store.Outage.Store(false)
	end.Release()
	frames := e.waitDone(conv, acc.RequestID)
	if k := kinds(frames); !slices.Equal(k[len(k)-2:], []string{"error:service_failure", "done:failed"}) {
		t.Fatalf("turn past the budget: %v", k)
	}
}

// TestLostCommitIsNotWrittenTwice: an append whose commit landed but
// whose answer was lost is found, not appended again.
func TestLostCommitIsNotWrittenTwice(t *testing.T) {
	t.Parallel()
	e := newEngine(t, engineOpts{script: chatter(), tweak: func(c *coordinator.Config) { c.OutageBackoff = time.Millisecond }})
	e.store.LoseCommit("AppendFrames", 3)
	conv := e.conversation()
	acc := e.submit(conv, "talk")
	frames := e.waitDone(conv, acc.RequestID)
	if k := kinds(frames); k[len(k)-1] != "done:completed" {
		t.Fatalf("turn with lost commits: %v", k)
	}
	if got, want := textOf(frames, acc.RequestID), strings.Repeat("word ", 100); got != want {
		t.Fatalf("text with lost commits = %q, want every word once", got)
	}
	if e.store.Faults.Load() != 3 {
		t.Fatalf("%d lost commits, want 3", e.store.Faults.Load())
	}
}

// TestLostConfirmCommitExecutesOnce: a confirmation whose commit landed
// but whose answer was lost is read back, and the command runs once.
func TestLostConfirmCommitExecutesOnce(t *testing.T) {
	t.Parallel()
	e := newEngine(t, engineOpts{script: &toggleScript, tweak: func(c *coordinator.Config) { c.OutageBackoff = time.Millisecond }})
	conv := e.conversation()
	acc, prop := e.toggle(conv)
	e.store.LoseCommit("ConfirmProposal", 1)
	res, err := e.coord.Confirm(e.ctx(), conv, prop.ID, confirmReq(prop))
	if err != nil || res.Status != protocol.ResultSucceeded {
		t.Fatalf("confirm with a lost commit = %+v, %v", res, err)
	}
	e.checkOneEnding(conv, acc.RequestID, prop)
	if d := e.decisions(prop.ID); !slices.Equal(d, []string{"confirmed", "executed"}) {
		t.Fatalf("audit decisions %v", d)
	}
}

// TestSharedExecutionFencedAfterTakeover: daemon a confirms a proposal and
// is paused before its command runs; its lease expires and b takes its
// work over: the proposal's marker says it did not run, so b records it
// not executed and the turn goes on at b. When a resumes, its command's
// write is refused by the fence: the command never runs, and a writes
// nothing more.
func TestSharedExecutionFencedAfterTakeover(t *testing.T) {
	t.Parallel()
	e := sharedEngine(t, 2, 20*time.Millisecond)
	conv := e.conversation()
	acc, prop := e.toggle(conv)
	paused := e.store.Arm("Execute", nil)
	type answer struct {
		res protocol.ProposalResult
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		res, err := e.coord.Confirm(e.ctx(), conv, prop.ID, confirmReq(prop))
		answered <- answer{res, err}
	}()
	select {
	case <-paused.Reached():
	case <-time.After(testutil.Patience):
		t.Fatal("the confirmed command never started")
	}
	// a is paused between its confirmation and its command: b reaps it.
	b := e.peer("b", 1)
	if _, err := e.db.ReapInstances(e.ctx(), store.ReapInstancesParams{Now: e.clock.Now().Add(48 * time.Hour), Except: "b"}); err != nil {
		t.Fatal(err)
	}
	w, err := e.db.OrphanedWork(e.ctx(), store.OrphanedWorkParams{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ReapOrphans(e.ctx(), w); err != nil {
		t.Fatal(err)
	}
	frames := e.waitDone(conv, acc.RequestID)
	paused.Release()
	a := <-answered
	if a.err != nil || a.res.Status != protocol.ResultExecuting || a.res.Error == nil || a.res.Error.Code != protocol.ServiceRestarted {
		t.Fatalf("the paused daemon's confirm = %+v, %v; want executing, service_restarted", a.res, a.err)
	}
	if e.schedule().Enabled {
		t.Fatal("the command ran after the cluster recorded it not executed")
	}
	if d := e.decisions(prop.ID); !slices.Equal(d, []string{"confirmed", "failed"}) {
		t.Fatalf("audit decisions %v, want confirmed then failed (not executed)", d)
	}
	if got := e.proposal(prop.ID); got.ExecutedAt != nil || got.Status != store.ProposalFailed || got.Owner != "b" {
		t.Fatalf("proposal %s executed at %v, owned by %q", got.Status, got.ExecutedAt, got.Owner)
	}
	if k := kinds(frames); k[len(k)-1] != "done:completed" {
		t.Fatalf("the turn taken over: %v, want it to go on at b to its end", k)
	}
	// a wrote nothing after b ended the turn.
	if n := len(e.frames(conv)); n != len(frames) || countDone(e.frames(conv), acc.RequestID) != 1 {
		t.Fatalf("frames after the takeover: %v", kinds(e.frames(conv)))
	}
}

// deadDaemonsTurn is a shared engine whose store holds a running turn of
// a dead daemon's, put there before any daemon ran (a queued one would be
// claimed), and that turn's conversation.
func deadDaemonsTurn(t *testing.T) (*engine, string, store.Turn) {
	t.Helper()
	var conv string
	var tr store.Turn
	e := sharedEngineAfter(t, 2, 20*time.Millisecond, func(e *engine) {
		c, err := e.db.CreateConversation(e.ctx(), store.CreateConversationParams{ID: uuid.NewString(), Now: e.clock.Now()})
		if err != nil {
			t.Fatal(err)
		}
		conv = c.ID
		e.deadInstance("dead", func() {
			tr, _, err = e.db.SubmitTurn(e.ctx(), store.SubmitTurnParams{ConversationID: conv, RequestID: "orphan-" + conv, Instruction: "go",
				ContextJSON: []byte(`{"snapshot":{"space":"mission","route":"/"}}`), ContextHash: "h", Now: e.clock.Now(), Instance: "dead"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.db.StartTurn(e.ctx(), store.StartTurnParams{RequestID: tr.RequestID, Now: e.clock.Now(), Instance: "dead"}); err != nil {
				t.Fatal(err)
			}
		})
	})
	return e, conv, tr
}

// TestSharedTakeoverWithALostCommitIsNotForgotten: the commit of a
// takeover lands but its answer is lost; the reaper reads the turn again
// and ends it, instead of leaving it running for ever under itself.
func TestSharedTakeoverWithALostCommitIsNotForgotten(t *testing.T) {
	t.Parallel()
	e, conv, tr := deadDaemonsTurn(t)
	e.store.LoseCommit("AdoptTurn", 1)
	w, err := e.db.OrphanedWork(e.ctx(), store.OrphanedWorkParams{})
	if err != nil {
		t.Fatal(err)
	}
	_ = e.coord.ReapOrphans(e.ctx(), w)
	frames := e.waitDone(conv, tr.RequestID)
	if k := kinds(frames); !slices.Equal(k[len(k)-2:], []string{"error:service_restarted", "done:failed"}) {
		t.Fatalf("a turn taken over with a lost commit: %v", k)
	}
}

// TestSharedTakeoverThatLandsLateIsNotForgotten: the reaper's takeover
// times out while its commit runs on in the database, which lands it
// after the reaper read the turn again and found it still the dead
// daemon's; the next look finds the turn this daemon's, and ends it,
// instead of leaving it running for ever under a live daemon (no longer
// orphaned work for anyone).
func TestSharedTakeoverThatLandsLateIsNotForgotten(t *testing.T) {
	t.Parallel()
	e, conv, tr := deadDaemonsTurn(t)
	late := e.store.AdoptLate()
	w, err := e.db.OrphanedWork(e.ctx(), store.OrphanedWorkParams{})
	if err != nil {
		t.Fatal(err)
	}
	_ = e.coord.ReapOrphans(e.ctx(), w)
	<-late.Reached()
	if err := late.Land(); err != nil {
		t.Fatal(err)
	}
	if w, err = e.db.OrphanedWork(e.ctx(), store.OrphanedWorkParams{}); err != nil || len(w.Turns) != 0 {
		t.Fatalf("orphaned work after the late takeover = %+v, %v: want none (the turn is a live daemon's)", w, err)
	}
	_ = e.coord.ReapOrphans(e.ctx(), w) // the next look
	frames := e.waitDone(conv, tr.RequestID)
	if k := kinds(frames); !slices.Equal(k[len(k)-2:], []string{"error:service_restarted", "done:failed"}) {
		t.Fatalf("a turn taken over with a late commit: %v", k)
	}
}

// TestSharedConcurrentConfirmWaitsForTheOutcome: a confirm on daemon b of
// a proposal that daemon a executes waits for a's outcome and answers it,
// as a repeated confirm does on the daemon that executes.
func TestSharedConcurrentConfirmWaitsForTheOutcome(t *testing.T) {
	t.Parallel()
	e := sharedEngine(t, 2, 20*time.Millisecond)
	conv := e.conversation()
	acc, prop := e.toggle(conv)
	executing := e.store.Arm("Execute", nil)
	first := make(chan protocol.ProposalResult, 1)
	go func() {
		res, err := e.coord.Confirm(e.ctx(), conv, prop.ID, confirmReq(prop))
		if err != nil {
			t.Error(err)
		}
		first <- res
	}()
	<-executing.Reached()
	b := e.peer("b", 1)
	isProp := func(arg any) bool { return arg == prop.ID }
	// b reads the proposal (executing on a), then reads it again once its
	// decision found no owner of its own: both reads happen while a's
	// command is still running.
	read, reread := e.store.Arm("GetProposal", isProp), e.store.Arm("GetProposal", isProp)
	second := make(chan protocol.ProposalResult, 1)
	go func() {
		res, err := b.Confirm(e.ctx(), conv, prop.ID, confirmReq(prop))
		if err != nil {
			t.Error(err)
		}
		second <- res
	}()
	<-read.Reached()
	read.Release()
	<-reread.Reached()
	executing.Release()
	if res := <-first; res.Status != protocol.ResultSucceeded {
		t.Fatalf("the executing daemon's confirm = %+v", res)
	}
	reread.Release()
	if res := <-second; res.Status != protocol.ResultSucceeded {
		t.Fatalf("the concurrent confirm on b = %+v, want the outcome (succeeded), not executing", res)
	}
	e.checkOneEnding(conv, acc.RequestID, prop)
}
