package policy

import (
	"github.com/studio/operator/internal/store"
)

// The resources of StateDB's rows, built in one place so that every door
// decides on the same attributes.

// ConversationOf is a stored conversation as policies see it.
func ConversationOf(c store.Conversation) Conversation {
	project := ""
	if c.Project != nil {
		project = *c.Project
	}
	return Conversation{ID: c.ID, Owner: c.Owner, Visibility: c.Visibility, Project: project}
}

// ProposalOf is a stored proposal, proposed in conversation conv, as
// policies see it.
func ProposalOf(p store.Proposal, conv store.Conversation) Proposal {
	c := ConversationOf(conv)
	r := Proposal{ID: p.ID, CommandType: p.CommandType, Risk: p.Risk, Impact: p.Impact, Project: p.Project,
		Author: p.SubmittedBy, Conversation: &c}
	if p.Target != nil {
		r.TargetKind = p.Target.Kind
	}
	return r
}
