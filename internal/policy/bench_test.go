package policy_test

import (
	"testing"

	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
)

func BenchmarkDecideReadConversation(b *testing.B) {
	e := policy.Default()
	p := who("alice", protocol.RoleViewer)
	r := policy.Conversation{ID: "c1", Owner: "bob", Visibility: protocol.VisibilityTeam}
	for b.Loop() {
		if !e.Decide(p, policy.ReadConversation, r, http).Allowed() {
			b.Fatal("denied")
		}
	}
}

func BenchmarkDecideDenied(b *testing.B) {
	e := policy.Default()
	p := who("alice", protocol.RoleViewer)
	r := policy.Conversation{ID: "c1", Owner: "alice", Visibility: protocol.VisibilityTeam}
	for b.Loop() {
		if e.Decide(p, policy.DeleteConversation, r, http).Allowed() {
			b.Fatal("allowed")
		}
	}
}
