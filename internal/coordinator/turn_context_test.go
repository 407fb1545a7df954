package coordinator

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/studio/operator/internal/store"
)

// TestCompileReadsEndWithTheTurn: compile runs under durable, whose
// context outlives the turn's so that writes finish; its reads of the
// turn's frames must still end when the turn's context does (the
// shutdown's deadline), or a turn of very many frames holds the shutdown.
// A turn that has already ended starts no read at all: the reads' context
// must not wait for a goroutine to learn that the turn is over.
func TestCompileReadsEndWithTheTurn(t *testing.T) {
	t.Parallel()
	st, turn := benchTurnStore(t, 2*turnPage)
	defer st.Close()
	reads := &liveReads{Store: st}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the shutdown's deadline passed
	o := &owner{c: &Coordinator{store: reads}, turn: turn, ctx: ctx}
	if _, err := o.compile(context.WithoutCancel(ctx)); !errors.Is(err, context.Canceled) {
		t.Fatalf("compile of a stopped turn = %v, want its reads cancelled", err)
	}
	if n := reads.live.Load(); n != 0 {
		t.Fatalf("%d reads of a stopped turn started on a live context", n)
	}
}

// liveReads counts the frame reads that start on a context not yet done.
type liveReads struct {
	store.Store
	live atomic.Int32
}

func (s *liveReads) ListFrames(ctx context.Context, p store.ListFramesParams) ([]store.Frame, error) {
	if ctx.Err() == nil {
		s.live.Add(1)
	}
	return s.Store.ListFrames(ctx, p)
}
