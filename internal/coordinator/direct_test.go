package coordinator_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
)

var (
	requester = protocol.Principal{ID: "p-alice", Name: "alice", Role: protocol.RoleOperator}
	approver  = protocol.Principal{ID: "p-bob", Name: "bob", Role: protocol.RoleOperator}
)

// requestEnable makes alice's direct "enable nightly-audit" an approval
// request and returns its proposal.
func (e *engine) requestEnable(c *coordinator.Coordinator, key string) protocol.ProposalState {
	e.t.Helper()
	on := true
	ap, err := c.RequestApproval(protocol.WithPrincipal(e.ctx(), requester), coordinator.ApprovalRequest{
		Command: studio.SetScheduleEnabledCommand{Schedule: "nightly-audit", Enabled: &on}, IdempotencyKey: key})
	if err != nil || ap.Proposal.Status != string(store.ProposalPending) || ap.Proposal.SubmittedBy != "alice" {
		e.t.Fatalf("approval request: %+v %v", ap, err)
	}
	return ap.Proposal
}

func (e *engine) as(p protocol.Principal) context.Context { return protocol.WithPrincipal(e.ctx(), p) }

// TestApprovalRequestRaces: a confirm of an approval request racing a
// deny, a second confirm or its expiry — the racer stopped after reading
// the proposal pending — executes it at most once, settles it, and ends
// its turn once, without a model (the script's "toggle" turn is never
// asked: no text frame).
func TestApprovalRequestRaces(t *testing.T) {
	t.Parallel()
	for _, racer := range []string{"deny", "confirm", "expiry"} {
		t.Run(racer, func(t *testing.T) {
			t.Parallel()
			e := newEngine(t, engineOpts{script: &toggleScript})
			prop := e.requestEnable(e.coord, "")
			read := e.store.Arm("GetProposal", func(arg any) bool { return arg.(string) == prop.ID })
			var racerErr error
			var racerRes protocol.ProposalResult
			racing := goDo(func() {
				switch racer {
				case "deny":
					racerRes, racerErr = e.coord.Deny(e.as(approver), prop.ConversationID, prop.ID)
				case "confirm":
					racerRes, racerErr = e.coord.Confirm(e.as(approver), prop.ConversationID, prop.ID, confirmReq(prop.CommandProposal))
				case "expiry":
					racerRes, racerErr = e.coord.Confirm(e.as(approver), prop.ConversationID, prop.ID, confirmReq(prop.CommandProposal))
				}
			})
			either(t, read.Reached(), racing)
			if racer == "expiry" {
				e.clock.Advance(protocol.Time(prop.ExpiresAt).Sub(e.clock.Now()) + time.Second)
			}
			res, err := e.coord.Confirm(e.as(approver), prop.ConversationID, prop.ID, confirmReq(prop.CommandProposal))
			read.Release()
			<-racing
			frames := e.checkOneEnding(prop.ConversationID, prop.RequestID, prop.CommandProposal)
			for _, f := range frames[1:] { // the first is the request's instruction
				if f.Type == protocol.FrameText {
					t.Fatalf("a model spoke in an approval request's turn: %v", kinds(frames))
				}
			}
			p := e.proposal(prop.ID)
			executed := 0
			for _, d := range e.decisions(prop.ID) {
				if d == "executed" {
					executed++
				}
			}
			switch {
			case executed > 1:
				t.Fatalf("executed %d times", executed)
			case racer == "expiry" && (p.Status != store.ProposalExpired || executed != 0 || e.schedule().Enabled):
				t.Fatalf("past its expiry: %s, executed %d; confirm %+v %v, racer %+v %v", p.Status, executed, res, err, racerRes, racerErr)
			case racer != "expiry" && p.Status == store.ProposalSucceeded != e.schedule().Enabled:
				t.Fatalf("proposal %s but schedule enabled %v", p.Status, e.schedule().Enabled)
			case racer == "confirm" && (executed != 1 || err != nil || racerErr != nil || res.Status != protocol.ResultSucceeded ||
				racerRes.Status != protocol.ResultSucceeded):
				t.Fatalf("two confirms: %+v %v and %+v %v, executed %d", res, err, racerRes, racerErr, executed)
			}
			turn := e.waitTurn(prop.RequestID, func(t store.Turn) bool { return t.Status.Terminal() })
			if turn.Status != store.TurnCompleted {
				t.Fatalf("the request's turn ended %s", turn.Status)
			}
		})
	}
}

