package main

import (
	"strings"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
)

// TestProposalFieldsNameARequestAsRequested: an approval request (a
// person asked for the command directly) is "requested by" its author,
// a turn's proposal "proposed by" the turn's.
func TestProposalFieldsNameARequestAsRequested(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ origin, want, not string }{
		{protocol.ProposalOriginRequest, "requested by:  alice", "proposed by"},
		{protocol.ProposalOriginTurn, "proposed by:   alice", "requested by"},
		{"", "proposed by:   alice", "requested by"},
	} {
		p := protocol.ProposalState{Status: "pending", SubmittedBy: "alice", CreatedAt: 1764500000}
		p.Origin, p.Command = tc.origin, []byte(`{}`)
		var b strings.Builder
		proposalFields(&b, p, "", false, time.Unix(1764500000, 0))
		if out := b.String(); !strings.Contains(out, tc.want) || strings.Contains(out, tc.not) {
			t.Errorf("origin %q: the fields do not say %q (or say %q):\n%s", tc.origin, tc.want, tc.not, out)
		}
	}
}
