package coordinator

import (
	"context"
	"errors"
	"testing"
)

// TestCompileReadsEndWithTheTurn: compile runs under durable, whose
// context outlives the turn's so that writes finish; its reads of the
// turn's frames must still end when the turn's context does (the
// shutdown's deadline), or a turn of very many frames holds the shutdown.
func TestCompileReadsEndWithTheTurn(t *testing.T) {
	t.Parallel()
	st, turn := benchTurnStore(t, 2*turnPage)
	defer st.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the shutdown's deadline passed
	o := &owner{c: &Coordinator{store: st}, turn: turn, ctx: ctx}
	if _, err := o.compile(context.WithoutCancel(ctx)); !errors.Is(err, context.Canceled) {
		t.Fatalf("compile of a stopped turn = %v, want its reads cancelled", err)
	}
}
