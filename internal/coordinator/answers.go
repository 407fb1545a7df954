package coordinator

import (
	"context"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// How decisions are answered when the owner does not apply them as they
// come: a decision about a proposal no longer pending (notPendingAnswer),
// one whose transition lost a race (answerFailed), the repeats of a
// confirm that waited for the execution (answerWaiting), those that
// change nothing while the owner is busy (answerStaleDecisions), and
// those left when the owner retires (answerLate). Each is a read: none
// changes the proposal.

// notPendingAnswer answers a decision about a proposal that is not pending:
// confirm and expiry get its stored outcome; deny gets conflict, unless the
// proposal was denied or cancelled with its turn (a repeat is answered the same).
func notPendingAnswer(kind decisionKind, p store.Proposal) (protocol.ProposalResult, error) {
	if p.Status == store.ProposalPending {
		return protocol.ProposalResult{}, protocol.Errorf(protocol.Conflict, "proposal %s is still pending; try again", p.ID).
			With("status", string(p.Status))
	}
	if kind == decideAmend {
		return protocol.ProposalResult{}, protocol.Errorf(protocol.Conflict, "proposal %s is %s; only a pending proposal can be amended", p.ID, p.Status).
			With("status", string(p.Status))
	}
	if kind == decideDeny && p.Status != store.ProposalCancelled {
		return protocol.ProposalResult{}, protocol.Errorf(protocol.Conflict, "proposal %s is %s; only a pending proposal can be denied", p.ID, p.Status).
			With("status", string(p.Status))
	}
	return storedResult(p), nil
}

// answerFailed answers a decision whose transition failed. A conflict
// there means the proposal was no longer pending when the transition ran:
// another daemon's owner of the parked turn decided it first (the two
// read it pending; the store let one through). The decision then gets the
// stored outcome, as any decision about a settled proposal does.
func (o *owner) answerFailed(ctx context.Context, r decisionRequest, proposalID string, err error) {
	if !protocol.IsCode(err, protocol.Conflict) {
		r.answer(protocol.ProposalResult{}, err)
		return
	}
	cur, gerr := o.c.store.GetProposal(ctx, proposalID)
	if gerr != nil {
		r.answer(protocol.ProposalResult{}, gerr)
		return
	}
	if cur.Status == store.ProposalPending { // not a lost race: say what failed
		r.answer(protocol.ProposalResult{}, err)
		return
	}
	r.answer(notPendingAnswer(r.kind, cur))
}

// answerWaiting answers the repeated confirms of a proposal that waited for
// its execution.
func (o *owner) answerWaiting(proposalID string, res protocol.ProposalResult) {
	for {
		r := o.box.take(func(r request) bool {
			d, ok := r.(decisionRequest)
			return ok && d.proposalID == proposalID
		})
		if r == nil {
			return
		}
		d := r.(decisionRequest)
		if d.kind == decideDeny || d.kind == decideAmend {
			d.answer(protocol.ProposalResult{}, protocol.Errorf(protocol.Conflict, "proposal %s was confirmed; only a pending proposal can be denied or amended", proposalID).
				With("status", string(store.ProposalExecuting)))
			continue
		}
		d.answer(res, nil)
	}
}

// answerStaleDecisions answers at once the decisions about proposals that
// are not pending (except the one executing): they change nothing. The
// others wait for the owner to park.
func (o *owner) answerStaleDecisions() {
	o.box.mu.Lock()
	var pending []decisionRequest
	for _, r := range o.box.q {
		if d, ok := r.(decisionRequest); ok && d.proposalID != o.executing {
			pending = append(pending, d)
		}
	}
	o.box.mu.Unlock()
	for _, d := range pending {
		p, err := o.c.store.GetProposal(o.ctx, d.proposalID)
		if err != nil || (p.Status == store.ProposalPending && o.phase != phaseEnding) {
			continue
		}
		if o.box.take(func(r request) bool { return r == request(d) }) == nil {
			continue
		}
		if p.Status == store.ProposalPending { // the turn is ending: it will be cancelled
			d.answer(protocol.ProposalResult{}, protocol.Errorf(protocol.Conflict, "the turn of proposal %s is ending; it will not be executed", p.ID).
				With("status", string(p.Status)))
			continue
		}
		d.answer(notPendingAnswer(d.kind, p))
	}
}
