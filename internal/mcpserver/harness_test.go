package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/coordinator/coordtest"
	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/mcpserver"
	"github.com/studio/operator/internal/metrics"
	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/sqlite"
	"github.com/studio/operator/internal/store/storetest"
)

const ownerToken = "test-token-0123456789abcdef0123456789abcdef"

// daemon is a real daemon on loopback: SQLite file, coordinator, the
// application, principals, the HTTP API with /mcp.
type daemon struct {
	t       *testing.T
	db      *sqlite.Store
	clock   *storetest.Clock
	coord   *coordinator.Coordinator
	srv     *httptest.Server
	metrics *metrics.Registry
	// tokens by role: agent (an agent), operator (alice), viewer (vic)
	agent, operator, viewer string
}

type daemonOpts struct {
	callsPerMinute, burst int
	sweep                 time.Duration
	secondApprover        []string // --second-approver-for
}

func newDaemon(t *testing.T, o daemonOpts) *daemon {
	t.Helper()
	stack := coordtest.New(t, coordtest.Options{})
	cfg := stack.Config(stack.DB)
	cfg.SweepInterval = o.sweep
	coord := coordinator.New(cfg)
	stack.App.SettleProposalsWith(coord)
	if err := coord.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := httpapi.EnsureOwner(context.Background(), stack.DB, ownerToken, stack.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	reg := metrics.New(metrics.Build{Version: "test"})
	agents := mcpserver.New(mcpserver.Config{Coordinator: coord, Tools: cfg.Tools, Version: "test", Logger: coordtest.Logger(),
		Metrics: reg, Now: stack.Clock.Now, CallsPerMinute: o.callsPerMinute, CallBurst: o.burst})
	convs := stack.Conversations(stack.DB, coord)
	api := httpapi.New(httpapi.Config{Conversations: convs, Streams: convs, Turns: coord, Proposals: coord, Effects: coord, Catalog: coord, Token: ownerToken, App: stack.App, Principals: stack.DB, Now: stack.Clock.Now,
		Logger: coordtest.Logger(), MCP: agents.Handler, Metrics: reg, Policy: gate(t, o.secondApprover)})
	srv := httptest.NewServer(api)
	d := &daemon{t: t, db: stack.DB, clock: stack.Clock, coord: coord, srv: srv, metrics: reg}
	t.Cleanup(func() {
		api.Close()
		coord.Shutdown(context.Background())
		srv.Close()
	})
	d.agent = d.token("claude", protocol.RoleAgent)
	d.operator = d.token("alice", protocol.RoleOperator)
	d.viewer = d.token("vic", protocol.RoleViewer)
	return d
}

func (d *daemon) ctx() context.Context {
	ctx, cancel := context.WithTimeout(d.t.Context(), 60*time.Second)
	d.t.Cleanup(cancel)
	return ctx
}

// token creates a principal with a role and returns its token.
func (d *daemon) token(name string, role protocol.Role) string {
	d.t.Helper()
	now := d.clock.Now()
	p, err := d.db.CreatePrincipal(d.ctx(), store.CreatePrincipalParams{ID: uuid.NewString(), Name: name, Role: role, Now: now})
	if err != nil {
		d.t.Fatal(err)
	}
	token := httpapi.NewToken()
	if _, err := d.db.CreateToken(d.ctx(), store.CreateTokenParams{ID: uuid.NewString(), PrincipalID: p.ID,
		Hash: httpapi.HashToken(token), Prefix: httpapi.TokenDisplayPrefix(token), Now: now}); err != nil {
		d.t.Fatal(err)
	}
	return token
}

// api is the daemon's HTTP client with a token.
func (d *daemon) api(token string) *apiclient.Client {
	return apiclient.New(d.srv.URL, token, d.srv.Client())
}

// connect is the SDK's client over Streamable HTTP with a token.
func (d *daemon) connect(token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	d.t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1.0"}, opts)
	tr := &mcp.StreamableClientTransport{Endpoint: d.srv.URL + "/mcp",
		HTTPClient: &http.Client{Transport: mcpserver.BearerTransport{Token: token, Next: d.srv.Client().Transport}}}
	s, err := c.Connect(d.ctx(), tr, nil)
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { s.Close() })
	return s
}

// call calls a tool and decodes its structured result.
func call(t *testing.T, s *mcp.ClientSession, name string, args any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out map[string]any
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			if err := json.Unmarshal([]byte(tc.Text), &out); err != nil {
				t.Fatalf("%s: text content is not JSON: %v", name, err)
			}
		}
	}
	return res, out
}

// gate is the policy gate of the built-in policies with the four-eyes
// levels.
func gate(t *testing.T, levels []string) *policy.Gate {
	t.Helper()
	e, err := policy.New(policy.Options{SecondApproverFor: levels})
	if err != nil {
		t.Fatal(err)
	}
	return policy.NewGate(policy.GateConfig{Engine: e, Logger: coordtest.Logger()})
}
