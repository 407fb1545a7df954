package httpapi_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/studio/operator/internal/app"
	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/routes"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlite"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/tools"
)

const testToken = "test-token-0123456789abcdef0123456789abcdef"

// harness is a real daemon on loopback: SQLite file, coordinator, HTTP server.
type harness struct {
	t      testing.TB
	app    *app.Service
	faults *faultStore
	clock  *storetest.Clock
	store  *sqlite.Store
	coord  *coordinator.Coordinator
	api    *httpapi.Server
	srv    *httptest.Server
	client *httpapi.Client
}

type harnessOpts struct {
	provider  model.Provider
	script    *script.Script
	workers   int
	heartbeat time.Duration
	tools     *tools.Registry
}

func newHarness(t testing.TB, o harnessOpts) *harness {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "studio.db"))
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(storetest.Epoch)
	if _, err := st.Migrate(context.Background(), clock.Now()); err != nil {
		t.Fatal(err)
	}
	p := o.provider
	if p == nil {
		s := script.Greeting
		if o.script != nil {
			s = *o.script
		}
		if p, err = script.New(s); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := app.New(app.Config{Store: st, Maintenance: st, Now: clock.Now, Provider: p, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Seed(context.Background()); err != nil {
		t.Fatal(err)
	}
	reg := o.tools
	if reg == nil {
		reg = tools.Default(svc, routes.Default, clock.Now)
	}
	faults := &faultStore{Store: st}
	coord := coordinator.New(coordinator.Config{Store: faults, Provider: p, Now: clock.Now, Workers: o.workers,
		ShutdownGrace: time.Millisecond, TextFlush: time.Millisecond, Tools: reg, Logger: quietLogger(),
		RetryBackoff: time.Millisecond, MaxRetryWait: 50 * time.Millisecond})
	api := httpapi.New(httpapi.Config{Coordinator: coord, Token: testToken, Heartbeat: o.heartbeat, Logger: quietLogger()})
	srv := httptest.NewServer(api)
	h := &harness{t: t, clock: clock, store: st, coord: coord, api: api, srv: srv, app: svc, faults: faults,
		client: httpapi.NewClient(srv.URL, testToken, srv.Client())}
	t.Cleanup(func() {
		api.Close()
		coord.Shutdown(context.Background())
		svc.Stop(context.Background())
		srv.Close()
		st.Close()
	})
	return h
}

func (h *harness) ctx() context.Context {
	ctx, cancel := context.WithTimeout(h.t.Context(), 60*time.Second)
	h.t.Cleanup(cancel)
	return ctx
}

func (h *harness) conversation() protocol.Conversation {
	h.t.Helper()
	c, err := h.client.CreateConversation(h.ctx(), protocol.CreateConversationRequest{})
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

func turnRequest(instruction string, last int64) protocol.TurnRequest {
	return protocol.TurnRequest{Instruction: instruction, Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &last}
}

func (h *harness) submit(convID, instruction string) protocol.TurnAccepted {
	h.t.Helper()
	page, err := h.client.GetConversation(h.ctx(), convID, 0, 1)
	if err != nil {
		h.t.Fatal(err)
	}
	acc, err := h.client.SubmitTurn(h.ctx(), convID, turnRequest(instruction, page.LatestSequence))
	if err != nil {
		h.t.Fatal(err)
	}
	return acc
}

// until streams the conversation from after until stop says so, and returns
// the frames seen.
func (h *harness) until(convID string, after int64, stop func(protocol.Frame) bool) []protocol.Frame {
	h.t.Helper()
	var got []protocol.Frame
	err := h.client.Stream(h.ctx(), convID, after, func(f protocol.Frame) error {
		got = append(got, f)
		if stop(f) {
			return httpapi.ErrStopStream
		}
		return nil
	})
	if err != nil {
		h.t.Fatalf("stream: %v (after %d frames)", err, len(got))
	}
	return got
}

// waitDone streams until the request's done frame and returns the request's frames.
func (h *harness) waitDone(convID, requestID string) []protocol.Frame {
	h.t.Helper()
	var mine []protocol.Frame
	h.until(convID, 0, func(f protocol.Frame) bool {
		if f.RequestID != requestID {
			return false
		}
		mine = append(mine, f)
		return f.Type == protocol.FrameDone
	})
	return mine
}

// allFrames pages every frame of a conversation through the API.
func (h *harness) allFrames(convID string) []protocol.Frame {
	h.t.Helper()
	var out []protocol.Frame
	after := int64(0)
	for {
		page, err := h.client.GetConversation(h.ctx(), convID, after, 1000)
		if err != nil {
			h.t.Fatal(err)
		}
		for _, rf := range page.Frames {
			b, _ := protocol.Marshal(rf)
			f, err := protocol.DecodeFrame(b)
			if err != nil {
				h.t.Fatal(err)
			}
			out = append(out, f)
		}
		if !page.HasMore {
			return out
		}
		after = page.NextAfterSequence
	}
}

func wantCode(t *testing.T, err error, code protocol.ErrorCode) *protocol.Error {
	t.Helper()
	if !protocol.IsCode(err, code) {
		t.Fatalf("error = %v, want code %s", err, code)
	}
	return protocol.ErrorOf(err)
}

func countDone(frames []protocol.Frame, requestID string) int {
	n := 0
	for _, f := range frames {
		if f.RequestID == requestID && f.Type == protocol.FrameDone {
			n++
		}
	}
	return n
}

func ptr[T any](v T) *T { return &v }

// quietLogger drops the logs of expected failures; set STUDIO_TEST_LOGS=1 to see them.
func quietLogger() *slog.Logger {
	if os.Getenv("STUDIO_TEST_LOGS") != "" {
		return slog.Default()
	}
	return slog.New(slog.DiscardHandler)
}

// faultStore injects StateDB failures into the coordinator's store.
type faultStore struct {
	store.Store
	failCreate, failConfirm, failFinish, failEmit atomic.Bool
	// frameReads counts the reads a stream makes: frames and conversations.
	frameReads atomic.Int64
}

func (f *faultStore) ListFrames(ctx context.Context, p store.ListFramesParams) ([]store.Frame, error) {
	f.frameReads.Add(1)
	return f.Store.ListFrames(ctx, p)
}

func (f *faultStore) GetConversation(ctx context.Context, id string) (store.Conversation, error) {
	f.frameReads.Add(1)
	return f.Store.GetConversation(ctx, id)
}

func (f *faultStore) EmitEffect(ctx context.Context, p store.EmitEffectParams) (store.Effect, store.Frame, error) {
	if f.failEmit.Load() {
		return store.Effect{}, store.Frame{}, errInjected
	}
	return f.Store.EmitEffect(ctx, p)
}

var errInjected = errors.New("injected store failure")

func (f *faultStore) CreateProposal(ctx context.Context, p store.CreateProposalParams) (store.Proposal, error) {
	if f.failCreate.Load() {
		return store.Proposal{}, errInjected
	}
	return f.Store.CreateProposal(ctx, p)
}

func (f *faultStore) ConfirmProposal(ctx context.Context, p store.ConfirmProposalParams) (store.Proposal, error) {
	if f.failConfirm.Load() {
		return store.Proposal{}, errInjected
	}
	return f.Store.ConfirmProposal(ctx, p)
}

func (f *faultStore) FinishProposal(ctx context.Context, p store.FinishProposalParams) (store.Proposal, bool, error) {
	if f.failFinish.Load() {
		return store.Proposal{}, false, errInjected
	}
	return f.Store.FinishProposal(ctx, p)
}
