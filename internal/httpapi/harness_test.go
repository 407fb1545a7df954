package httpapi_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/conversations"
	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/coordinator/coordtest"
	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/mcpserver"
	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlite"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/tools"
)

const testToken = "test-token-0123456789abcdef0123456789abcdef"

// withEngine wires the real engine into cfg, as cmd/studio does: the
// coordinator serves turns, proposals, effects and the catalog, the
// conversation service conversations and streams.
func withEngine(cfg httpapi.Config, coord *coordinator.Coordinator, convs *conversations.Service) httpapi.Config {
	cfg.Conversations, cfg.Streams = convs, convs
	cfg.Turns, cfg.Proposals, cfg.Effects, cfg.Catalog = coord, coord, coord, coord
	return cfg
}

// harness is a real daemon on loopback: SQLite file, coordinator, HTTP server.
type harness struct {
	t      testing.TB
	app    *studio.Service
	faults *coordtest.Store
	reads  *readCounter // the stream reads of the store
	clock  *storetest.Clock
	store  *sqlite.Store
	coord  *coordinator.Coordinator
	api    *httpapi.Server
	srv    *httptest.Server
	client *apiclient.Client
}

type harnessOpts struct {
	provider  model.Provider
	script    *script.Script
	workers   int
	maxQueued int
	heartbeat time.Duration
	sweep     time.Duration
	tools     *tools.Registry
	serveApp  bool          // serve /api/app too
	retryWait time.Duration // when set: every model retry waits this long
	models    []coordinator.Model
	// principals: tokens are principals' (the store's), testToken the
	// owner's; secondApprover is Config.SecondApproverFor.
	principals     bool
	secondApprover []string
	// policies are a team's policy files (--policy); mcp serves /mcp
	// (internal/mcpserver) over the coordinator's tools.
	policies []policy.File
	mcp      bool
	// authProxy: Config.AuthProxy (with principals); logger replaces the
	// quiet one.
	authProxy *httpapi.AuthProxy
	logger    *slog.Logger
	// db, when set, is the store under the coordinator and the streams
	// (a PostgreSQL one) instead of the stack's SQLite file; h.store stays
	// the stack's.
	db store.Store
	// lease, when set, makes the daemon one of several sharing its
	// database (instance "a"): the coordinator and the streams ask it.
	lease *testLease
}

func newHarness(t testing.TB, o harnessOpts) *harness {
	t.Helper()
	stack := coordtest.New(t, coordtest.Options{Provider: o.provider, Script: o.script})
	var db store.Store = stack.DB
	if o.db != nil {
		db = o.db
	}
	reads := &readCounter{Store: db}
	faults := &coordtest.Store{Store: reads}
	cfg := stack.Config(faults)
	cfg.Workers, cfg.SweepInterval, cfg.MaxQueuedTurns = o.workers, o.sweep, o.maxQueued
	if o.retryWait > 0 {
		cfg.RetryBackoff, cfg.MaxRetryBackoff, cfg.MaxRetryWait = o.retryWait, o.retryWait, o.retryWait
	}
	if o.tools != nil {
		cfg.Tools = o.tools
	}
	if o.models != nil {
		cfg.Models, cfg.Provider = o.models, nil
	}
	if o.lease != nil {
		cfg.Shared, cfg.Instance = true, "a"
		now := stack.Clock.Now()
		if _, err := stack.DB.RegisterInstance(context.Background(), store.RegisterInstanceParams{Instance: store.Instance{ID: cfg.Instance,
			Address: "x", PID: 1, Version: "t", StartedAt: now, HeartbeatAt: now, LeaseExpiresAt: now.Add(24 * time.Hour)}}); err != nil {
			t.Fatal(err)
		}
	}
	coord := coordinator.New(cfg)
	if o.lease != nil {
		coord.UseLease(o.lease)
	}
	stack.App.SettleProposalsWith(coord)
	if err := coord.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	apiCfg := withEngine(httpapi.Config{Token: testToken, Heartbeat: o.heartbeat, Logger: quietLogger()}, coord, stack.Conversations(faults, coord))
	if o.serveApp {
		apiCfg.App = stack.App
	}
	if o.principals {
		if _, err := httpapi.EnsureOwner(context.Background(), stack.DB, testToken, stack.Clock.Now()); err != nil {
			t.Fatal(err)
		}
		apiCfg.Principals, apiCfg.Now, apiCfg.AuthProxy = stack.DB, stack.Clock.Now, o.authProxy
		apiCfg.Webhooks = stack.DB
	}
	engine, err := policy.New(policy.Options{SecondApproverFor: o.secondApprover, Files: o.policies})
	if err != nil {
		t.Fatal(err)
	}
	apiCfg.Policy = policy.NewGate(policy.GateConfig{Engine: engine, Record: policy.AuditDenials(stack.DB, stack.Clock.Now),
		Logger: quietLogger(), Now: stack.Clock.Now})
	if o.logger != nil {
		apiCfg.Logger = o.logger
	}
	if o.mcp {
		agents := mcpserver.New(mcpserver.Config{Coordinator: coord, Tools: cfg.Tools, Version: "test", Logger: quietLogger(),
			Now: stack.Clock.Now, CallsPerMinute: 1 << 30, CallBurst: 1 << 30})
		apiCfg.MCP = agents.Handler
	}
	if o.lease != nil {
		apiCfg.Lease = o.lease
	}
	api := httpapi.New(apiCfg)
	srv := httptest.NewServer(api)
	h := &harness{t: t, clock: stack.Clock, store: stack.DB, coord: coord, api: api, srv: srv, app: stack.App, faults: faults, reads: reads,
		client: apiclient.New(srv.URL, testToken, srv.Client())}
	t.Cleanup(func() {
		api.Close()
		coord.Shutdown(context.Background())
		srv.Close()
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
			return apiclient.ErrStopStream
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
	return coordtest.CountDone(frames, requestID)
}

func ptr[T any](v T) *T { return &v }

func quietLogger() *slog.Logger { return coordtest.Logger() }
