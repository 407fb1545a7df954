package studio_test

import (
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/testutil"
)

const ninetyDays = 90 * 24 * time.Hour

// retentionFx is a service keeping conversations for 90 days, on the fake
// clock, with a conversation unused for 91 days, a pinned one as old, and
// one used a day ago.
func retentionFx(t *testing.T, interval time.Duration) (f *fx, old, pinned, recent string) {
	t.Helper()
	f = newFx(t, fxOpts{cfg: func(c *studio.Config) { c.Retention, c.RetentionInterval = ninetyDays, interval }})
	mk := func() string {
		c, err := f.st.CreateConversation(f.ctx, store.CreateConversationParams{ID: uuid.NewString(), Title: ptr("kept?"), Now: f.clock.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	old, pinned = mk(), mk()
	if _, err := f.st.UpdateConversation(f.ctx, store.UpdateConversationParams{ID: pinned, Pinned: ptr(true), Now: f.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(ninetyDays)
	recent = mk()
	f.clock.Advance(24 * time.Hour)
	return f, old, pinned, recent
}

// TestRetentionRemovesUnusedConversations: a pass removes the conversation
// unused for longer than the retention, with an audit row, and keeps the
// pinned and the recent one; doctor counts what a pass would remove.
func TestRetentionRemovesUnusedConversations(t *testing.T) {
	t.Parallel()
	f, old, pinned, recent := retentionFx(t, -1)
	rep, err := f.svc.Doctor(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Database.Retention; r == nil || r.Removable != 1 || r.AfterSeconds != ninetyDays.Seconds() {
		t.Fatalf("doctor retention = %+v, want 1 removable after 90 days", r)
	}
	res, err := f.svc.ApplyRetention(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed.Conversations != 1 || len(res.Removed.IDs) != 1 || res.Removed.IDs[0] != old {
		t.Fatalf("retention removed %+v, want %s only", res.Removed, old)
	}
	if _, err := f.st.GetConversation(f.ctx, old); !protocol.IsCode(err, protocol.NotFound) {
		t.Fatalf("the unused conversation: %v, want not_found", err)
	}
	for _, id := range []string{pinned, recent} {
		if _, err := f.st.GetConversation(f.ctx, id); err != nil {
			t.Fatalf("conversation %s was removed: %v", id, err)
		}
	}
	events, err := f.st.ListAdminEvents(f.ctx, store.ListAdminEventsParams{Action: studio.ActionRetention, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Actor != studio.ActorSystem {
		t.Fatalf("retention audit rows = %+v, want one by %s", events, studio.ActorSystem)
	}
	// The row says how many conversations went, and which.
	var details struct {
		Removed struct {
			Conversations int64 `json:"conversations"`
			Frames        int64 `json:"frames"`
		} `json:"removed"`
		IDs          []string `json:"conversation_ids"`
		UnusedBefore float64  `json:"unused_before"`
	}
	if err := json.Unmarshal(events[0].Details, &details); err != nil {
		t.Fatal(err)
	}
	if details.Removed.Conversations != 1 || details.Removed.Frames != res.Removed.Frames || len(details.IDs) != 1 || details.IDs[0] != old ||
		details.UnusedBefore == 0 {
		t.Fatalf("retention audit details = %s, want the count and the id %s", events[0].Details, old)
	}
	// Nothing left to remove: no further audit rows.
	if res, err := f.svc.ApplyRetention(f.ctx); err != nil || res.Removed.Conversations != 0 {
		t.Fatalf("second pass = %+v, %v", res, err)
	}
	if rep, err := f.svc.Doctor(f.ctx); err != nil || rep.Database.Retention.Removable != 0 {
		t.Fatalf("doctor after the pass: %+v, %v", rep.Database.Retention, err)
	}
}

// TestRetentionPassRunsOnStart: a started service runs a pass by itself.
func TestRetentionPassRunsOnStart(t *testing.T) {
	t.Parallel()
	f, old, _, recent := retentionFx(t, time.Hour)
	f.start()
	testutil.Eventually(t, func() bool {
		_, err := f.st.GetConversation(f.ctx, old)
		return protocol.IsCode(err, protocol.NotFound)
	}, "the started service to remove the unused conversation")
	if _, err := f.st.GetConversation(f.ctx, recent); err != nil {
		t.Fatal(err)
	}
}

// TestNoRetentionKeepsEverything: without a retention nothing is removed
// and doctor reports none.
func TestNoRetentionKeepsEverything(t *testing.T) {
	t.Parallel()
	f := newFx(t, fxOpts{})
	c, err := f.st.CreateConversation(f.ctx, store.CreateConversationParams{ID: uuid.NewString(), Now: f.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(10 * ninetyDays)
	if res, err := f.svc.ApplyRetention(f.ctx); err != nil || res.Removed.Conversations != 0 {
		t.Fatalf("ApplyRetention = %+v, %v", res, err)
	}
	if _, err := f.st.GetConversation(f.ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if rep, err := f.svc.Doctor(f.ctx); err != nil || rep.Database.Retention != nil {
		t.Fatalf("doctor retention = %+v, %v", rep.Database.Retention, err)
	}
}
