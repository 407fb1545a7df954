package conversations

import (
	"context"
	"sync"
	"time"

	"github.com/studio/operator/internal/protocol"
)

// The live view: while a turn runs, the cockpit reports what the
// operator looks at, and get_current_view answers with the freshest report
// instead of the snapshot the turn was submitted with. Reports are kept in
// this process's memory only, by design best effort: a lost report (a
// dropped request, a restart, another daemon's report) costs freshness,
// never correctness, because the turn's snapshot is durable and the tool
// says which of the two it answers with.

// maxViews bounds the conversations whose latest report is kept; past it
// the stalest report is dropped.
const maxViews = 4096

// viewReport is the freshest report of one conversation.
type viewReport struct {
	view       protocol.ContextSnapshot
	observedAt time.Time
}

// Views keeps the freshest view report of each conversation: the service
// writes them (ReportView), the engine's turns read them (Latest).
type Views struct {
	mu sync.Mutex
	m  map[string]viewReport
}

// NewViews returns an empty Views.
func NewViews() *Views { return &Views{m: make(map[string]viewReport)} }

// put keeps r unless a report observed later is kept already; it returns
// the report kept.
func (v *Views) put(convID string, r viewReport) (viewReport, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if cur, ok := v.m[convID]; ok && !r.observedAt.After(cur.observedAt) {
		return cur, false
	}
	if _, ok := v.m[convID]; !ok && len(v.m) >= maxViews {
		var stalest string
		var at time.Time
		for id, x := range v.m {
			if stalest == "" || x.observedAt.Before(at) {
				stalest, at = id, x.observedAt
			}
		}
		delete(v.m, stalest)
	}
	v.m[convID] = r
	return r, true
}

// Latest is the freshest report of a conversation and when the operator
// looked at it; ok is false when none is kept.
func (v *Views) Latest(convID string) (view protocol.ContextSnapshot, observedAt time.Time, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	r, ok := v.m[convID]
	return r.view, r.observedAt, ok
}

// ReportView records what the operator looks at in a conversation's
// cockpit now. A report observed before the kept one (or at the same
// time) is answered with accepted false, and changes nothing.
func (s *Service) ReportView(ctx context.Context, convID string, r protocol.ViewReport) (protocol.ViewAccepted, error) {
	if err := r.Validate(); err != nil {
		return protocol.ViewAccepted{}, err
	}
	if _, err := Get(ctx, s.store, convID); err != nil {
		return protocol.ViewAccepted{}, err
	}
	// The cockpit's clock orders its reports; one ahead of the daemon's is
	// taken as observed now, so a skewed clock cannot pin a stale view as
	// the freshest (one behind only costs freshness).
	observed := protocol.Time(r.ObservedAt)
	if now := s.now(); observed.After(now) {
		observed = now
	}
	kept, ok := s.engine.LiveViews().put(convID, viewReport{view: r.ContextSnapshot, observedAt: observed})
	return protocol.ViewAccepted{Accepted: ok, ObservedAt: protocol.Timestamp(kept.observedAt)}, nil
}
