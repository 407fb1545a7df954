package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlite"
)

// TestProcessKill9UnderSaturatedAppends: the daemon is killed (SIGKILL)
// while many turns append as fast as group commit takes them. After
// restart every frame a client had received is on disk, as received, and
// no conversation has a gap in its sequences: a frame reaches a stream
// only after the commit that makes it durable.
func TestProcessKill9UnderSaturatedAppends(t *testing.T) {
	t.Parallel()
	var steps []string
	for i := range 3000 {
		steps = append(steps, fmt.Sprintf(`{"text":"token-%d "},{"sleepMs":1}`, i))
	}
	kill9UnderLoad(t, `{"turns":[{"steps":[`+strings.Join(steps, ",")+`]}]}`, 24, 1500, "--text-flush", "1ms", "--workers", "64")
}

// TestProcessKill9UnderPipelinedAppends: the same kill while a few turns
// produce frames far faster than commits come (8 KiB texts, each a frame
// at once, no pause), so each append carries the many frames its turn
// queued while the previous one committed. What a client received is on
// disk all the same.
func TestProcessKill9UnderPipelinedAppends(t *testing.T) {
	t.Parallel()
	chunk := strings.Repeat("p", 8<<10)
	var steps []string
	for range 2000 {
		steps = append(steps, `{"text":"`+chunk+`"}`)
	}
	kill9UnderLoad(t, `{"turns":[{"steps":[`+strings.Join(steps, ",")+`]}]}`, 4, 800, "--workers", "8")
}

// kill9UnderLoad starts a daemon with the script, submits a turn on each
// of conversations, kills the daemon once clients received killAfter
// frames, and checks the database against what they received.
func kill9UnderLoad(t *testing.T, script string, conversations int, killAfter int64, flags ...string) {
	scriptPath := writeScript(t, script)
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir, append([]string{"--model", "script:" + scriptPath}, flags...)...)
	ctx := testCtx(t)
	streamCtx, stop := context.WithCancel(ctx)
	defer stop()

	type received struct {
		mu     sync.Mutex
		frames []protocol.Frame
	}
	got := make([]*received, conversations)
	ids := make([]string, conversations)
	var total atomic.Int64
	// The kill is armed once every turn is submitted: on a busy machine the
	// first turns can stream killAfter frames before the last one starts.
	var armed atomic.Bool
	killed := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for i := range conversations {
		conv, err := d.client.CreateConversation(ctx, protocol.CreateConversationRequest{})
		if err != nil {
			t.Fatal(err)
		}
		ids[i], got[i] = conv.ID, &received{}
		zero := int64(0)
		if _, err := d.client.SubmitTurn(ctx, conv.ID, protocol.TurnRequest{Instruction: "go",
			Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &zero}); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			_ = d.client.Stream(streamCtx, conv.ID, 0, func(f protocol.Frame) error {
				got[i].mu.Lock()
				got[i].frames = append(got[i].frames, f)
				got[i].mu.Unlock()
				if total.Add(1) >= killAfter && armed.Load() {
					once.Do(func() { close(killed); d.kill() }) // closed first: the exit it causes is never "before the kill"
				}
				return nil
			})
		})
	}
	armed.Store(true)
	select {
	case <-killed:
	case <-d.exited:
		select {
		case <-killed: // the kill's own exit, seen first
		default:
			t.Fatalf("the daemon exited before the kill:\n%s", d.Logs())
		}
	case <-ctx.Done():
		t.Fatalf("only %d frames streamed", total.Load())
	}
	<-d.exited
	stop()
	wg.Wait()

	st, err := sqlite.Open(filepath.Join(dataDir, "studio.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	checked := 0
	for i, id := range ids {
		conv, err := st.GetConversation(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		stored := map[int64]store.Frame{}
		for after := int64(0); ; {
			fs, err := st.ListFrames(ctx, store.ListFramesParams{ConversationID: id, AfterSequence: after, Limit: 500})
			if err != nil {
				t.Fatal(err)
			}
			if len(fs) == 0 {
				break
			}
			for _, f := range fs {
				if f.Sequence != after+1 {
					t.Fatalf("conversation %d: sequence %d follows %d on disk: a gap", i, f.Sequence, after)
				}
				stored[f.Sequence] = f
				after = f.Sequence
			}
		}
		if int64(len(stored)) != conv.LastSequence() {
			t.Fatalf("conversation %d: %d frames on disk, next_sequence says %d", i, len(stored), conv.LastSequence())
		}
		for _, f := range got[i].frames {
			s, ok := stored[f.Sequence]
			if !ok {
				t.Fatalf("conversation %d: frame %d reached a client but is not on disk (%d stored)", i, f.Sequence, len(stored))
			}
			want, err := protocol.Marshal(s.Wire())
			if err != nil {
				t.Fatal(err)
			}
			back, err := protocol.DecodeFrame(want)
			if err != nil {
				t.Fatal(err)
			}
			if back.Type != f.Type || back.RequestID != f.RequestID || fmt.Sprint(back.Payload) != fmt.Sprint(f.Payload) {
				t.Fatalf("conversation %d frame %d: received %+v, on disk %+v", i, f.Sequence, f, back)
			}
			checked++
		}
	}
	if int64(checked) < killAfter {
		t.Fatalf("checked %d received frames, want at least %d", checked, killAfter)
	}
}
