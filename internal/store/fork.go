package store

import "time"

// RestoreConversationParams restores a deleted conversation.
type RestoreConversationParams struct {
	ID string
	// DeletedAfter is the start of the recovery window: a conversation
	// deleted before it is no longer recoverable (not_found).
	DeletedAfter time.Time
	Audit        AppendAdminEventParams
	Now          time.Time
}

// ForkConversationParams forks a conversation. The fork's history is the
// source's retained frames from the first turn that starts within them up
// to UpToSequence, which must be the sequence of a done frame (a complete
// turn; validation naming the nearest boundaries otherwise), 0 for an
// empty fork, or nil for the newest complete turn; the frames are re-sequenced from 1 (done frames' lastSequence
// with them), and each copied turn gets a turn row of the fork's, with a
// new request id from NewRequestID. Proposals and effects are not copied:
// their frames are history, and the fork has no rows to decide or
// acknowledge them. The copy is made by the database (INSERT ... SELECT), a
// page of turn ids at a time, so a long conversation is never held in memory.
type ForkConversationParams struct {
	SourceID     string
	ID           string
	UpToSequence *int64
	Title        *string
	NewRequestID func() string
	// Owner is the forking principal's name ("" for the bootstrap owner);
	// the fork keeps the source's visibility.
	Owner string
	Now   time.Time
}
