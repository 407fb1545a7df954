package coordinator_test

import (
	"context"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/studio/operator/internal/coordinator/coordtest"
	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/testutil"
)

// chunkProvider answers with chunks of 8 KiB text (each a frame of its
// own: the owner writes that much at once). After the first it waits until
// its commit is paused (inFlight), and streamed closes when it sent the
// last.
type chunkProvider struct {
	chunks   []string
	inFlight *coordtest.Pause
	streamed chan struct{}
}

func (chunkProvider) Name() string { return "chunks" }

func (p chunkProvider) Stream(ctx context.Context, _ model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		for i, c := range p.chunks {
			if !yield(model.Event{Kind: model.EventText, Text: c}, nil) {
				return
			}
			if i == 0 {
				select {
				case <-p.inFlight.Reached():
				case <-ctx.Done():
					return
				}
			}
		}
		close(p.streamed)
	}
}

// TestTurnProducesWhileItsFramesCommit: a turn goes on streaming while its
// first frame's commit is held; what it produced meanwhile is appended in
// one write after that commit, in order, and the turn completes with every
// chunk once. A turn that waited for each commit before reading its model
// again never gets past the first.
func TestTurnProducesWhileItsFramesCommit(t *testing.T) {
	t.Parallel()
	chunks := make([]string, 6)
	for i := range chunks {
		chunks[i] = strings.Repeat(string(rune('a'+i)), 8<<10-1) + " " // a word ends each: the redactor holds none back
	}
	prov := chunkProvider{chunks: chunks, streamed: make(chan struct{})}
	e := newEngine(t, engineOpts{provider: &prov})
	isText := func(arg any) bool {
		_, ok := arg.(store.AppendFramesParams).Frames[0].Payload.(protocol.TextPayload)
		return ok
	}
	prov.inFlight = e.store.Arm("AppendFrames", isText)
	var mu sync.Mutex
	var appends []int // frames per append of text, after the held one
	e.store.Arm("AppendFrames", func(arg any) bool {
		if isText(arg) {
			mu.Lock()
			appends = append(appends, len(arg.(store.AppendFramesParams).Frames))
			mu.Unlock()
		}
		return false // a recorder: it never stops a call
	})
	conv := e.conversation()
	acc := e.submit(conv, "talk")
	select {
	case <-prov.streamed:
	case <-time.After(testutil.Patience): // a safety net
		t.Fatal("the turn stopped reading its model while its first frame's commit was held")
	}
	prov.inFlight.Release()
	frames := e.waitDone(conv, acc.RequestID)
	if k := kinds(frames); k[len(k)-1] != "done:completed" {
		t.Fatalf("turn: %v", k)
	}
	if got := textOf(frames, acc.RequestID); got != strings.Join(chunks, "") {
		t.Fatalf("text: %d bytes, want the %d chunks once, in order", len(got), len(chunks))
	}
	for i := 1; i < len(frames); i++ {
		if frames[i].Sequence != frames[i-1].Sequence+1 {
			t.Fatalf("sequences %d then %d", frames[i-1].Sequence, frames[i].Sequence)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(appends) != 1 || appends[0] != len(chunks)-1 {
		t.Fatalf("appends after the held one carried %v frames, want the other %d together", appends, len(chunks)-1)
	}
}
