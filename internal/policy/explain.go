package policy

import (
	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/protocol"
)

// ExplainRequest asks what the policy decides, and why (POST
// /api/admin/policy/explain; `studio policy explain`).
type ExplainRequest struct {
	// Principal names a principal: it is decided with its role as stored.
	// As gives a principal whole instead (a sign-in proxy's user with its
	// groups, a role it does not have yet).
	Principal string              `json:"principal,omitzero"`
	As        *protocol.Principal `json:"as,omitzero"`
	Action    Action              `json:"action"`
	// What the action acts on: a conversation, a proposal, or a command
	// asked for directly; none of them: the daemon (Studio).
	Conversation string          `json:"conversation,omitzero"`
	Proposal     string          `json:"proposal,omitzero"`
	Command      *ExplainCommand `json:"command,omitzero"`
	// Door is where the request would come in (default http).
	Door Door `json:"door,omitzero"`
}

// ExplainCommand is a command asked for directly: its type id and body.
type ExplainCommand struct {
	Type string         `json:"type"`
	Body jsontext.Value `json:"body,omitzero"`
}

// Explanation is a decision with what it was about and the text of the
// policies that made it.
type Explanation struct {
	Decision
	Principal protocol.Principal `json:"principal"`
	Action    Action             `json:"action"`
	Resource  string             `json:"resource"` // Kind::"id"
	Texts     []Policy           `json:"texts"`
}

// Explain decides and explains.
func (e *Engine) Explain(p protocol.Principal, a Action, r Resource, c Context) Explanation {
	d := e.Decide(p, a, r, c)
	x := Explanation{Decision: d, Principal: p, Action: a, Resource: describe(r), Texts: []Policy{}}
	for _, cited := range d.Policies {
		for _, pol := range e.policies {
			if pol.ID == cited.ID {
				x.Texts = append(x.Texts, pol)
			}
		}
	}
	return x
}

// CheckAction refuses an action that is unknown or acts on another kind
// of resource than k.
func CheckAction(a Action, k Kind) error {
	spec, ok := SpecOf(a)
	switch {
	case !ok || a == ActAlone:
		return protocol.Errorf(protocol.Validation, "unknown action %q", a).With("field", "action")
	case spec.On != k:
		return protocol.Errorf(protocol.Validation, "action %s acts on a %s, not a %s", a, spec.On, k).With("field", "action")
	}
	return nil
}

// ProposeResource is a command as the propose action sees it: its type,
// risk and impact, before its target is resolved (an MCP command tool's
// call is decided on these).
func ProposeResource(commandType, risk, impact, author string) Proposal {
	return Proposal{ID: commandType, CommandType: commandType, Risk: risk, Impact: impact, Author: author}
}
