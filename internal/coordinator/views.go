package coordinator

import (
	"context"
	"sync"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/tools"
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

type views struct {
	mu sync.Mutex
	m  map[string]viewReport
}

func newViews() views { return views{m: make(map[string]viewReport)} }

// put keeps r unless a report observed later is kept already; it returns
// the report kept.
func (v *views) put(convID string, r viewReport) (viewReport, bool) {
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

func (v *views) get(convID string) (viewReport, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	r, ok := v.m[convID]
	return r, ok
}

// ReportView records what the operator looks at in a conversation's
// cockpit now. A report observed before the kept one (or at the same
// time) is answered with accepted false, and changes nothing.
func (c *Coordinator) ReportView(ctx context.Context, convID string, r protocol.ViewReport) (protocol.ViewAccepted, error) {
	if err := r.Validate(); err != nil {
		return protocol.ViewAccepted{}, err
	}
	if _, err := c.conversation(ctx, convID); err != nil {
		return protocol.ViewAccepted{}, err
	}
	// The cockpit's clock orders its reports; one ahead of the daemon's is
	// taken as observed now, so a skewed clock cannot pin a stale view as
	// the freshest (one behind only costs freshness).
	observed := protocol.Time(r.ObservedAt)
	if now := c.now(); observed.After(now) {
		observed = now
	}
	kept, ok := c.views.put(convID, viewReport{view: r.ContextSnapshot, observedAt: observed})
	return protocol.ViewAccepted{Accepted: ok, ObservedAt: protocol.Timestamp(kept.observedAt)}, nil
}

// liveView is the view get_current_view answers with in a turn submitted
// at submitted with snapshot snap: the freshest report observed after the
// submission, else the snapshot.
func (c *Coordinator) liveView(convID string, submitted time.Time, snap protocol.ContextSnapshot) tools.LiveView {
	if r, ok := c.views.get(convID); ok && r.observedAt.After(submitted) {
		obs := protocol.Timestamp(r.observedAt)
		return tools.LiveView{View: r.view, Source: tools.ViewFromReport, ObservedAt: &obs}
	}
	return tools.LiveView{View: snap, Source: tools.ViewFromSnapshot}
}
