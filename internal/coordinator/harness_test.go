package coordinator_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"

	"github.com/studio/operator/internal/app"
	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/routes"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlite"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/tools"
)

// engine is a coordinator on a real SQLite file with the real application
// services, driven directly (no HTTP). Its store is wrapped by testStore,
// which can pause a call between its steps or fail writes.
type engine struct {
	t     testing.TB
	db    *sqlite.Store
	store *testStore
	app   *app.Service
	clock *storetest.Clock
	coord *coordinator.Coordinator
	cfg   coordinator.Config
}

type engineOpts struct {
	provider model.Provider
	script   *script.Script
	workers  int
	tweak    func(*coordinator.Config)
}

func newEngine(t testing.TB, o engineOpts) *engine {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(fastTempDir(t), "studio.db"))
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(storetest.Epoch)
	if _, err := db.Migrate(context.Background(), clock.Now()); err != nil {
		t.Fatal(err)
	}
	p := o.provider
	if p == nil {
		s := script.Greeting
		if o.script != nil {
			s = *o.script
		}
		if p, err = script.New(s); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := app.New(app.Config{Store: db, Now: clock.Now, Provider: p, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Seed(context.Background()); err != nil {
		t.Fatal(err)
	}
	ts := &testStore{Store: db}
	cfg := coordinator.Config{Store: ts, Provider: p, Commands: testCommands{svc, ts}, Now: clock.Now, Workers: o.workers, ShutdownGrace: time.Millisecond,
		TextFlush: time.Millisecond, Tools: tools.Default(svc, routes.Default, clock.Now), Logger: quietLogger(),
		RetryBackoff: time.Millisecond, MaxRetryWait: 50 * time.Millisecond}
	if o.tweak != nil {
		o.tweak(&cfg)
	}
	e := &engine{t: t, db: db, store: ts, app: svc, clock: clock, cfg: cfg}
	e.coord = coordinator.New(cfg)
	svc.SettleProposalsWith(e.coord)
	if err := e.coord.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ts.releaseAll()
		e.coord.Shutdown(context.Background())
		svc.Stop(context.Background())
		db.Close()
	})
	return e
}

// fastTempDir is a temporary directory in memory (/dev/shm) where there is
// one: the store syncs every commit, and these tests commit a lot.
func fastTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "studio-test-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (e *engine) ctx() context.Context {
	ctx, cancel := context.WithTimeout(e.t.Context(), 60*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

func (e *engine) conversation() string {
	e.t.Helper()
	c, err := e.coord.CreateConversation(e.ctx(), protocol.CreateConversationRequest{})
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
	deadline := time.After(20 * time.Second)
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
	deadline := time.Now().Add(20 * time.Second)
	for {
		t, err := e.db.GetTurn(e.ctx(), requestID)
		if err != nil {
			e.t.Fatal(err)
		}
		if cond(t) {
			return t
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("turn %s stayed %s", requestID, t.Status)
		}
		time.Sleep(2 * time.Millisecond)
	}
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
	n := 0
	for _, f := range frames {
		if f.RequestID == requestID && f.Type == protocol.FrameDone {
			n++
		}
	}
	return n
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

// quietLogger drops the logs of expected failures; set STUDIO_TEST_LOGS=1 to see them.
func quietLogger() *slog.Logger {
	if os.Getenv("STUDIO_TEST_LOGS") != "" {
		return slog.Default()
	}
	return slog.New(slog.DiscardHandler)
}

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
	case <-time.After(20 * time.Second):
		t.Fatal("neither happened")
	}
}

var errInjected = errors.New("injected store failure")

// testStore wraps the real store: a pause armed for a call makes that call
// stop (before or after its real work) until released; while failWrites is
// set every write fails.
type testStore struct {
	store.Store
	mu         sync.Mutex
	pauses     []*pause // armed
	hit        []*pause // reached
	failWrites atomic.Bool
	faults     atomic.Int64
}

