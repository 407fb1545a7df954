package coordinator_test

import (
	"testing"

	"github.com/studio/operator/internal/protocol"
)

// TestSameCommandNewProposalNewHash: the same command proposed in two turns
// is two proposals with two hashes (docs/design.md §9.1), each the hash of
// its command bound to its id; a hash of one never confirms the other.
func TestSameCommandNewProposalNewHash(t *testing.T) {
	t.Parallel()
	e := newEngine(t, engineOpts{script: &toggleScript})
	first, second := e.conversation(), e.conversation()
	_, a := e.toggle(first)
	_, b := e.toggle(second)
	if string(a.Command) != string(b.Command) {
		t.Fatalf("the two turns proposed different commands: %s, %s", a.Command, b.Command)
	}
	if a.CommandHash == b.CommandHash {
		t.Fatalf("two proposals of one command share hash %s", a.CommandHash)
	}
	for _, p := range []protocol.CommandProposal{a, b} {
		if want, _ := protocol.ProposalHash(p.Command, p.ID); p.CommandHash != want {
			t.Fatalf("proposal %s hash %s, want %s", p.ID, p.CommandHash, want)
		}
	}
	wrong := confirmReq(b)
	wrong.ExpectedCommandHash = a.CommandHash
	if _, err := e.coord.Confirm(e.ctx(), second, b.ID, wrong); protocol.CodeOf(err) != protocol.Conflict {
		t.Fatalf("confirm with the other proposal's hash: %v, want conflict", err)
	}
}
