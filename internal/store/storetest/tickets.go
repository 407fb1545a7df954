package storetest

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

func ticket(t *testing.T, f *fixture, convID string, after int64, ttl time.Duration) store.CreateStreamTicketParams {
	t.Helper()
	now := f.tick()
	p := store.CreateStreamTicketParams{TicketHash: newID(), ConversationID: convID, AfterSequence: after, ExpiresAt: now.Add(ttl), Now: now}
	if err := f.s.CreateStreamTicket(f.ctx, p); err != nil {
		t.Fatalf("CreateStreamTicket: %v", err)
	}
	return p
}

func testTicketRedeemOnce(t *testing.T, f *fixture) {
	c := f.conversation()
	p := ticket(t, f, c.ID, 7, time.Minute)
	now := f.tick()
	got, err := f.s.RedeemStreamTicket(f.ctx, store.RedeemStreamTicketParams{TicketHash: p.TicketHash, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if got.TicketHash != p.TicketHash || got.ConversationID != c.ID || got.AfterSequence != 7 ||
		!got.ExpiresAt.Equal(p.ExpiresAt) || !got.CreatedAt.Equal(p.Now) || !sameTime(got.UsedAt, &now) {
		t.Fatalf("redeemed ticket = %+v, created %+v", got, p)
	}
	_, err = f.s.RedeemStreamTicket(f.ctx, store.RedeemStreamTicketParams{TicketHash: p.TicketHash, Now: f.tick()})
	wantCode(t, err, protocol.AuthRequired)
}

// testTicketKeepsItsMinter: a ticket is redeemed with who minted it — a
// bearer token's principal and hash, or a sign-in proxy's user, the
// principal it signed in as and its groups — for the redemption to
// decide again.
func testTicketKeepsItsMinter(t *testing.T, f *fixture) {
	c := f.conversation()
	for _, m := range []store.TicketMinter{
		{PrincipalID: newID(), TokenHash: "hash-1"},
		{PrincipalID: newID(), ProxyUser: "alice@corp", Groups: []string{"ops", "admins"}},
	} {
		now := f.tick()
		p := store.CreateStreamTicketParams{TicketHash: newID(), ConversationID: c.ID, Minter: m, ExpiresAt: now.Add(time.Minute), Now: now}
		if err := f.s.CreateStreamTicket(f.ctx, p); err != nil {
			t.Fatal(err)
		}
		got, err := f.s.RedeemStreamTicket(f.ctx, store.RedeemStreamTicketParams{TicketHash: p.TicketHash, Now: f.tick()})
		if err != nil {
			t.Fatal(err)
		}
		if got.Minter.PrincipalID != m.PrincipalID || got.Minter.TokenHash != m.TokenHash || got.Minter.ProxyUser != m.ProxyUser ||
			strings.Join(got.Minter.Groups, ",") != strings.Join(m.Groups, ",") {
			t.Fatalf("redeemed minter %+v, want %+v", got.Minter, m)
		}
	}
}

func testTicketExpired(t *testing.T, f *fixture) {
	c := f.conversation()
	p := ticket(t, f, c.ID, 0, time.Minute)
	_, err := f.s.RedeemStreamTicket(f.ctx, store.RedeemStreamTicketParams{TicketHash: p.TicketHash, Now: p.ExpiresAt.Add(time.Millisecond)})
	wantCode(t, err, protocol.AuthRequired)
}

func testTicketUnknown(t *testing.T, f *fixture) {
	_, err := f.s.RedeemStreamTicket(f.ctx, store.RedeemStreamTicketParams{TicketHash: newID(), Now: f.tick()})
	wantCode(t, err, protocol.AuthRequired)
}

func testTicketMissingConversation(t *testing.T, f *fixture) {
	now := f.tick()
	err := f.s.CreateStreamTicket(f.ctx, store.CreateStreamTicketParams{TicketHash: newID(), ConversationID: newID(), ExpiresAt: now.Add(time.Minute), Now: now})
	if err == nil {
		t.Fatal("a ticket for a missing conversation was stored")
	}
}

func testTicketConcurrent(t *testing.T, f *fixture) {
	c := f.conversation()
	p := ticket(t, f, c.ID, 0, time.Minute)
	const n = 10
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = f.s.RedeemStreamTicket(f.ctx, store.RedeemStreamTicketParams{TicketHash: p.TicketHash, Now: p.Now.Add(time.Second)})
		})
	}
	wg.Wait()
	var ok int
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case protocol.IsCode(err, protocol.AuthRequired):
		default:
			t.Fatalf("unexpected error %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d concurrent redemptions succeeded, want exactly 1", ok)
	}
}
