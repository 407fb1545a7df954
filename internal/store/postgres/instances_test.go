package postgres

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/storetest"
)

// TestControlAcrossInstances: a cancel recorded through one Store, and an
// announcement, wake the control keys another Store (another daemon)
// waits on: the owner of a turn hears of a cancel sent to any daemon.
func TestControlAcrossInstances(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	a, b := openAt(t, url), openAt(t, url)
	ctx := t.Context()
	conv, err := a.CreateConversation(ctx, store.CreateConversationParams{ID: uuid.NewString(), Now: storetest.Epoch})
	if err != nil {
		t.Fatal(err)
	}
	tr, _, err := a.SubmitTurn(ctx, store.SubmitTurnParams{ConversationID: conv.ID, RequestID: uuid.NewString(), Instruction: "go",
		ContextJSON: []byte(`{}`), ContextHash: "h", Now: storetest.Epoch, Instance: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.StartTurn(ctx, store.StartTurnParams{RequestID: tr.RequestID, Now: storetest.Epoch, Instance: "a"}); err != nil {
		t.Fatal(err)
	}
	sig := a.ControlSignal(store.TurnKey(tr.RequestID))
	if _, _, err := b.RequestCancel(ctx, store.RequestCancelParams{RequestID: tr.RequestID, Now: storetest.Epoch}); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, sig)
	sig = a.ControlSignal(store.TurnsQueued)
	if err := b.Announce(ctx, store.TurnsQueued); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, sig)
}

// TestExclusive: daemons that start together run their start-up section
// (seeding) one at a time.
func TestExclusive(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	var inside, overlaps, runs atomic.Int32
	var wg sync.WaitGroup
	for range 3 {
		s := openAt(t, url)
		wg.Go(func() {
			for range 3 {
				err := s.Exclusive(t.Context(), func(context.Context) error {
					if inside.Add(1) > 1 {
						overlaps.Add(1)
					}
					runs.Add(1)
					// Give another holder the chance to overlap: a query on this database.
					_, err := s.ListInstances(t.Context(), store.ListInstancesParams{})
					inside.Add(-1)
					return err
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if overlaps.Load() != 0 || runs.Load() != 9 {
		t.Fatalf("%d of %d exclusive sections overlapped", overlaps.Load(), runs.Load())
	}
}
