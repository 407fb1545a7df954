package main

import (
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
)

// aguiCases are the AG-UI door's cases for p (POST /api/agui): a new
// thread, a turn on each conversation, its history, and a resume that
// confirms or denies each proposal. A resume's second entry names no
// interrupt: every entry is decided before any is applied, so an allowed
// one changes nothing (404 for the unknown one, after the policy said yes).
func (f *matrixFixture) aguiCases(p *matrixPrincipal) []matrixCase {
	run := func(thread string, msgs []any, resume []any) map[string]any {
		in := map[string]any{"threadId": thread, "runId": uuid.NewString(), "messages": msgs, "tools": []any{}, "context": []any{}}
		if resume != nil {
			in["resume"] = resume
		}
		return in
	}
	say := []any{map[string]any{"id": "u1", "role": "user", "content": "matrix"}}
	mk := func(name string, steps []step, body map[string]any, ids ...string) matrixCase {
		return matrixCase{door: "agui", name: name, who: p, steps: steps, run: func(t *testing.T) verdict {
			return f.call(t, p.token, http.MethodPost, "/api/agui", body, ids...)
		}}
	}
	thread := uuid.NewString()
	out := []matrixCase{mk("a new thread", []step{{policy.CreateConversation, policy.Studio{}, false},
		{policy.Converse, policy.Conversation{ID: thread, Owner: p.Name, Visibility: protocol.VisibilityTeam}, false}}, run(thread, say, nil))}
	for variant, convs := range f.variants(p) {
		for _, cf := range convs {
			read := step{policy.ReadConversation, cf.conv, true}
			name := variant + " " + cf.prop.CommandType
			out = append(out,
				// The conversation's turn waits on its proposal: an allowed
				// turn is refused busy (409), nothing runs.
				mk("a turn on "+name, []step{read, {policy.Converse, cf.conv, false}}, run(cf.conv.ID, say, nil), cf.conv.ID),
				mk("the history of "+name, []step{read}, run(cf.conv.ID, []any{}, nil), cf.conv.ID))
			for _, d := range []struct {
				action   policy.Action
				decision string
			}{{policy.Confirm, "confirm"}, {policy.Deny, "deny"}} {
				resume := []any{
					map[string]any{"interruptId": cf.prop.ID, "status": "resolved", "payload": map[string]any{"decision": d.decision}},
					map[string]any{"interruptId": uuid.NewString(), "status": "cancelled"},
				}
				out = append(out, mk(d.decision+" the interrupt of "+name,
					[]step{read, {policy.ReadProposal, cf.prop, true}, {d.action, cf.prop, false}},
					run(cf.conv.ID, say, resume), cf.conv.ID, cf.prop.ID))
			}
		}
	}
	return out
}
