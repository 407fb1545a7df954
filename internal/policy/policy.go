// Package policy is the one place Studio decides whether a principal may
// do something: Decide(principal, action, resource, context) answers allow,
// deny with a reason, or allow with an obligation (a second approver).
// Every door asks it — HTTP routes, each MCP tool call, direct application
// commands, proposal decisions, cancels, effect acknowledgements, stream
// tickets, open streams and every read that aggregates across
// conversations — and none decides by itself.
//
// Policies are data, in Cedar (github.com/cedar-policy/cedar-go): a
// built-in set that is the documented role table plus the four-eyes flag
// (--second-approver-for), and a team's own file (--policy FILE), all
// validated against schema.cedarschema when the daemon starts. docs/teams.md
// prints the effective built-in set and the role table it gives.
package policy

import (
	"fmt"
	"strings"

	"github.com/studio/operator/internal/protocol"
)

// Action is what a principal asks to do, as policies name it
// (Action::"confirm").
type Action string

// The actions, by the kind of resource they act on.
const (
	// On the daemon (Studio).
	ReadStudio         Action = "read_studio"         // playbooks, workflows, runs, schedules, routes, tools, models
	ReadHealth         Action = "read_health"         // system health and the operator's activity
	ReadAudit          Action = "read_audit"          // the audit trail
	ReadMetrics        Action = "read_metrics"        // Prometheus metrics
	Whoami             Action = "whoami"              // one's own principal
	UseMCP             Action = "use_mcp"             // the MCP endpoint (each tool call is decided too)
	ListConversations  Action = "list_conversations"  // lists and search (each conversation is decided too)
	CreateConversation Action = "create_conversation" // a new conversation
	ManagePrincipals   Action = "manage_principals"   // principals and tokens
	ManageWebhooks     Action = "manage_webhooks"     // webhooks, their deliveries, their URLs in the audit
	ExplainPolicy      Action = "explain_policy"      // have a decision explained

	// On a conversation.
	ReadConversation    Action = "read_conversation"    // its frames, stream, effects, proposals
	MintTicket          Action = "mint_ticket"          // a stream ticket for it
	RedeemTicket        Action = "redeem_ticket"        // a stream opened with a ticket, decided again at redemption
	Converse            Action = "converse"             // submit a turn, fork, report the cockpit's view
	UpdateConversation  Action = "update_conversation"  // rename, archive, pin, choose a model
	SetVisibility       Action = "set_visibility"       // make it private or team
	DeleteConversation  Action = "delete_conversation"  // mark it deleted
	RestoreConversation Action = "restore_conversation" // undelete it within the recovery window
	CancelTurn          Action = "cancel_turn"          // cancel a turn (closing another's proposal is a deny too)
	AcknowledgeEffect   Action = "ack_effect"           // acknowledge a UI effect for the cockpit
)

// On a proposal (or a command asked for directly).
const (
	ReadProposal Action = "read_proposal" // a proposal's state
	Propose      Action = "propose"       // make a proposal (an agent's MCP command tool)
	Confirm      Action = "confirm"       // confirm a pending proposal: it executes
	Deny         Action = "deny"          // refuse a pending proposal
	Amend        Action = "amend"         // edit a pending proposal's command
	RunCommand   Action = "run_command"   // run a command directly (cockpit, CLI, API)
	// ActAlone is not asked by any door: Decide asks it for a confirm of
	// one's own proposal and for a direct command. Forbidding it is
	// four-eyes: another principal must confirm.
	ActAlone Action = "act_alone"
)

// Kind is the entity type of a resource, as policies name it.
type Kind string

// Resource kinds.
const (
	KindStudio       Kind = "Studio"
	KindConversation Kind = "Conversation"
	KindProposal     Kind = "Proposal"
)

// ActionSpec is one action: what it acts on and what it is, for docs.
type ActionSpec struct {
	Action Action
	On     Kind
	Title  string
}

