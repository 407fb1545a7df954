package coordinator_test

import (
	"context"
	"testing"
	"time"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// TestCancelDeniesAsTheCanceller: a principal's cancel of a turn parked
// on its proposal (here an agent's, of a turn alice submitted) denies the
// proposal as that principal: its decidedBy, the audit row's actor and
// the denied confirmation frame all name the canceller, on the daemon
// that holds the turn, on another one, and when the cancel is only
// recorded in the store (by a daemon that then went away).
func TestCancelDeniesAsTheCanceller(t *testing.T) {
	t.Parallel()
	alice := protocol.Principal{ID: "p-alice", Name: "alice", Role: protocol.RoleOperator}
	for _, name := range []string{"here", "another daemon", "recorded"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := sharedEngine(t, 2, 20*time.Millisecond)
			canceller := e.coord
			if name == "another daemon" {
				canceller = e.peer("b", 2)
			}
			conv := e.conversation()
			last := int64(0)
			acc, err := e.coord.SubmitTurn(protocol.WithPrincipal(e.ctx(), alice), conv, protocol.TurnRequest{Instruction: "toggle",
				Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &last})
			if err != nil {
				t.Fatal(err)
			}
			prop := e.waitProposal(conv, acc.RequestID)
			if name == "recorded" {
				if _, _, err := e.db.RequestCancel(e.ctx(), store.RequestCancelParams{RequestID: acc.RequestID, By: agentPrincipal.Name, Now: time.Now()}); err != nil {
					t.Fatal(err)
				}
			} else {
				cancelAs(t, canceller, protocol.WithPrincipal(e.ctx(), agentPrincipal), conv, acc.RequestID)
			}
			e.waitDone(conv, acc.RequestID)
			p := e.proposal(prop.ID)
			if p.Status != store.ProposalCancelled || p.DecidedBy != agentPrincipal.Name || p.SubmittedBy != "alice" {
				t.Fatalf("proposal %s decided by %q, submitted by %q; want cancelled by %s", p.Status, p.DecidedBy, p.SubmittedBy, agentPrincipal.Name)
			}
			rows, err := e.db.ListAdminEvents(e.ctx(), store.ListAdminEventsParams{Action: protocol.AuditAction, TargetID: prop.ID})
			if err != nil || len(rows) != 1 || rows[0].Actor != agentPrincipal.Name {
				t.Fatalf("audit rows %+v, %v; want one by %s", rows, err, agentPrincipal.Name)
			}
			denied := false
			for _, f := range e.frames(conv) {
				if c, ok := f.Payload.(protocol.ConfirmationPayload); ok && c.State == protocol.ConfirmationDenied {
					denied = c.DecidedBy == agentPrincipal.Name
				}
			}
			if !denied {
				t.Fatal("no denied confirmation frame decided by the canceller")
			}
		})
	}
}

func cancelAs(t *testing.T, c *coordinator.Coordinator, ctx context.Context, conv, requestID string) {
	t.Helper()
	if _, err := c.CancelTurn(ctx, conv, requestID); err != nil {
		t.Fatal(err)
	}
}
