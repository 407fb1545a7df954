package httpapi_test

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/testutil"
)

// eventLog follows the application change stream in the background.
type eventLog struct {
	ch     chan studio.ChangeEvent
	cancel context.CancelFunc
	done   chan struct{} // closed when the stream has ended, with err
	err    error
}

func followAppEvents(t *testing.T, c *apiclient.Client, after int64) *eventLog {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	l := &eventLog{ch: make(chan studio.ChangeEvent, 100), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		l.err = c.AppEvents(ctx, after, func(e studio.ChangeEvent) error {
			select {
			case l.ch <- e:
			case <-ctx.Done():
			}
			return nil
		})
	}()
	t.Cleanup(l.stop)
	return l
}

func (l *eventLog) stop() {
	l.cancel()
	<-l.done
}

// waitFor waits for an event of a type about a resource; it returns it.
func (l *eventLog) waitFor(t *testing.T, typ, id string) studio.ChangeEvent {
	t.Helper()
	timeout := time.After(testutil.Patience) // a safety net
	for {
		select {
		case e := <-l.ch:
			if e.Type == typ && e.ID == id {
				return e
			}
		case <-l.done:
			t.Fatalf("the stream ended waiting for %s %s: %v", typ, id, l.err)
		case <-timeout:
			t.Fatalf("no %s event for %s", typ, id)
		}
	}
}

func launchRun(t *testing.T, d *appDaemon) string {
	t.Helper()
	var r studio.Run
	if err := d.client.Do(t.Context(), "POST", "/api/app/runs", map[string]any{"playbook": "audit-repo", "args": map[string]string{"repo": "x"}}, &r); err != nil {
		t.Fatal(err)
	}
	return r.ID
}

// TestAppEventsStream: a run launched through the API appears on the
// change stream; a client that reconnects with its cursor gets what it
// missed, in order; the stream needs credentials and a valid cursor.
func TestAppEventsStream(t *testing.T) {
	t.Parallel()
	d := newAppDaemon(t)
	d.seed()

	// From the start of the log: the seed's changes, then the launch's.
	live := followAppEvents(t, d.client, 0)
	first := launchRun(t, d)
	created := live.waitFor(t, "run.created", first)
	if created.Seq <= 0 {
		t.Fatalf("event %+v has no cursor", created)
	}
	live.stop()

	// While no stream is open: a schedule changes and another run starts.
	second := launchRun(t, d)
	var sc studio.Schedule
	if err := d.client.Do(t.Context(), "POST", "/api/app/schedules/nightly/disable", map[string]any{}, &sc); err != nil {
		t.Fatal(err)
	}
	again := followAppEvents(t, d.client, created.Seq)
	e1 := again.waitFor(t, "run.created", second)
	e2 := again.waitFor(t, "schedule.changed", sc.ID)
	if e1.Seq <= created.Seq || e2.Seq <= e1.Seq {
		t.Fatalf("replayed out of order: %d then %d after %d", e1.Seq, e2.Seq, created.Seq)
	}

	// Credentials first, then a valid cursor.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", d.srv.URL+"/api/app/events", nil)
	resp, err := d.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no credentials: %d", resp.StatusCode)
	}
	if code, _ := d.call("GET", "/api/app/events?after=-3", ""); code != http.StatusBadRequest {
		t.Fatalf("a negative cursor: %d", code)
	}

	// A cursor from beyond the log (another database): reset, then live.
	reset := followAppEvents(t, d.client, 1<<40)
	select {
	case e := <-reset.ch:
		if e.Type != studio.ChangeReset {
			t.Fatalf("first event after a foreign cursor: %+v", e)
		}
	case <-time.After(testutil.Patience):
		t.Fatal("no reset event")
	}
}

// TestAppEventsCarryProposalsAndAudit: a proposal made and decided, and
// every audit row, are on the change stream (ids only), so the cockpit's
// approvals inbox and audit trail update in place; the audit's actors
// are listed for its filter.
func TestAppEventsCarryProposalsAndAudit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{script: &proposalScript, serveApp: true})
	live := followAppEvents(t, h.client, 0)
	conv := h.conversation()
	acc, prop := h.proposed(conv.ID)
	live.waitFor(t, "proposal.changed", prop.ID)
	if _, err := h.client.Deny(h.ctx(), conv.ID, prop.ID); err != nil {
		t.Fatal(err)
	}
	h.waitDone(conv.ID, acc.RequestID)
	decided := live.waitFor(t, "proposal.changed", prop.ID)
	// The denial's audit row, by its id.
	page, err := h.app.ListAudit(h.ctx(), studio.AuditQuery{Target: prop.ID, Limit: 10})
	if err != nil || len(page.Events) == 0 {
		t.Fatalf("the proposal's audit rows: %+v, %v", page.Events, err)
	}
	newest := page.Events[0]
	row := live.waitFor(t, "audit.appended", strconv.FormatInt(newest.ID, 10))
	if row.Seq < decided.Seq-1 {
		t.Fatalf("the audit row's change %d is far before the decision's %d", row.Seq, decided.Seq)
	}

	var actors struct {
		Actors []string `json:"actors"`
	}
	if err := h.client.Do(h.ctx(), "GET", "/api/app/audit/actors", nil, &actors); err != nil {
		t.Fatal(err)
	}
	if !slices.IsSorted(actors.Actors) || !slices.Contains(actors.Actors, newest.Actor) || len(slices.Compact(slices.Clone(actors.Actors))) != len(actors.Actors) {
		t.Fatalf("audit actors %v; want the sorted distinct actors, %q among them", actors.Actors, newest.Actor)
	}
}