// Actions lists every action, in the order docs print them.
var Actions = []ActionSpec{
	{ReadStudio, KindStudio, "read the cockpit: playbooks, workflows, runs, schedules, routes, tools, models"},
	{ReadHealth, KindStudio, "read system health and the operator's activity"},
	{ReadAudit, KindStudio, "read the audit trail"},
	{ReadMetrics, KindStudio, "read the Prometheus metrics"},
	{Whoami, KindStudio, "read one's own principal"},
	{UseMCP, KindStudio, "use the MCP endpoint (each tool call is decided too)"},
	{ListConversations, KindStudio, "list and search conversations (each one is decided too)"},
	{CreateConversation, KindStudio, "create a conversation"},
	{ManagePrincipals, KindStudio, "manage principals and tokens"},
	{ManageWebhooks, KindStudio, "manage webhooks; read their URLs in the audit"},
	{ExplainPolicy, KindStudio, "have a decision explained (studio policy explain)"},
	{ReadConversation, KindConversation, "read a conversation: frames, stream, effects, proposals"},
	{MintTicket, KindConversation, "mint a stream ticket"},
	{RedeemTicket, KindConversation, "open a stream with a ticket"},
	{Converse, KindConversation, "submit a turn, fork, report the cockpit's view"},
	{UpdateConversation, KindConversation, "rename, archive, pin, choose a model"},
	{SetVisibility, KindConversation, "make a conversation private or team"},
	{DeleteConversation, KindConversation, "delete a conversation"},
	{RestoreConversation, KindConversation, "restore a deleted conversation"},
	{CancelTurn, KindConversation, "cancel a turn"},
	{AcknowledgeEffect, KindConversation, "acknowledge a UI effect"},
	{ReadProposal, KindProposal, "read a proposal"},
	{Propose, KindProposal, "propose a command (MCP command tools)"},
	{Confirm, KindProposal, "confirm a proposal"},
	{Deny, KindProposal, "deny a proposal (a cancel that closes another's proposal too)"},
	{Amend, KindProposal, "amend a proposal"},
	{RunCommand, KindProposal, "run a command directly"},
	{ActAlone, KindProposal, "do a command without a second principal (asked by confirm and run_command)"},
}

// SpecOf is the spec of a; false for an unknown action.
func SpecOf(a Action) (ActionSpec, bool) {
	for _, s := range Actions {
		if s.Action == a {
			return s, true
		}
	}
	return ActionSpec{}, false
}

// Resource is what an action acts on: Studio, a Conversation or a
// Proposal.
type Resource interface {
	Kind() Kind
	// ResourceID is the resource's id ("studio" for the daemon).
	ResourceID() string
}

// Studio is the daemon itself.
type Studio struct{}

// Kind implements Resource.
func (Studio) Kind() Kind { return KindStudio }

// ResourceID implements Resource.
func (Studio) ResourceID() string { return "studio" }

// Conversation is an operator conversation as policies see it.
type Conversation struct {
	ID         string
	Owner      string // the owner principal's name
	Visibility string // protocol.VisibilityPrivate or protocol.VisibilityTeam
	Project    string
}

// Kind implements Resource.
func (Conversation) Kind() Kind { return KindConversation }

// ResourceID implements Resource.
func (c Conversation) ResourceID() string { return c.ID }

// Proposal is a command as policies see it: a pending proposal, or one
// asked for directly (no Conversation, Author the asker).
type Proposal struct {
	ID          string // the proposal's id; for a direct command its type
	CommandType string
	Risk        string // protocol.RiskMutate, RiskExecute or RiskAdmin
	Impact      string // "", protocol.ImpactDestructive or ImpactIrreversible
	TargetKind  string
	Project     string
	Author      string // a principal's name; "" when unknown
	// Conversation is where it was proposed; nil for a direct command.
	Conversation *Conversation
}

// Kind implements Resource.
func (Proposal) Kind() Kind { return KindProposal }

// ResourceID implements Resource.
func (p Proposal) ResourceID() string { return p.ID }

// Door is where a request came in.
type Door string

// Doors.
const (
	DoorHTTP Door = "http" // the REST API, the cockpit, the CLI, streams
	DoorMCP  Door = "mcp"  // a tool call on /mcp
)

// Context is what a decision knows of the request besides who, what and
// on what.
type Context struct {
	Door Door
}

// Effect is a decision's outcome.
type Effect string

// Effects.
const (
	EffectAllow Effect = "allow"
	EffectDeny  Effect = "deny"
	// EffectObligation is allow with an obligation: allowed on the
	// condition that a second principal approves (Decision.Obligation).
	EffectObligation Effect = "allow_with_obligation"
)

