package coordinator_test

import (
	"context"
	"testing"
	"time"

	"github.com/studio/operator/internal/conversations"
	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/coordinator/coordtest"
	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlite"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/testutil"
)

// engine is a coordinator on a real SQLite file with the real application
// services, driven directly (no HTTP). Its store is wrapped by coordtest.Store,
// which can pause a call between its steps or fail writes.
type engine struct {
	t     testing.TB
	db    *sqlite.Store
	store *coordtest.Store
	app   *studio.Service
	clock *storetest.Clock
	coord *coordinator.Coordinator
	convs *conversations.Service
	cfg   coordinator.Config
}

type engineOpts struct {
	provider model.Provider
	script   *script.Script
	workers  int
	tweak    func(*coordinator.Config)
	// before runs on the engine before its coordinator starts.
	before func(*engine)
}

// register registers a shared daemon's instance with a long lease, as its
// lease keeper would: its writes are fenced by it (store.Fence).
func (e *engine) register(cfg coordinator.Config) {
	e.t.Helper()
	if !cfg.Shared {
		return
	}
	now := e.clock.Now()
	if _, err := e.db.RegisterInstance(context.Background(), store.RegisterInstanceParams{Instance: store.Instance{ID: cfg.Instance,
		Address: "x", PID: 1, Version: "t", StartedAt: now, HeartbeatAt: now, LeaseExpiresAt: now.Add(24 * time.Hour)}}); err != nil {
		e.t.Fatal(err)
	}
}

func newEngine(t testing.TB, o engineOpts) *engine {
	t.Helper()
	stack := coordtest.New(t, coordtest.Options{Provider: o.provider, Script: o.script, InMemory: true})
	ts := &coordtest.Store{Store: stack.DB}
	cfg := stack.Config(ts)
	cfg.Commands, cfg.Workers = testCommands{stack.App, ts}, o.workers
	if o.tweak != nil {
		o.tweak(&cfg)
	}
	e := &engine{t: t, db: stack.DB, store: ts, app: stack.App, clock: stack.Clock, cfg: cfg}
	if o.before != nil {
		o.before(e)
	}
	e.register(cfg)
	e.coord = coordinator.New(cfg)
	e.convs = stack.Conversations(ts, e.coord)
	stack.App.SettleProposalsWith(e.coord)
	if err := e.coord.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ts.ReleaseAll()
		e.coord.Shutdown(context.Background())
	})
	return e
}

