package studio

import (
	"context"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// ChangeEvent is one event of GET /api/app/events: a run, schedule, playbook or
// workflow that changed (its id; read the resource itself for the rest),
// numbered in commit order. Type "reset" says changes were missed (the
// cursor is older than the log keeps): reload every view.
type ChangeEvent struct {
	Type string  `json:"type"`
	ID   string  `json:"id" jsonschema_description:"The resource's id (empty for reset)."`
	Seq  int64   `json:"seq" jsonschema_description:"The change's number: the stream's cursor (the SSE id)."`
	At   float64 `json:"at,omitzero" jsonschema_description:"When it was committed (Unix seconds)."`
}

// ChangeReset is the type of the event that tells a client it missed
// changes.
const ChangeReset = "reset"

// Changes returns up to limit application changes after the cursor.
func (s *Service) Changes(ctx context.Context, after int64, limit int) ([]ChangeEvent, error) {
	cs, err := s.store.ListAppChanges(ctx, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]ChangeEvent, len(cs))
	for i, c := range cs {
		out[i] = ChangeEvent{Type: c.Type, ID: c.ResourceID, Seq: c.Seq, At: protocol.Timestamp(c.At)}
	}
	return out, nil
}

// ChangesRange is the oldest kept and the newest change's number.
func (s *Service) ChangesRange(ctx context.Context) (oldest, newest int64, err error) {
	return s.store.AppChangesRange(ctx)
}

// ChangeSignal returns a channel closed after the next commit, in any
// process sharing the database, that records application changes. Take it
// before reading the changes: none is missed.
func (s *Service) ChangeSignal() <-chan struct{} { return s.store.ControlSignal(store.AppChangesKey) }