// Obligation is what an allowed action still needs before it happens.
type Obligation string

// Obligations.
const (
	// SecondApprover: a principal other than the author must confirm it.
	SecondApprover Obligation = "second_approver"
)

// Reasons a decision denies with (Decision.Reason): "role" when no policy
// permits and a higher role would be permitted, else the deciding forbid
// policy's @reason annotation, else ReasonPolicy.
const (
	ReasonRole           = "role"
	ReasonPolicy         = "policy"
	ReasonNotVisible     = "not_visible"              // another principal's private conversation: doors answer not_found
	ReasonSecondApprover = "second_approver_required" // one's own proposal under four-eyes
	ReasonFourEyes       = "four_eyes_required"       // a direct command under four-eyes
	ReasonOwner          = "owner"                    // only the owner (or an admin) may
)

// Decision is Decide's answer.
type Decision struct {
	Effect Effect `json:"decision"`
	// Reason says why a deny denies (a Reason* constant or a policy's
	// @reason), and why an obligation applies.
	Reason string `json:"reason,omitempty"`
	// Needed is the least role that would be allowed, for a deny for the
	// role.
	Needed protocol.Role `json:"needed,omitempty"`
	// Obligation is set with EffectObligation.
	Obligation Obligation `json:"obligation,omitempty"`
	// Policies are the policies that decided: the permits of an allow,
	// the forbids of a deny (none: nothing permits), the forbids of an
	// obligation.
	Policies []Cited `json:"policies"`
}

// Cited is a policy that took part in a decision.
type Cited struct {
	ID     string `json:"id"`
	Effect string `json:"effect"` // permit or forbid
	// Where is the policy's place: its file and line.
	Where string `json:"where"`
}

// Allowed reports whether the action may happen now: allow, without an
// obligation.
func (d Decision) Allowed() bool { return d.Effect == EffectAllow }

// PolicyIDs are the ids of the policies that decided.
func (d Decision) PolicyIDs() []string {
	out := make([]string, len(d.Policies))
	for i, c := range d.Policies {
		out[i] = c.ID
	}
	return out
}

// Err is the refusal of a decision that does not allow the action now:
// nil for allow; 403 denied whose details carry the reason, the role
// needed and the deciding policies; for an obligation, 403 denied with
// reason four_eyes_required and details.obligation, which a door can act
// on (turn it into an approval request).
func (d Decision) Err() error {
	switch d.Effect {
	case EffectAllow:
		return nil
	case EffectObligation:
		return protocol.Errorf(protocol.Denied, "this command needs a second approver and does not run on one principal's word: ask the operator for it, and another principal confirms its proposal (policy %s)", strings.Join(d.PolicyIDs(), ", ")).
			With("reason", ReasonFourEyes).With("obligation", string(d.Obligation)).With("policies", d.PolicyIDs())
	}
	var e *protocol.Error
	switch {
	case d.Reason == ReasonRole && d.Needed != "":
		e = protocol.Errorf(protocol.Denied, "this needs the role %s or higher", d.Needed).With("needed", string(d.Needed))
	case d.Reason == ReasonSecondApprover:
		e = protocol.Errorf(protocol.Denied, "this proposal needs a second approver: another principal must confirm it")
	case len(d.Policies) > 0:
		e = protocol.Errorf(protocol.Denied, "refused by policy %s", strings.Join(d.PolicyIDs(), ", "))
	default:
		e = protocol.Errorf(protocol.Denied, "no policy permits this")
	}
	e = e.With("reason", d.Reason)
	if len(d.Policies) > 0 {
		e = e.With("policies", d.PolicyIDs())
	}
	return e
}

// String is a decision in one line: "deny (role, needs operator)".
func (d Decision) String() string {
	s := string(d.Effect)
	var parts []string
	if d.Reason != "" {
		parts = append(parts, d.Reason)
	}
	if d.Needed != "" {
		parts = append(parts, "needs "+string(d.Needed))
	}
	if d.Obligation != "" {
		parts = append(parts, string(d.Obligation))
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}

// describe is a resource in a log line or an audit row.
func describe(r Resource) string { return fmt.Sprintf("%s::%q", r.Kind(), r.ResourceID()) }