// TestApprovalRequestSurvivesARestart: a pending approval request stays
// confirmable across a restart; the next daemon's confirm runs it once
// and ends its turn, asking no model; the key still finds it.
func TestApprovalRequestSurvivesARestart(t *testing.T) {
	t.Parallel()
	e := newEngine(t, engineOpts{script: &toggleScript})
	prop := e.requestEnable(e.coord, "k")
	e.coord.Shutdown(context.Background())
	next := coordinator.New(e.cfg)
	e.app.SettleProposalsWith(next)
	t.Cleanup(func() { next.Shutdown(context.Background()) })
	if err := next.Recover(e.ctx()); err != nil {
		t.Fatal(err)
	}
	if again := e.requestEnable(next, "k"); again.ID != prop.ID {
		t.Fatalf("the key after a restart made %s, not %s", again.ID, prop.ID)
	}
	res, err := next.Confirm(e.as(approver), prop.ConversationID, prop.ID, confirmReq(prop.CommandProposal))
	if err != nil || res.Status != protocol.ResultSucceeded || !e.schedule().Enabled {
		t.Fatalf("confirm after restart: %+v %v", res, err)
	}
	e.checkOneEnding(prop.ConversationID, prop.RequestID, prop.CommandProposal)
	if p := e.proposal(prop.ID); p.SubmittedBy != "alice" || p.DecidedBy != "bob" {
		t.Fatalf("submitted by %q, decided by %q", p.SubmittedBy, p.DecidedBy)
	}
}

// countingCommands counts the application's Prepare calls.
type countingCommands struct {
	coordinator.Commands
	prepares *atomic.Int64
}

func (c countingCommands) Prepare(ctx context.Context, cmd studio.Command) (studio.Prepared, error) {
	c.prepares.Add(1)
	return c.Commands.Prepare(ctx, cmd)
}

// TestApprovalRequestPreparedOnce: a direct request prepares its command
// once at its door (then its turn once, storing the proposal, as every
// turn does), and its proposal says it was requested — in its frame and
// in its view — where a model's turn's says turn.
func TestApprovalRequestPreparedOnce(t *testing.T) {
	t.Parallel()
	var prepares atomic.Int64
	e := newEngine(t, engineOpts{script: &toggleScript, tweak: func(cfg *coordinator.Config) {
		cfg.Commands = countingCommands{cfg.Commands, &prepares}
	}})
	prop := e.requestEnable(e.coord, "")
	if n := prepares.Load(); n != 2 {
		t.Fatalf("an approval request prepared its command %d times, want 2: once at the request, once in its turn", n)
	}
	if prop.Origin != protocol.ProposalOriginRequest {
		t.Fatalf("the request's proposal view has origin %q", prop.Origin)
	}
	if f := e.waitProposal(prop.ConversationID, prop.RequestID); f.Origin != protocol.ProposalOriginRequest {
		t.Fatalf("the request's proposal frame has origin %q", f.Origin)
	}
	if _, err := e.coord.Deny(e.as(requester), prop.ConversationID, prop.ID); err != nil { // withdrawn
		t.Fatal(err)
	}

	conv := e.conversation()
	_, model := e.toggle(conv)
	if model.Origin != protocol.ProposalOriginTurn || e.proposal(model.ID).Origin != protocol.ProposalOriginTurn {
		t.Fatalf("a model's proposal has origin %q in its frame, %q stored", model.Origin, e.proposal(model.ID).Origin)
	}
}
