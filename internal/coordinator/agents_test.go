package coordinator_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

var agentPrincipal = protocol.Principal{ID: "p-agent", Name: "claude", Role: protocol.RoleAgent}

// TestAgentProposalDecidedOnAnotherDaemon: an agent's command made on
// daemon a (its conversation found again by id on b) is the same proposal
// when resent on b, and a human's confirm on b adopts its parked turn,
// runs it once, and ends the turn once, completed, with the agent as the
// author and the human as the decider.
func TestAgentProposalDecidedOnAnotherDaemon(t *testing.T) {
	t.Parallel()
	e := sharedEngine(t, 2, 20*time.Millisecond)
	b := e.peer("b", 2)
	ctx := protocol.WithPrincipal(e.ctx(), agentPrincipal)
	conv, err := e.coord.AgentConversation(ctx, agentPrincipal, "ide")
	if err != nil {
		t.Fatal(err)
	}
	onB, err := b.AgentConversation(ctx, agentPrincipal, "ide")
	if err != nil || onB.ID != conv.ID || conv.Title == nil || *conv.Title != "ide (agent claude)" {
		t.Fatalf("agent conversations %+v and %+v (%v)", conv, onB, err)
	}
	cmd := coordinator.AgentCommand{ConversationID: conv.ID, Tool: "set_schedule_enabled", Client: "ide",
		Arguments: jsontext.Value(`{"schedule":"nightly-audit","enabled":true}`)}
	ap, err := e.coord.ProposeForAgent(ctx, cmd)
	if err != nil || ap.Existing || ap.Proposal.Status != string(store.ProposalPending) || ap.Proposal.SubmittedBy != "claude" {
		t.Fatalf("propose on a: %+v %v", ap, err)
	}
	again, err := b.ProposeForAgent(ctx, cmd)
	if err != nil || !again.Existing || again.Proposal.ID != ap.Proposal.ID {
		t.Fatalf("the resend on b: %+v %v", again, err)
	}
	human := protocol.WithPrincipal(e.ctx(), protocol.Principal{ID: "p-alice", Name: "alice", Role: protocol.RoleOperator})
	res, err := b.Confirm(human, conv.ID, ap.Proposal.ID, protocol.ConfirmProposalRequest{ExpectedCommandHash: ap.Proposal.CommandHash})
	if err != nil || res.Status != protocol.ResultSucceeded {
		t.Fatalf("confirm on b: %+v %v", res, err)
	}
	e.checkOneEnding(conv.ID, ap.Proposal.RequestID, ap.Proposal.CommandProposal)
	turn := e.waitTurn(ap.Proposal.RequestID, func(t store.Turn) bool { return t.Status.Terminal() })
	if turn.Status != store.TurnCompleted {
		t.Fatalf("the agent's turn ended %s", turn.Status)
	}
	if p := e.proposal(ap.Proposal.ID); p.DecidedBy != "alice" || p.SubmittedBy != "claude" {
		t.Fatalf("proposal decided by %q, submitted by %q", p.DecidedBy, p.SubmittedBy)
	}
}

// TestAgentCommandValidatedBeforeAnything: a command that could not run
// (an unknown schedule, a field the command lacks, a read tool's name) is
// its typed error, and no turn or proposal is made.
func TestAgentCommandValidatedBeforeAnything(t *testing.T) {
	t.Parallel()
	e := newEngine(t, engineOpts{})
	ctx := protocol.WithPrincipal(e.ctx(), agentPrincipal)
	conv, err := e.coord.AgentConversation(ctx, agentPrincipal, "ide")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool, args string
		want       protocol.ErrorCode
	}{
		{"set_schedule_enabled", `{"schedule":"no-such","enabled":true}`, protocol.NotFound},
		{"set_schedule_enabled", `{"schedule":"nightly-audit","enabled":true,"confirm":true}`, protocol.Validation},
		{"list_runs", `{}`, protocol.Validation},
		{"navigate", `{"space":"mission"}`, protocol.Validation},
	} {
		_, err := e.coord.ProposeForAgent(ctx, coordinator.AgentCommand{ConversationID: conv.ID, Tool: tc.tool, Arguments: jsontext.Value(tc.args)})
		if protocol.CodeOf(err) != tc.want {
			t.Errorf("%s %s: %v, want %s", tc.tool, tc.args, err, tc.want)
		}
	}
	if ps, _ := e.db.ListProposals(context.Background(), store.ListProposalsParams{Limit: 10}); len(ps) != 0 {
		t.Fatalf("%d proposals made", len(ps))
	}
	if fs := e.frames(conv.ID); len(fs) != 0 {
		t.Fatalf("frames written: %v", kinds(fs))
	}
}

// TestAgentProposalAuditedInItsWrite: an agent's proposal and its
// studio.agent.proposed audit row are one write, so a failing separate
// audit append (the store refuses AppendAdminEvent) cannot leave a
// proposal without the row naming its author.
func TestAgentProposalAuditedInItsWrite(t *testing.T) {
	t.Parallel()
	e := newEngine(t, engineOpts{})
	e.store.Fail("AppendAdminEvent", true)
	ctx := protocol.WithPrincipal(e.ctx(), agentPrincipal)
	conv, err := e.coord.AgentConversation(ctx, agentPrincipal, "ide")
	if err != nil {
		t.Fatal(err)
	}
	ap, err := e.coord.ProposeForAgent(ctx, coordinator.AgentCommand{ConversationID: conv.ID, Tool: "set_schedule_enabled", Client: "ide",
		Arguments: jsontext.Value(`{"schedule":"nightly-audit","enabled":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := e.db.ListAdminEvents(context.Background(), store.ListAdminEventsParams{Action: coordinator.AgentProposedAction, TargetID: ap.Proposal.ID, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Actor != "claude" {
		t.Fatalf("audit rows of the agent's proposal %s: %+v, want one by claude", ap.Proposal.ID, rows)
	}
}
