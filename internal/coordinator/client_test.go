package coordinator_test

import (
	"context"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
)

// navigatingProvider asks the cockpit to open the fleet in its first
// round, whatever it is offered, then answers in words; it keeps each
// request it was given.
type navigatingProvider struct {
	mu   sync.Mutex
	reqs []model.Request
}

func (*navigatingProvider) Name() string { return "navigating" }

func (p *navigatingProvider) Stream(_ context.Context, req model.Request) iter.Seq2[model.Event, error] {
	p.mu.Lock()
	p.reqs = append(p.reqs, req)
	p.mu.Unlock()
	return func(yield func(model.Event, error) bool) {
		if len(req.CurrentToolResults()) > 0 {
			yield(model.Event{Kind: model.EventText, Text: "done"}, nil)
			return
		}
		yield(model.Event{Kind: model.EventToolCall, ToolCall: model.ToolCall{ID: "call_nav", Name: "navigate",
			Arguments: jsontext.Value(`{"space":"mission","params":{"view":"fleet","status":"failed"}}`)}}, nil)
	}
}

func (p *navigatingProvider) first() model.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reqs[0]
}

func toolNames(tools []model.Tool) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.Name
	}
	return out
}

// TestTurnKnowsItsClient: a turn says what kind of client submitted it;
// the kind is stored with the turn's context and given to the model. A
// client that applies no effects (the command line) is offered no effect
// tools, is told so in the system prompt, and a model that asks for one
// anyway is answered with why, no effect emitted; a turn that names no
// client is the cockpit's. An unknown kind is refused.
func TestTurnKnowsItsClient(t *testing.T) {
	t.Parallel()
	effectTools := []string{"navigate", "select", "set_theme", "prefill_form"}
	submit := func(client protocol.ClientKind) (*navigatingProvider, *engine, []protocol.Frame, string) {
		t.Helper()
		p := &navigatingProvider{}
		e := newEngine(t, engineOpts{provider: p})
		conv := e.conversation()
		zero := int64(0)
		acc, err := e.coord.SubmitTurn(e.ctx(), conv, protocol.TurnRequest{Instruction: "show the failed runs",
			Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &zero, Client: client})
		if err != nil {
			t.Fatal(err)
		}
		frames := ofRequest(e.waitDone(conv, acc.RequestID), acc.RequestID)
		turn, err := e.db.GetTurn(e.ctx(), acc.RequestID)
		if err != nil {
			t.Fatal(err)
		}
		return p, e, frames, string(turn.ContextJSON)
	}

	p, _, frames, record := submit(protocol.ClientCLI)
	req := p.first()
	names := toolNames(req.Tools)
	if req.Client != protocol.ClientCLI || !slices.Contains(names, "list_runs") {
		t.Fatalf("the CLI turn's request: client %q, tools %v", req.Client, names)
	}
	for _, n := range effectTools {
		if slices.Contains(names, n) {
			t.Errorf("the CLI turn is offered the effect tool %s", n)
		}
	}
	if !strings.Contains(req.System, "studio command line") || strings.Contains(req.System, "browser acknowledges") {
		t.Errorf("the CLI turn's system prompt:\n%s", req.System)
	}
	if !strings.Contains(record, `"client":"cli"`) {
		t.Errorf("the turn's stored context does not name its client: %s", record)
	}
	if n := count(frames, protocol.FrameUICommand); n != 0 {
		t.Fatalf("the CLI turn emitted %d effects: %v", n, kinds(frames))
	}
	refused := false
	for _, f := range frames {
		if r, ok := f.Payload.(protocol.ToolResultPayload); ok && r.CallID == "call_nav" {
			refused = !r.OK && r.Error.Code == protocol.Validation && r.Error.Details["client"] == "cli" && strings.Contains(r.Error.Message, "answer with the data")
		}
	}
	if k := kinds(frames); !refused || k[len(k)-1] != "done:completed" {
		t.Fatalf("the navigate call of a CLI turn is not refused with why: %v", k)
	}

	// No client named: the cockpit, effects and all.
	p, _, frames, record = submit("")
	if req := p.first(); req.Client != "" || !slices.Contains(toolNames(req.Tools), "navigate") || !strings.Contains(req.System, "browser acknowledges") {
		t.Fatalf("an unnamed client's request: client %q, tools %v", req.Client, toolNames(req.Tools))
	}
	if count(frames, protocol.FrameUICommand) != 1 || strings.Contains(record, `"client"`) {
		t.Fatalf("an unnamed client's turn: %v, context %s", kinds(frames), record)
	}

	e := newEngine(t, engineOpts{provider: &navigatingProvider{}})
	zero := int64(0)
	_, err := e.coord.SubmitTurn(e.ctx(), e.conversation(), protocol.TurnRequest{Instruction: "hi",
		Context: protocol.ContextSnapshot{Space: "mission", Route: "/"}, ExpectedLastSequence: &zero, Client: "television"})
	if pe := protocol.ErrorOf(err); pe == nil || pe.Code != protocol.Validation || pe.Details["field"] != "client" {
		t.Fatalf("an unknown client: %v", err)
	}
}
