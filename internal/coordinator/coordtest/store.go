package coordtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/studio/operator/internal/store"
)

// ErrInjected is the failure Store injects.
var ErrInjected = errors.New("injected store failure")

// ErrOutage is the failure Store injects while the database is
// unavailable (Outage): transient (store.Transient), as a refused
// connection is.
var ErrOutage = fmt.Errorf("injected outage: %w", syscall.ECONNREFUSED)

// Store wraps a real store for tests: a pause armed for a call makes that
// call stop (before or after its real work) until released; while
// FailWrites is set every write fails, and Fail makes one method fail.
type Store struct {
	store.Store
	// FailWrites fails every write; Faults counts the failures injected.
	FailWrites atomic.Bool
	Faults     atomic.Int64

	// Outage fails every write with ErrOutage while set: the database
	// restarting or failing over.
	Outage atomic.Bool

	mu      sync.Mutex
	pauses  []*Pause // armed
	hit     []*Pause // reached
	failing map[string]bool
	lose    map[string]int       // commits whose answer is lost (LoseCommit)
	late    *LateCommit          // a takeover that lands after its caller gave up (AdoptLate)
	hang    map[string]chan Hung // methods whose calls hang (Hang)
}

// LoseCommit makes the next n calls of method (AppendFrames,
// ConfirmProposal, AdoptTurn) commit and then fail as a commit whose
// answer was lost (store.CommitUnknownError).
func (s *Store) LoseCommit(method string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lose == nil {
		s.lose = map[string]int{}
	}
	s.lose[method] += n
}

// LateCommit is a takeover (AdoptTurn) whose caller was told its commit's
// outcome is unknown, and which lands only at Land: a commit the database
// finishes after its caller gave up on it (PostgreSQL does, once COMMIT
// was sent).
type LateCommit struct {
	reached chan struct{}
	land    func() error
}

// Reached closes when the takeover was made, and answered as unknown.
func (l *LateCommit) Reached() <-chan struct{} { return l.reached }

// Land commits the takeover now; call it after Reached.
func (l *LateCommit) Land() error { return l.land() }

// AdoptLate makes the next AdoptTurn a LateCommit.
func (s *Store) AdoptLate() *LateCommit {
	l := &LateCommit{reached: make(chan struct{})}
	s.mu.Lock()
	s.late = l
	s.mu.Unlock()
	return l
}

// lateAdopt takes the armed LateCommit, if any, for a takeover.
func (s *Store) lateAdopt(p store.AdoptTurnParams) error {
	s.mu.Lock()
	l := s.late
	s.late = nil
	s.mu.Unlock()
	if l == nil {
		return nil
	}
	l.land = func() error {
		_, err := s.Store.AdoptTurn(context.Background(), p)
		return err
	}
	s.Faults.Add(1)
	close(l.reached)
	return &store.CommitUnknownError{Err: fmt.Errorf("injected late commit of AdoptTurn: %w", context.DeadlineExceeded)}
}

// lost answers a call that committed: its error when its answer is to be
// lost.
func (s *Store) lost(method string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lose[method] == 0 {
		return nil
	}
	s.lose[method]--
	s.Faults.Add(1)
	return &store.CommitUnknownError{Err: fmt.Errorf("injected lost commit of %s: %w", method, syscall.ECONNRESET)}
}

