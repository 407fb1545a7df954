package coordinator

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"

	"github.com/studio/operator/internal/conversations"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/tools"
)

// Commands from outside agents (an MCP client): each becomes a turn of
// the agent's own conversation whose one tool call is the command, so its
// proposal is made, parked, confirmed, expired, fenced and audited by the
// same owner code as a model's — the turn's submitter (the agent's
// principal) is the proposal's author, the confirming human the
// decision's actor. Nothing an agent sends decides a proposal.
//
// This file is the agents' face and only calls into the engine; the
// owner's side is where its name says: the turn's one round (talk.go's
// agentTalk), the call it carries (context.go's agentCall), the
// proposal's audit row (proposals.go's agentProposalAudit).

// agentNamespace derives the id of an agent's conversation from its
// principal and client name: the id is the stored key that finds it again,
// on any daemon, without a column of its own.
var agentNamespace = uuid.MustParse("5c0f3c1e-7a43-4d0e-9a55-3b8f0e1c2a71")

// agentConversationGenerations bounds the successors tried when an agent's
// conversation was deleted or archived.
const agentConversationGenerations = 32

// AgentConversation returns the active conversation of principal p and
// client (one per pair, titled after the client), creating it on first
// use. One deleted or archived is replaced by a successor.
func (c *Coordinator) AgentConversation(ctx context.Context, p protocol.Principal, client string) (protocol.Conversation, error) {
	client = ClientName(client)
	if p.ID == "" {
		return protocol.Conversation{}, protocol.Errorf(protocol.AuthRequired, "an agent's commands need a principal")
	}
	title := fmt.Sprintf("%s (agent %s)", client, p.Name)
	for gen := 0; gen < agentConversationGenerations; gen++ {
		id := uuid.NewSHA1(agentNamespace, []byte(fmt.Sprintf("%s\x00%s\x00%d", p.ID, client, gen))).String()
		conv, err := c.ensureConversation(ctx, store.CreateConversationParams{ID: id, Title: &title, Owner: p.Name, Visibility: protocol.VisibilityTeam, Now: c.now()})
		if err != nil {
			return protocol.Conversation{}, err
		}
		if conv.Status == store.ConversationActive {
			return conversations.View(conv), nil
		}
	}
	return protocol.Conversation{}, protocol.Errorf(protocol.Conflict, "every conversation of this agent and client was deleted or archived; use another client name")
}

// ensureConversation returns the conversation of id cp.ID, creating it
// with cp when there is none: the id is derived from what finds it again.
func (c *Coordinator) ensureConversation(ctx context.Context, cp store.CreateConversationParams) (store.Conversation, error) {
	conv, err := c.store.GetConversation(ctx, cp.ID)
	if !protocol.IsCode(err, protocol.NotFound) {
		return conv, err
	}
	var cerr error
	conv, cerr = c.store.CreateConversation(ctx, cp)
	err = cerr
	// A failed create is one made meanwhile (a concurrent call, another
	// daemon), whose commit may not be visible yet.
	for wait := 5 * time.Millisecond; cerr != nil && wait <= 640*time.Millisecond; wait *= 2 {
		if conv, err = c.store.GetConversation(ctx, cp.ID); !protocol.IsCode(err, protocol.NotFound) {
			break
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return store.Conversation{}, ctx.Err()
		}
	}
	if protocol.IsCode(err, protocol.NotFound) {
		err = cerr
	}
	return conv, err
}

// ClientName is an MCP client's name as conversations and instructions
// show it: printable, at most 64 characters, "mcp client" when empty.
func ClientName(name string) string {
	name = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return -1
	}, strings.TrimSpace(name))
	if r := []rune(name); len(r) > 64 {
		name = string(r[:64])
	}
	if name == "" {
		return "mcp client"
	}
	return name
}

// AgentCommand is a command an outside agent asks for.
type AgentCommand struct {
	// ConversationID is the agent's conversation (AgentConversation).
	ConversationID string
	// Tool is a command tool of the registry; Arguments its input.
	Tool      string
	Arguments jsontext.Value
	// Client is the client's name, for the turn's instruction.
	Client string
	// Direct is a person's direct command that needs a second approver
	// (RequestApproval): the turn says who asks, and its audit row is
	// an approval request.
	Direct *directAsk
}

