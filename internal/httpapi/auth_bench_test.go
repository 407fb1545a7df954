package httpapi_test

import (
	"testing"
)

// BenchmarkAuthenticatedRequest measures one small authenticated request
// (GET /api/auth/whoami) over real HTTP: with the one configured token
// (single-token) and with a principal's token looked up in SQLite on
// every request (principals).
func BenchmarkAuthenticatedRequest(b *testing.B) {
	for _, principals := range []bool{false, true} {
		name := "single-token"
		if principals {
			name = "principals"
		}
		b.Run(name, func(b *testing.B) {
			h := newHarness(b, harnessOpts{principals: principals})
			ctx := b.Context()
			for b.Loop() {
				if _, err := h.client.Whoami(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