// Pause is one armed stopping point.
type Pause struct {
	name    string
	match   func(arg any) bool
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

// Reached closes when the call stopped at the pause.
func (p *Pause) Reached() <-chan struct{} { return p.reached }

// Release lets the paused call go on.
func (p *Pause) Release() { p.once.Do(func() { close(p.release) }) }

// Arm makes the first call at name (for which match holds) stop there.
// Names are methods ("GetProposal" and "ListProposals" stop after their
// read, "FinishTurn" before its write, "ConfirmProposal:after" after its
// commit) or what a caller passes to At.
func (s *Store) Arm(name string, match func(arg any) bool) *Pause {
	p := &Pause{name: name, match: match, reached: make(chan struct{}), release: make(chan struct{})}
	s.mu.Lock()
	s.pauses = append(s.pauses, p)
	s.mu.Unlock()
	return p
}

// At stops at name when a pause is armed there.
func (s *Store) At(name string, arg any) {
	s.mu.Lock()
	var hit *Pause
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

// ReleaseAll lets every paused call go on, and disarms the rest.
func (s *Store) ReleaseAll() {
	s.mu.Lock()
	ps := append(s.pauses, s.hit...)
	s.pauses, s.hit = nil, nil
	s.mu.Unlock()
	for _, p := range ps {
		p.Release()
	}
}

// Fail makes method fail (on) or work again.
func (s *Store) Fail(method string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failing == nil {
		s.failing = map[string]bool{}
	}
	s.failing[method] = on
}

func (s *Store) fault(method string) error {
	s.mu.Lock()
	one := s.failing[method]
	s.mu.Unlock()
	if one || s.FailWrites.Load() {
		s.Faults.Add(1)
		return ErrInjected
	}
	if s.Outage.Load() {
		s.Faults.Add(1)
		return ErrOutage
	}
	return nil
}

// Hung is a call that hung (Hang): how long its context let it wait.
type Hung struct {
	Method string
	// Left is the time to its context's deadline when it was made; 0 when
	// it had none (it would have waited for ever).
	Left time.Duration
}

// Hang makes every call of method (GetTurn, GetProposal) hang until its
// context ends, as a call on a connection whose server stopped answering
// does, and fail then with a transient error; each such call is sent on
// the returned channel (buffered; calls beyond it are not reported).
// Unhang ends it.
func (s *Store) Hang(method string) <-chan Hung {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hang == nil {
		s.hang = map[string]chan Hung{}
	}
	ch := make(chan Hung, 64)
	s.hang[method] = ch
	return ch
}

// Unhang lets method's calls through again.
func (s *Store) Unhang(method string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.hang, method)
}

// hung makes a call of method hang when Hang says so; its error then.
func (s *Store) hung(ctx context.Context, method string) error {
	s.mu.Lock()
	ch := s.hang[method]
	s.mu.Unlock()
	if ch == nil {
		return nil
	}
	h := Hung{Method: method}
	if d, ok := ctx.Deadline(); ok {
		h.Left = time.Until(d)
	}
	select {
	case ch <- h:
	default:
	}
	s.Faults.Add(1)
	<-ctx.Done()
	return fmt.Errorf("injected hung %s: %w", method, context.Cause(ctx))
}

func (s *Store) StartTurn(ctx context.Context, p store.StartTurnParams) (store.Turn, error) {
	if err := s.fault("StartTurn"); err != nil {
		return store.Turn{}, err
	}
	return s.Store.StartTurn(ctx, p)
}

func (s *Store) FinishTurn(ctx context.Context, p store.FinishTurnParams) (store.Turn, []store.Frame, error) {
	s.At("FinishTurn", p)
	if err := s.fault("FinishTurn"); err != nil {
		return store.Turn{}, nil, err
	}
	return s.Store.FinishTurn(ctx, p)
}

func (s *Store) RequestCancel(ctx context.Context, p store.RequestCancelParams) (store.Turn, []store.Frame, error) {
	if err := s.fault("RequestCancel"); err != nil {
		return store.Turn{}, nil, err
	}
	return s.Store.RequestCancel(ctx, p)
}

func (s *Store) SetTurnContext(ctx context.Context, p store.SetTurnContextParams) error {
	if err := s.fault("SetTurnContext"); err != nil {
		return err
	}
	return s.Store.SetTurnContext(ctx, p)
}

func (s *Store) AppendFrames(ctx context.Context, p store.AppendFramesParams) ([]store.Frame, error) {
	s.At("AppendFrames", p)
	if err := s.fault("AppendFrames"); err != nil {
		return nil, err
	}
	fs, err := s.Store.AppendFrames(ctx, p)
	if err == nil {
		err = s.lost("AppendFrames")
	}
	return fs, err
}

func (s *Store) AdoptTurn(ctx context.Context, p store.AdoptTurnParams) (store.Turn, error) {
	if err := s.fault("AdoptTurn"); err != nil {
		return store.Turn{}, err
	}
	if err := s.lateAdopt(p); err != nil {
		return store.Turn{}, err
	}
	t, err := s.Store.AdoptTurn(ctx, p)
	if err == nil {
		err = s.lost("AdoptTurn")
	}
	return t, err
}

func (s *Store) EmitEffect(ctx context.Context, p store.EmitEffectParams) (store.Effect, store.Frame, error) {
	if err := s.fault("EmitEffect"); err != nil {
		return store.Effect{}, store.Frame{}, err
	}
	return s.Store.EmitEffect(ctx, p)
}

func (s *Store) AppendAdminEvent(ctx context.Context, p store.AppendAdminEventParams) (store.AdminEvent, error) {
	if err := s.fault("AppendAdminEvent"); err != nil {
		return store.AdminEvent{}, err
	}
	return s.Store.AppendAdminEvent(ctx, p)
}

func (s *Store) GetProposal(ctx context.Context, id string) (store.Proposal, error) {
	if err := s.hung(ctx, "GetProposal"); err != nil {
		return store.Proposal{}, err
	}
	p, err := s.Store.GetProposal(ctx, id)
	s.At("GetProposal", id) // after the read: the caller goes on with what it read
	return p, err
}

func (s *Store) ListProposals(ctx context.Context, p store.ListProposalsParams) ([]store.Proposal, error) {
	ps, err := s.Store.ListProposals(ctx, p)
	s.At("ListProposals", p)
	return ps, err
}

func (s *Store) CreateProposal(ctx context.Context, p store.CreateProposalParams) (store.Proposal, error) {
	if err := s.fault("CreateProposal"); err != nil {
		return store.Proposal{}, err
	}
	return s.Store.CreateProposal(ctx, p)
}

func (s *Store) ConfirmProposal(ctx context.Context, p store.ConfirmProposalParams) (store.Proposal, error) {
	if err := s.fault("ConfirmProposal"); err != nil {
		return store.Proposal{}, err
	}
	out, err := s.Store.ConfirmProposal(ctx, p)
	s.At("ConfirmProposal:after", p)
	if err == nil {
		err = s.lost("ConfirmProposal")
	}
	return out, err
}

func (s *Store) FinishProposal(ctx context.Context, p store.FinishProposalParams) (store.Proposal, bool, error) {
	if err := s.fault("FinishProposal"); err != nil {
		return store.Proposal{}, false, err
	}
	return s.Store.FinishProposal(ctx, p)
}

func (s *Store) CloseProposal(ctx context.Context, p store.CloseProposalParams) (store.Proposal, bool, error) {
	if err := s.fault("CloseProposal"); err != nil {
		return store.Proposal{}, false, err
	}
	return s.Store.CloseProposal(ctx, p)
}

func (s *Store) AwaitConfirmation(ctx context.Context, p store.AwaitConfirmationParams) (bool, error) {
	if err := s.fault("AwaitConfirmation"); err != nil {
		return false, err
	}
	return s.Store.AwaitConfirmation(ctx, p)
}

func (s *Store) AckEffect(ctx context.Context, p store.AckEffectParams) (store.Effect, error) {
	if err := s.fault("AckEffect"); err != nil {
		return store.Effect{}, err
	}
	return s.Store.AckEffect(ctx, p)
}

// GetTurn fails with ErrInjected while Fail("GetTurn") is set: a read,
// which FailWrites and Outage leave alone.
func (s *Store) GetTurn(ctx context.Context, id string) (store.Turn, error) {
	if err := s.hung(ctx, "GetTurn"); err != nil {
		return store.Turn{}, err
	}
	s.mu.Lock()
	failing := s.failing["GetTurn"]
	s.mu.Unlock()
	if failing {
		s.Faults.Add(1)
		return store.Turn{}, ErrInjected
	}
	return s.Store.GetTurn(ctx, id)
}