// AgentProposal is the proposal an agent's command made, or the identical
// one that was pending already (Existing).
type AgentProposal struct {
	Proposal protocol.ProposalState
	Existing bool
}

// agentSubmitTries bounds the submissions of one command that lose a race
// with another turn of the same conversation.
const agentSubmitTries = 5

// ProposeForAgent validates an agent's command as fully as a model's
// (decoded strictly by its tool, then prepared against the current state)
// and makes it a pending proposal through a turn of the agent's
// conversation, returning as soon as the proposal is stored. A command
// identical to the conversation's pending proposal answers that proposal
// (clients resend after a broken stream); another command while one is
// pending is conflict: one change at a time, as in a model's turn. At
// most MaxProposalsPerTurn proposals are made per ProposalTTL window of a
// conversation (rate_limited past it).
func (c *Coordinator) ProposeForAgent(ctx context.Context, ac AgentCommand) (AgentProposal, error) {
	if c.cfg.Commands == nil || c.cfg.Tools == nil {
		return AgentProposal{}, protocol.Errorf(protocol.Denied, "commands cannot be proposed here")
	}
	spec, err := c.commandTool(ac.Tool)
	if err != nil {
		return AgentProposal{}, err
	}
	args := ac.Arguments
	if len(args) == 0 {
		args = jsontext.Value(`{}`)
	}
	out, err := spec.Run(ctx, tools.Env{}, args)
	if err != nil {
		return AgentProposal{}, toolError(c, err)
	}
	prep, err := c.cfg.Commands.Prepare(ctx, out.Command)
	if err != nil {
		return AgentProposal{}, toolError(c, err)
	}
	return c.proposePrepared(ctx, ac, spec.ID, prep)
}

// commandTool is the registry's command tool named tool.
func (c *Coordinator) commandTool(tool string) (tools.Spec, error) {
	spec, ok := c.cfg.Tools.Lookup(tool)
	if !ok || spec.Class.RunsInTurn() {
		return tools.Spec{}, protocol.Errorf(protocol.Validation, "%q is not a command tool", tool).With("tool", tool)
	}
	return spec, nil
}

// proposePrepared is ProposeForAgent once its command is prepared (by
// tool toolID): the turn that makes it a pending proposal.
func (c *Coordinator) proposePrepared(ctx context.Context, ac AgentCommand, toolID string, prep studio.Prepared) (AgentProposal, error) {
	for try := 0; try < agentSubmitTries; try++ {
		conv, err := c.conversation(ctx, ac.ConversationID)
		if err != nil {
			return AgentProposal{}, err
		}
		if conv.ActiveRequestID != nil {
			p, err := c.awaitAgentProposal(ctx, conv.ID, *conv.ActiveRequestID)
			if err != nil && protocol.CodeOf(err) == "" {
				return AgentProposal{}, err
			}
			if p != nil && p.Status == store.ProposalPending && !c.now().Before(p.ExpiresAt) {
				// Past its expiry but not swept yet: expire it now (its
				// owner does, as the sweeper would), then look again.
				if _, err := c.deliverDecision(ctx, *p, decideExpire); err != nil && protocol.CodeOf(err) == "" {
					return AgentProposal{}, err
				}
				continue
			}
			if p != nil && p.Status == store.ProposalPending {
				if p.CommandType == prep.Type && string(p.Command) == string(prep.Canonical) {
					return AgentProposal{Proposal: proposalView(*p), Existing: true}, nil
				}
				return AgentProposal{}, protocol.Errorf(protocol.Conflict,
					"proposal %s of this client still awaits a human; propose one change at a time", p.ID).With("proposalId", p.ID)
			}
			if err := c.awaitTurnEnd(ctx, conv.ID, *conv.ActiveRequestID); err != nil {
				return AgentProposal{}, err
			}
			continue
		}
		if err := c.agentWindow(ctx, conv.ID); err != nil {
			return AgentProposal{}, err
		}
		expected := conv.LastSequence()
		call := agentCall{CallID: "call_" + uuid.NewString(), Tool: toolID, Arguments: prep.Canonical, Client: ClientName(ac.Client)}
		req := protocol.TurnRequest{Instruction: fmt.Sprintf("%s asks: %s", call.Client, prep.Summary), ExpectedLastSequence: &expected,
			Context: protocol.ContextSnapshot{Space: "mission", Route: "/mission"}, Client: protocol.ClientMCP}
		if ac.Direct != nil {
			call.Direct = true
			req.Instruction, req.Client = fmt.Sprintf("%s asks for approval: %s", ac.Direct.requester, prep.Summary), protocol.ClientText
		}
		acc, err := c.submit(ctx, conv.ID, "", req, contextRecord{Snapshot: req.Context, Client: req.Client, Agent: &call})
		if protocol.IsCode(err, protocol.Conflict) || protocol.IsCode(err, protocol.StaleContext) {
			continue // another turn of the conversation came first: look again
		}
		if err != nil {
			return AgentProposal{}, err
		}
		p, err := c.awaitAgentProposal(ctx, conv.ID, acc.RequestID)
		if err != nil {
			return AgentProposal{}, err
		}
		if p == nil {
			return AgentProposal{}, protocol.Errorf(protocol.ServiceFailure, "the command's turn ended without a proposal")
		}
		return AgentProposal{Proposal: proposalView(*p)}, nil
	}
	return AgentProposal{}, protocol.Errorf(protocol.Conflict, "this client's conversation is busy; try again").With("retryable", true)
}

