package store

import (
	"context"
	"time"
)

// RetentionStore removes operator data on an administrator's request.
type RetentionStore interface {
	// PurgeFrames deletes a conversation's frames with sequence below
	// BeforeSequence and records the earliest retained sequence, so that
	// replay from an older cursor is a replay_gap; it wakes the
	// conversation's streams. BeforeSequence may be at most the next
	// sequence. Refused (conflict) while a turn is active.
	PurgeFrames(ctx context.Context, p PurgeFramesParams) (PurgeFramesResult, error)
	// PurgeDeletedConversations removes conversations deleted before the
	// cutoff with every dependent row (turns, frames, proposals, effects,
	// stream tickets). admin_events, append-only, keep their rows.
	PurgeDeletedConversations(ctx context.Context, p PurgeDeletedConversationsParams) (PurgeDeletedConversationsResult, error)
	// PurgeIdleConversations removes, the same way, the conversations not
	// used (no turn, frame or change) since UnusedBefore that are not
	// pinned, not deleted (PurgeDeletedConversations has those) and have
	// no active turn: the deployment's retention. Streams of this process
	// following a removed conversation end with replay_gap.
	PurgeIdleConversations(ctx context.Context, p PurgeIdleConversationsParams) (PurgeDeletedConversationsResult, error)
	// CountIdleConversations counts what PurgeIdleConversations would
	// remove with the same cutoff.
	CountIdleConversations(ctx context.Context, unusedBefore time.Time) (int64, error)
}

// PurgeIdleConversationsParams is the retention cutoff.
type PurgeIdleConversationsParams struct {
	UnusedBefore time.Time
	Audit        *AppendAdminEventParams
}

// PurgeFramesParams purges one conversation's older frames.
type PurgeFramesParams struct {
	ConversationID string
	BeforeSequence int64
	Now            time.Time
	Audit          *AppendAdminEventParams
}

// PurgeFramesResult counts what went and what stays.
type PurgeFramesResult struct {
	Purged       int64
	RetainedFrom int64
}

// PurgeDeletedConversationsParams is the recovery-window cutoff.
type PurgeDeletedConversationsParams struct {
	DeletedBefore time.Time
	Audit         *AppendAdminEventParams
}

// PurgeDeletedConversationsResult counts the removed rows.
type PurgeDeletedConversationsResult struct {
	IDs           []string // the removed conversations
	Conversations int64
	Turns         int64
	Frames        int64
	Proposals     int64
	Effects       int64
	Tickets       int64
}
