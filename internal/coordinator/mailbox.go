package coordinator

import (
	"sync"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
)

// The owner's mailbox: what other goroutines may ask of a turn's owner
// (cancel, a decision about a proposal, a recheck of the stored turn, a
// reap), queued in arrival order. Senders never block and never touch the
// turn; the owner takes one request at a time in its steps.

// A request in an owner's mailbox.
type request interface{ isRequest() }

// cancelRequest asks the owner to cancel the turn; reply receives the turn
// once the owner took the request in. by is the asking principal's name
// ("" for none): a proposal the cancel closes is denied by it.
type cancelRequest struct {
	reply chan protocol.Turn
	by    string
}

// decisionKind is what a human (or the clock) decided about a proposal.
type decisionKind int

const (
	decideConfirm decisionKind = iota + 1
	decideDeny
	decideExpire
	decideAmend
)

// decisionRequest asks the owner to apply a decision to one of the turn's
// proposals; reply (buffered, may be nil) receives the answer.
type decisionRequest struct {
	kind       decisionKind
	proposalID string
	amended    studio.Command // decideAmend: the operator's edited command
	by         string         // the deciding principal's name ("" for none)
	reply      chan decisionReply
}

type decisionReply struct {
	result  protocol.ProposalResult
	amended *store.Proposal // decideAmend: the new proposal
	err     error
}

// recheckRequest asks the owner to read its turn again: another daemon
// recorded a cancel, or claimed the turn (cancels.go's watch).
type recheckRequest struct{}

// reapRequest asks a parked owner to take its turn over: the daemon that
// executed its proposal died (reaper.go).
type reapRequest struct{ takeover takeover }

func (cancelRequest) isRequest()   {}
func (decisionRequest) isRequest() {}
func (recheckRequest) isRequest()  {}
func (reapRequest) isRequest()     {}

func (r decisionRequest) answer(res protocol.ProposalResult, err error) {
	if r.reply != nil {
		r.reply <- decisionReply{result: res, err: err}
	}
}

// mailbox is an owner's queue of requests, in arrival order. Senders never
// block; sig wakes the owner.
type mailbox struct {
	mu  sync.Mutex
	q   []request
	sig chan struct{}
}

func (b *mailbox) put(r request) {
	b.mu.Lock()
	b.q = append(b.q, r)
	b.mu.Unlock()
	select {
	case b.sig <- struct{}{}:
	default:
	}
}

// putOnce puts r unless a request like it (same) is queued already.
func (b *mailbox) putOnce(r request, same func(request) bool) {
	b.mu.Lock()
	for _, q := range b.q {
		if same(q) {
			b.mu.Unlock()
			return
		}
	}
	b.mu.Unlock()
	b.put(r)
}

// take removes and returns the first request keep accepts, or nil.
func (b *mailbox) take(keep func(request) bool) request {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, r := range b.q {
		if keep(r) {
			b.q = append(b.q[:i], b.q[i+1:]...)
			return r
		}
	}
	return nil
}

func (b *mailbox) drain() []request {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.q
	b.q = nil
	return q
}

func isCancel(r request) bool  { _, ok := r.(cancelRequest); return ok }
func isRecheck(r request) bool { _, ok := r.(recheckRequest); return ok }
func anyRequest(request) bool  { return true }
