package coordinator

import (
	"strings"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
)

// maxDenialsRead bounds how many closed proposals of a conversation a
// proposal is checked against (newest first).
const maxDenialsRead = 200

// refuseDenied refuses a command that a person denied in this
// conversation less than Config.DenialMemory ago: the same command, by the
// hash of its canonical form alone (not the proposal-bound commandHash,
// which differs for every proposal). The memory is the store's (denied
// proposals keep their command and when they were closed), so it holds
// across restarts and across the daemons that share the database.
//
// A person who asks again lifts it: a turn they submitted after the denial
// whose instruction names the command's type ("delete_schedule" or "delete
// schedule") or its target (by name or id) may propose it.
func (o *owner) refuseDenied(prep studio.Prepared) error {
	c, t := o.c, o.turn
	if c.cfg.DenialMemory < 0 {
		return nil
	}
	hash, err := protocol.CommandHash(prep.Canonical)
	if err != nil {
		return err
	}
	closed, err := c.store.ListProposals(o.ctx, store.ListProposalsParams{ConversationID: t.ConversationID,
		Statuses: []store.ProposalStatus{store.ProposalCancelled}, Limit: maxDenialsRead})
	if err != nil {
		return c.auditUnavailable("read proposals", err)
	}
	now := c.now()
	for _, p := range closed {
		if p.ErrorCode == nil || *p.ErrorCode != string(protocol.Denied) || p.CompletedAt == nil ||
			p.CommandType != prep.Type || now.Sub(*p.CompletedAt) >= c.cfg.DenialMemory {
			continue
		}
		if h, err := protocol.CommandHash(p.Command); err != nil || h != hash {
			continue
		}
		if p.RequestID != t.RequestID && !t.CreatedAt.Before(*p.CompletedAt) && asksFor(t.Instruction, p) {
			return nil
		}
		left := c.cfg.DenialMemory - now.Sub(*p.CompletedAt)
		return protocol.Errorf(protocol.Validation,
			"the operator denied this same command %s ago (proposal %s); it is not proposed again for another %s unless they ask for it: tell them what you would do instead, or ask whether they want it after all",
			roundDuration(now.Sub(*p.CompletedAt)), p.ID, roundDuration(left)).
			With("reason", "denied_recently").With("proposalId", p.ID).With("retryAfterSeconds", int(left.Seconds()+0.999))
	}
	return nil
}

// asksFor reports whether an instruction names a denied proposal's
// command type or its target.
func asksFor(instruction string, p store.Proposal) bool {
	in := strings.ToLower(instruction)
	typ := strings.ToLower(p.CommandType)
	if strings.Contains(in, typ) || strings.Contains(in, strings.ReplaceAll(typ, "_", " ")) {
		return true
	}
	if p.TargetName != "" && strings.Contains(in, strings.ToLower(p.TargetName)) {
		return true
	}
	return p.Target != nil && p.Target.ID != "" && strings.Contains(in, strings.ToLower(p.Target.ID))
}

func roundDuration(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Second)
}