// pause is one armed stopping point.
type pause struct {
	name    string
	match   func(arg any) bool
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

// Release lets the paused call go on.
func (p *pause) Release() { p.once.Do(func() { close(p.release) }) }

// arm makes the first call at name (for which match holds) stop there.
func (s *testStore) arm(name string, match func(arg any) bool) *pause {
	p := &pause{name: name, match: match, reached: make(chan struct{}), release: make(chan struct{})}
	s.mu.Lock()
	s.pauses = append(s.pauses, p)
	s.mu.Unlock()
	return p
}

func (s *testStore) at(name string, arg any) {
	s.mu.Lock()
	var hit *pause
	for i, p := range s.pauses {
		if p.name == name && (p.match == nil || p.match(arg)) {
			hit = p
			s.pauses = append(s.pauses[:i], s.pauses[i+1:]...)
			s.hit = append(s.hit, p)
			break
		}
	}
	s.mu.Unlock()
	if hit != nil {
		close(hit.reached)
		<-hit.release
	}
}

func (s *testStore) releaseAll() {
	s.mu.Lock()
	ps := append(s.pauses, s.hit...)
	s.pauses, s.hit = nil, nil
	s.mu.Unlock()
	for _, p := range ps {
		p.Release()
	}
}

func (s *testStore) fault() error {
	if s.failWrites.Load() {
		s.faults.Add(1)
		return errInjected
	}
	return nil
}

func (s *testStore) StartTurn(ctx context.Context, p store.StartTurnParams) (store.Turn, error) {
	if err := s.fault(); err != nil {
		return store.Turn{}, err
	}
	return s.Store.StartTurn(ctx, p)
}

func (s *testStore) FinishTurn(ctx context.Context, p store.FinishTurnParams) (store.Turn, []store.Frame, error) {
	s.at("FinishTurn", p)
	if err := s.fault(); err != nil {
		return store.Turn{}, nil, err
	}
	return s.Store.FinishTurn(ctx, p)
}

func (s *testStore) RequestCancel(ctx context.Context, p store.RequestCancelParams) (store.Turn, []store.Frame, error) {
	if err := s.fault(); err != nil {
		return store.Turn{}, nil, err
	}
	return s.Store.RequestCancel(ctx, p)
}

func (s *testStore) SetTurnContext(ctx context.Context, p store.SetTurnContextParams) error {
	if err := s.fault(); err != nil {
		return err
	}
	return s.Store.SetTurnContext(ctx, p)
}

func (s *testStore) AppendFrames(ctx context.Context, p store.AppendFramesParams) ([]store.Frame, error) {
	if err := s.fault(); err != nil {
		return nil, err
	}
	return s.Store.AppendFrames(ctx, p)
}

func (s *testStore) EmitEffect(ctx context.Context, p store.EmitEffectParams) (store.Effect, store.Frame, error) {
	if err := s.fault(); err != nil {
		return store.Effect{}, store.Frame{}, err
	}
	return s.Store.EmitEffect(ctx, p)
}

func (s *testStore) AppendAdminEvent(ctx context.Context, p store.AppendAdminEventParams) (store.AdminEvent, error) {
	if err := s.fault(); err != nil {
		return store.AdminEvent{}, err
	}
	return s.Store.AppendAdminEvent(ctx, p)
}

func (s *testStore) GetProposal(ctx context.Context, id string) (store.Proposal, error) {
	p, err := s.Store.GetProposal(ctx, id)
	s.at("GetProposal", id) // after the read: the caller goes on with what it read
	return p, err
}

func (s *testStore) ListProposals(ctx context.Context, p store.ListProposalsParams) ([]store.Proposal, error) {
	ps, err := s.Store.ListProposals(ctx, p)
	s.at("ListProposals", p)
	return ps, err
}

func (s *testStore) CreateProposal(ctx context.Context, p store.CreateProposalParams) (store.Proposal, error) {
	if err := s.fault(); err != nil {
		return store.Proposal{}, err
	}
	return s.Store.CreateProposal(ctx, p)
}

func (s *testStore) ConfirmProposal(ctx context.Context, p store.ConfirmProposalParams) (store.Proposal, error) {
	if err := s.fault(); err != nil {
		return store.Proposal{}, err
	}
	out, err := s.Store.ConfirmProposal(ctx, p)
	s.at("ConfirmProposal:after", p)
	return out, err
}

func (s *testStore) FinishProposal(ctx context.Context, p store.FinishProposalParams) (store.Proposal, bool, error) {
	if err := s.fault(); err != nil {
		return store.Proposal{}, false, err
	}
	return s.Store.FinishProposal(ctx, p)
}

func (s *testStore) CloseProposal(ctx context.Context, p store.CloseProposalParams) (store.Proposal, bool, error) {
	if err := s.fault(); err != nil {
		return store.Proposal{}, false, err
	}
	return s.Store.CloseProposal(ctx, p)
}

func (s *testStore) AwaitConfirmation(ctx context.Context, p store.AwaitConfirmationParams) (bool, error) {
	if err := s.fault(); err != nil {
		return false, err
	}
	return s.Store.AwaitConfirmation(ctx, p)
}

func (s *testStore) AckEffect(ctx context.Context, p store.AckEffectParams) (store.Effect, error) {
	if err := s.fault(); err != nil {
		return store.Effect{}, err
	}
	return s.Store.AckEffect(ctx, p)
}

// testCommands is the application as the coordinator uses it, with a
// pause point where a confirmed command starts executing.
type testCommands struct {
	*app.Service
	store *testStore
}

func (c testCommands) Execute(ctx context.Context, cmd app.Command, opts app.ExecOptions) (app.Result, error) {
	c.store.at("Execute", cmd)
	return c.Service.Execute(ctx, cmd, opts)
}

// schedule returns the seeded nightly-audit schedule.
func (e *engine) schedule() app.Schedule {
	e.t.Helper()
	sc, err := e.app.GetSchedule(e.ctx(), "nightly-audit")
	if err != nil {
		e.t.Fatal(err)
	}
	return sc
}

var _ = jsontext.Value(nil)
var _ = uuid.NewString

func appDisable(name string) app.Command {
	return app.SetScheduleEnabledCommand{Schedule: name, Enabled: ptr(false)}
}

func appManual() app.ExecOptions { return app.ExecOptions{Trigger: app.TriggerManual} }
