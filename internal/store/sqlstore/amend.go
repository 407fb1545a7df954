package sqlstore

import (
	"context"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// AmendProposal implements store.ProposalStore: the original's transition
// to cancelled (amended) with its audit row, then the amended proposal and
// its frames, in one transaction. The turn is not resumed: it still waits
// for a human, now for the amended proposal.
func (s *Store) AmendProposal(ctx context.Context, p store.AmendProposalParams) (store.Proposal, error) {
	defer s.timed("amend_proposal", time.Now())
	var out store.Proposal
	err := s.txn(ctx, func(tx *writeTx) error {
		code := protocol.ReasonAmended
		orig, err := transition(ctx, tx, transitionParams{ID: p.ID, From: []store.ProposalStatus{store.ProposalPending},
			Set: `status = 'cancelled', completed_at = ?, error_code = ?`, Args: []any{ts(p.Now), code}, Audit: p.Audit, Now: p.Now})
		if err != nil {
			return err
		}
		if err := requireActive(ctx, tx, orig.ConversationID, orig.RequestID); err != nil {
			return err
		}
		link := p.Link
		link.Now = p.Now
		if _, err := appendAdminEvent(ctx, tx, link); err != nil {
			return err
		}
		pr := p.Proposal
		if pr.ConversationID != orig.ConversationID || pr.RequestID != orig.RequestID || pr.CallID != orig.CallID {
			return protocol.Errorf(protocol.Validation, "an amended proposal answers the same turn and tool call as the one it amends")
		}
		id := orig.ID
		pr.AmendedFrom, pr.Origin = &id, orig.Origin // an amended request is still a request
		out, err = insertProposal(ctx, tx, pr, p.Now,
			protocol.ConfirmationPayload{ProposalID: orig.ID, State: protocol.ConfirmationAmended})
		return err
	})
	return out, err
}