// agentWindow refuses a proposal past MaxProposalsPerTurn in the last
// ProposalTTL of a conversation: an agent's calls are capped as a model's
// turn is.
func (c *Coordinator) agentWindow(ctx context.Context, convID string) error {
	max := c.cfg.MaxProposalsPerTurn
	ps, err := c.store.ListProposals(ctx, store.ListProposalsParams{ConversationID: convID, Limit: max})
	if err != nil {
		return err
	}
	if len(ps) < max {
		return nil
	}
	oldest := ps[0].CreatedAt
	for _, p := range ps {
		if p.CreatedAt.Before(oldest) {
			oldest = p.CreatedAt
		}
	}
	free := oldest.Add(c.cfg.ProposalTTL).Sub(c.now())
	if free <= 0 {
		return nil
	}
	return &protocol.Error{Code: protocol.RateLimited, Retryable: true, RetryAfterMs: max64(free.Milliseconds(), 1),
		Message: fmt.Sprintf("this client made %d proposals within %s, the most allowed; try again later", max, c.cfg.ProposalTTL),
		Details: map[string]any{"limit": "proposals_per_window", "max": max}}
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// agentPoll bounds a wait for another daemon's commit, whose frame signal
// may not reach this one.
const agentPoll = time.Second

// awaitAgentProposal waits until the agent turn requestID has stored its
// proposal (returned) or ended without one: then the tool's error, when
// the turn answered the call with one, else nil.
func (c *Coordinator) awaitAgentProposal(ctx context.Context, convID, requestID string) (*store.Proposal, error) {
	for {
		sig := c.store.FrameSignal(convID) // before the reads: no commit is missed
		ps, err := c.store.ListProposals(ctx, store.ListProposalsParams{RequestID: requestID, Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(ps) > 0 {
			return &ps[0], nil
		}
		t, err := c.store.GetTurn(ctx, requestID)
		if err != nil {
			return nil, err
		}
		if t.Status.Terminal() {
			return nil, c.agentTurnError(ctx, t)
		}
		select {
		case <-sig:
		case <-time.After(agentPoll):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// awaitTurnEnd waits until the turn requestID ended.
func (c *Coordinator) awaitTurnEnd(ctx context.Context, convID, requestID string) error {
	for {
		sig := c.store.FrameSignal(convID)
		t, err := c.store.GetTurn(ctx, requestID)
		if err != nil || t.Status.Terminal() {
			return err
		}
		select {
		case <-sig:
		case <-time.After(agentPoll):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// agentTurnError is why an ended agent turn made no proposal: its tool
// result's error, else its own.
func (c *Coordinator) agentTurnError(ctx context.Context, t store.Turn) error {
	var found error
	err := c.scanTurn(ctx, t, func(f store.Frame) bool { // page by page, to the first error
		switch f.Type {
		case protocol.FrameToolResult:
			var r protocol.ToolResultPayload
			if protocol.Unmarshal(f.Payload, &r) == nil && r.Error != nil {
				found = r.Error
			}
		case protocol.FrameError:
			var e protocol.Error
			if protocol.Unmarshal(f.Payload, &e) == nil && e.Code != "" {
				found = &e
			}
		}
		return found == nil
	})
	if err != nil {
		return err
	}
	return found
}
