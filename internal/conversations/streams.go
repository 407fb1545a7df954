package conversations

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/feed"
	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// CreateStreamTicket issues a one-use credential for one conversation and
// cursor (docs/design.md §12), minted by minter, whose credential its
// redemption checks again. Only its SHA-256 is stored.
func (s *Service) CreateStreamTicket(ctx context.Context, req protocol.StreamTicketRequest, minter store.TicketMinter) (protocol.StreamTicket, error) {
	conv, err := Get(ctx, s.store, req.ConversationID)
	if err != nil {
		return protocol.StreamTicket{}, err
	}
	if req.AfterSequence < 0 {
		return protocol.StreamTicket{}, protocol.Errorf(protocol.Validation, "afterSequence must be at least 0").With("field", "afterSequence")
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return protocol.StreamTicket{}, fmt.Errorf("ticket entropy: %w", err)
	}
	ticket := protocol.TicketPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	now := s.now()
	expires := now.Add(s.cfg.TicketTTL)
	if err := s.store.CreateStreamTicket(ctx, store.CreateStreamTicketParams{
		TicketHash: hashTicket(ticket), ConversationID: conv.ID, AfterSequence: req.AfterSequence, Minter: minter,
		ExpiresAt: expires, Now: now,
	}); err != nil {
		return protocol.StreamTicket{}, err
	}
	return protocol.StreamTicket{Ticket: ticket, ExpiresAt: protocol.Timestamp(expires)}, nil
}

// hashTicket is the stored form of a ticket.
func hashTicket(ticket string) string {
	sum := sha256.Sum256([]byte(ticket))
	return hex.EncodeToString(sum[:])
}

// RedeemStreamTicket spends a ticket for exactly the conversation and cursor
// it was issued for (anything else is auth_required) and returns who
// minted it, for the caller to authenticate and decide again.
func (s *Service) RedeemStreamTicket(ctx context.Context, ticket, convID string, after int64) (store.TicketMinter, error) {
	t, err := s.store.RedeemStreamTicket(ctx, store.RedeemStreamTicketParams{TicketHash: hashTicket(ticket), Now: s.now()})
	if err != nil {
		return store.TicketMinter{}, err
	}
	if t.ConversationID != convID || t.AfterSequence != after {
		return store.TicketMinter{}, protocol.Errorf(protocol.AuthRequired, "stream ticket was issued for another conversation or cursor")
	}
	return t.Minter, nil
}

// AccessSignal is closed by the next commit, in any daemon sharing the
// database, that may take a right away (store.AccessChanged): an open
// stream decides again when it fires.
func (s *Service) AccessSignal() <-chan struct{} { return s.store.ControlSignal(store.AccessChanged) }

// PolicyResource is a conversation of any status as policies see it, for
// a door to decide on before it acts; not_found when there is none. It
// applies no visibility: the decision does.
func (s *Service) PolicyResource(ctx context.Context, id string) (policy.Conversation, error) {
	if _, err := uuid.Parse(id); err != nil {
		return policy.Conversation{}, notFound(id)
	}
	conv, err := s.store.GetConversation(ctx, id)
	if err != nil {
		return policy.Conversation{}, err
	}
	return policy.ConversationOf(conv), nil
}

// OpenStream checks that a stream from cursor after may start: the
// conversation is visible and the cursor is not older than retained frames.
// last is the conversation's last sequence as it read it.
func (s *Service) OpenStream(ctx context.Context, convID string, after int64) (last int64, err error) {
	conv, err := s.openStream(ctx, convID, after)
	return conv.LastSequence(), err
}

func (s *Service) openStream(ctx context.Context, convID string, after int64) (store.Conversation, error) {
	conv, err := Get(ctx, s.store, convID)
	if err != nil {
		return conv, err
	}
	if after < 0 {
		return conv, protocol.Errorf(protocol.Validation, "after_sequence must be at least 0").With("field", "after_sequence")
	}
	return conv, replayGap(conv, after)
}

// replayGap refuses a cursor older than the retained frames
// (docs/design.md §11): the stream never silently starts later.
func replayGap(conv store.Conversation, after int64) error {
	if after+1 < conv.RetainedFrom {
		return protocol.Errorf(protocol.ReplayGap, "frames up to %d were purged", conv.RetainedFrom-1).
			With("earliestAfterSequence", conv.RetainedFrom-1)
	}
	return nil
}

// ReadFrames reads one page of frames after a cursor, checking for a purge
// that happened while the stream was open.
func (s *Service) ReadFrames(ctx context.Context, convID string, after int64, limit int) ([]protocol.RawFrame, error) {
	frames, err := s.store.ListFrames(ctx, store.ListFramesParams{ConversationID: convID, AfterSequence: after, Limit: limit})
	if err != nil {
		return nil, err
	}
	if len(frames) > 0 && frames[0].Sequence != after+1 {
		conv, err := s.store.GetConversation(ctx, convID)
		if err != nil {
			return nil, err
		}
		if err := replayGap(conv, after); err != nil {
			return nil, err
		}
	}
	out := make([]protocol.RawFrame, len(frames))
	for i, f := range frames {
		out[i] = f.Wire()
	}
	return out, nil
}

// Subscribe follows the conversation's commits from memory: the live part of a
// stream (feed.Feed).
func (s *Service) Subscribe(convID string) *feed.Subscription { return s.store.Subscribe(convID) }

// Page returns a conversation with one page of frames after a cursor, and
// its active turn's progress as the engine knows it.
func (s *Service) Page(ctx context.Context, convID string, after int64, limit int) (protocol.ConversationPage, error) {
	conv, err := s.openStream(ctx, convID, after)
	if err != nil {
		return protocol.ConversationPage{}, err
	}
	if limit <= 0 || limit > 1000 {
		limit = 200
	}
	frames, err := s.ReadFrames(ctx, convID, after, limit+1)
	if err != nil {
		return protocol.ConversationPage{}, err
	}
	page := protocol.ConversationPage{Conversation: View(conv), Frames: []protocol.RawFrame{},
		NextAfterSequence: after, LatestSequence: conv.LastSequence(), ActiveTurn: s.engine.TurnProgress(ctx, conv)}
	if len(frames) > limit {
		frames, page.HasMore = frames[:limit], true
	}
	page.Frames = append(page.Frames, frames...)
	if len(frames) > 0 {
		page.NextAfterSequence = frames[len(frames)-1].Sequence
	}
	return page, nil
}