func (e *engine) ctx() context.Context {
	ctx, cancel := context.WithTimeout(e.t.Context(), 60*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

func (e *engine) conversation() string {
	e.t.Helper()
	c, err := e.convs.CreateConversation(e.ctx(), protocol.CreateConversationRequest{})
	if err != nil {
		e.t.Fatal(err)
	}
	return c.ID
}

func (e *engine) submit(convID, instruction string) protocol.TurnAccepted {
	e.t.Helper()
	acc, err := e.trySubmit(convID, instruction)
	if err != nil {
		e.t.Fatal(err)
	}
	return acc
}

func (e *engine) trySubmit(convID, instruction string) (protocol.TurnAccepted, error) {
	c, err := e.db.GetConversation(e.ctx(), convID)
	if err != nil {
		return protocol.TurnAccepted{}, err
	}
	last := c.LastSequence()
	return e.coord.SubmitTurn(e.ctx(), convID, protocol.TurnRequest{Instruction: instruction,
		Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &last})
}

// frames reads every stored frame of a conversation, decoded.
func (e *engine) frames(convID string) []protocol.Frame {
	e.t.Helper()
	var out []protocol.Frame
	after := int64(0)
	for {
		page, err := e.db.ListFrames(e.ctx(), store.ListFramesParams{ConversationID: convID, AfterSequence: after, Limit: 500})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, f := range page {
			b, _ := protocol.Marshal(f.Wire())
			d, err := protocol.DecodeFrame(b)
			if err != nil {
				e.t.Fatal(err)
			}
			out = append(out, d)
		}
		if len(page) < 500 {
			return out
		}
		after = page[len(page)-1].Sequence
	}
}

// waitFor waits until cond holds for the conversation's stored frames,
// woken by each commit, and returns them. The timeout is a safety net.
func (e *engine) waitFor(convID string, what string, cond func([]protocol.Frame) bool) []protocol.Frame {
	e.t.Helper()
	deadline := time.After(testutil.Patience) // a safety net only
	for {
		sig := e.db.FrameSignal(convID)
		fs := e.frames(convID)
		if cond(fs) {
			return fs
		}
		select {
		case <-sig:
		case <-deadline:
			e.t.Fatalf("waiting for %s: gave up; frames:\n%s", what, describe(fs))
		}
	}
}

// waitDone waits for the request's done frame and returns the request's frames.
func (e *engine) waitDone(convID, requestID string) []protocol.Frame {
	e.t.Helper()
	fs := e.waitFor(convID, "done of "+requestID, func(fs []protocol.Frame) bool { return countDone(fs, requestID) > 0 })
	return ofRequest(fs, requestID)
}

// waitProposal waits for the confirmation(required) of the conversation's
// newest proposal and for its turn to park.
func (e *engine) waitProposal(convID, requestID string) protocol.CommandProposal {
	e.t.Helper()
	var prop protocol.CommandProposal
	e.waitFor(convID, "a proposal", func(fs []protocol.Frame) bool {
		required := false
		for _, f := range fs {
			switch p := f.Payload.(type) {
			case protocol.ProposalPayload:
				prop, required = p.Proposal, false
			case protocol.ConfirmationPayload:
				required = p.ProposalID == prop.ID && p.State == protocol.ConfirmationRequired
			}
		}
		return required
	})
	e.waitTurn(requestID, func(t store.Turn) bool { return t.Status == store.TurnAwaitingConfirmation })
	return prop
}

// waitTurn polls a turn's row until cond holds (no signal tells a status change).
func (e *engine) waitTurn(requestID string, cond func(store.Turn) bool) store.Turn {
	e.t.Helper()
	var t store.Turn
	testutil.Eventually(e.t, func() bool {
		var err error
		if t, err = e.db.GetTurn(e.ctx(), requestID); err != nil {
			e.t.Fatal(err)
		}
		return cond(t)
	}, "turn ", requestID, " to reach the state waited for")
	return t
}

func (e *engine) proposal(id string) store.Proposal {
	e.t.Helper()
	p, err := e.db.GetProposal(e.ctx(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// decisions are the audit decisions of a proposal, oldest first.
func (e *engine) decisions(proposalID string) []string {
	e.t.Helper()
	rows, err := e.db.ListAdminEvents(e.ctx(), store.ListAdminEventsParams{Action: protocol.AuditAction, TargetID: proposalID})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for i := len(rows) - 1; i >= 0; i-- {
		var d protocol.CommandAudit
		if err := protocol.Unmarshal(rows[i].Details, &d); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, string(d.Decision))
	}
	return out
}

func confirmReq(p protocol.CommandProposal) protocol.ConfirmProposalRequest {
	r := protocol.ConfirmProposalRequest{ExpectedCommandHash: p.CommandHash}
	if p.Target != nil {
		r.ExpectedTargetVersion = ptr(p.Target.Version)
	}
	return r
}

func countDone(frames []protocol.Frame, requestID string) int {
	return coordtest.CountDone(frames, requestID)
}

func ofRequest(frames []protocol.Frame, requestID string) []protocol.Frame {
	var out []protocol.Frame
	for _, f := range frames {
		if f.RequestID == requestID {
			out = append(out, f)
		}
	}
	return out
}

// kinds names frames compactly: "tool_call", "confirmation:executed", ...
func kinds(frames []protocol.Frame) []string {
	var out []string
	for _, f := range frames {
		k := string(f.Type)
		switch p := f.Payload.(type) {
		case protocol.ConfirmationPayload:
			k += ":" + string(p.State)
		case protocol.DonePayload:
			k += ":" + string(p.Outcome)
		case protocol.ToolResultPayload:
			if !p.OK && p.Error != nil {
				k += ":" + string(p.Error.Code)
			}
		case protocol.ErrorPayload:
			k += ":" + string(p.Error.Code)
		}
		out = append(out, k)
	}
	return out
}

func describe(frames []protocol.Frame) string {
	s := ""
	for i, k := range kinds(frames) {
		s += k + " "
		if i%12 == 11 {
			s += "\n"
		}
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// goDo runs fn on its own goroutine; the channel closes when it returns.
func goDo(fn func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	return done
}

// either waits for the first of two channels; the timeout is a safety net.
func either(t testing.TB, a, b <-chan struct{}) {
	t.Helper()
	select {
	case <-a:
	case <-b:
	case <-time.After(testutil.Patience):
		t.Fatal("neither happened")
	}
}

// testCommands is the application as the coordinator uses it, with a
// pause point where a confirmed command starts executing.
type testCommands struct {
	*studio.Service
	store *coordtest.Store
}

func (c testCommands) Execute(ctx context.Context, cmd studio.Command, opts studio.ExecOptions) (studio.Result, error) {
	c.store.At("Execute", cmd)
	return c.Service.Execute(ctx, cmd, opts)
}

// schedule returns the seeded nightly-audit schedule.
func (e *engine) schedule() studio.Schedule {
	e.t.Helper()
	sc, err := e.app.GetSchedule(e.ctx(), "nightly-audit")
	if err != nil {
		e.t.Fatal(err)
	}
	return sc
}

func appDisable(name string) studio.Command {
	return studio.SetScheduleEnabledCommand{Schedule: name, Enabled: ptr(false)}
}

func appManual() studio.ExecOptions { return studio.ExecOptions{Trigger: studio.TriggerManual} }
