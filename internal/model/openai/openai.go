// Package openai is a model provider for any OpenAI-compatible chat-completions
// server (OpenAI, Ollama, vLLM, llama.cpp), built on the official SDK
// github.com/openai/openai-go/v3. It streams text deltas as they arrive and
// reassembles streamed tool calls into complete model.EventToolCall events.
//
// The provider reads no environment variables itself; cmd/studio fills Config
// (see the Env* constants for the names error messages point users to). The
// SDK makes no retries: retrying is the coordinator's decision (DESIGN.md §10).
package openai

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
)

// DefaultBaseURL is the public OpenAI API.
const DefaultBaseURL = "https://api.openai.com/v1"

// Environment variables cmd/studio should read into Config; error messages
// name them so a user knows what to fix.
const (
	EnvAPIKey         = "STUDIO_OPENAI_API_KEY" // preferred
	EnvAPIKeyFallback = "OPENAI_API_KEY"        // used when EnvAPIKey is unset
	EnvBaseURL        = "STUDIO_OPENAI_BASE_URL"
	EnvModel          = "STUDIO_MODEL_NAME"
)

const providerName = "openai"

// Config configures a Provider.
type Config struct {
	// BaseURL of the chat-completions API, up to and including /v1, e.g.
	// http://localhost:11434/v1 for Ollama. Empty means DefaultBaseURL.
	BaseURL string
	// APIKey is sent as a bearer token. Empty sends no Authorization header,
	// which is what Ollama, vLLM and llama.cpp expect by default.
	APIKey string
	// Model is the model name, e.g. "gpt-4.1-mini" or "llama3.2". Required.
	Model string
	// HTTPClient is optional; nil means a client with the SDK's defaults.
	HTTPClient *http.Client
	// MaxRetries is the SDK's own retry count. Keep it 0: retries belong to
	// the coordinator, which knows whether a proposal was confirmed.
	MaxRetries int
}

// Provider streams chat completions. It is safe for concurrent use.
type Provider struct {
	cfg    Config
	host   string
	chat   oai.ChatCompletionService
	models oai.ModelService
	now    func() time.Time
	newID  func() string
}

var (
	_ model.Provider = (*Provider)(nil)
	_ model.Checker  = (*Provider)(nil)
)

// New validates cfg and returns a provider. It makes no request.
func New(cfg Config) (*Provider, error) {
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, fmt.Errorf("openai: a model name is required (set %s)", EnvModel)
	}
	if cfg.MaxRetries < 0 {
		return nil, errors.New("openai: MaxRetries must not be negative")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai: base URL must be an absolute http(s) URL such as %s (check %s)", DefaultBaseURL, EnvBaseURL)
	}
	httpClient := cfg.HTTPClient
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	// The services are built directly rather than through oai.NewClient,
	// which would also read OPENAI_* variables (a key meant for OpenAI must
	// not reach a local server, and tests must not depend on the host's env).
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithHTTPClient(httpClient),
		option.WithMaxRetries(cfg.MaxRetries),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	return &Provider{
		cfg:    cfg,
		host:   u.Host,
		chat:   oai.NewChatCompletionService(opts...),
		models: oai.NewModelService(opts...),
		now:    time.Now,
		newID:  randomCallID,
	}, nil
}

// Name implements model.Provider.
func (p *Provider) Name() string { return providerName }

// Check lists the server's models: it proves the server is reachable and the
// key accepted. It does not insist that Model is listed, because llama.cpp
// and some proxies serve any model name under another alias.
func (p *Provider) Check(ctx context.Context) error {
	var c capture
	if _, err := p.models.List(ctx, option.WithMiddleware(c.middleware)); err != nil {
		return p.mapError(ctx, err, &c)
	}
	return nil
}

// Stream implements model.Provider. Text deltas are yielded as they arrive;
// tool calls are yielded complete, in index order, when the choice finishes.
func (p *Provider) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		params, err := p.params(req)
		if err != nil {
			yield(model.Event{}, err)
			return
		}
		var c capture
		stream := p.chat.NewStreaming(ctx, params, option.WithMiddleware(c.middleware))
		defer stream.Close()

		var calls toolCalls
		finished := false
		for stream.Next() {
			chunk := stream.Current()
			for _, choice := range chunk.Choices {
				if choice.Index != 0 {
					continue // n defaults to 1; ignore stray choices
				}
				d := choice.Delta
				for _, text := range []string{d.Content, d.Refusal} {
					if text != "" && !yield(model.Event{Kind: model.EventText, Text: text}, nil) {
						return
					}
				}
				for _, tc := range d.ToolCalls {
					calls.add(tc)
				}
				if choice.FinishReason != "" {
					finished = true
					if !p.flush(&calls, yield) {
						return
					}
				}
			}
		}
		if err := stream.Err(); err != nil {
			yield(model.Event{}, p.mapError(ctx, err, &c))
			return
		}
		if err := ctx.Err(); err != nil {
			yield(model.Event{}, err)
			return
		}
		if !finished {
			yield(model.Event{}, p.failure(true, "openai: the stream from %s ended before the answer finished", p.host).
				With("provider", providerName))
			return
		}
		p.flush(&calls, yield)
	}
}

// flush yields the complete tool calls gathered so far. It reports false
// when the consumer stopped or an error was yielded.
func (p *Provider) flush(calls *toolCalls, yield func(model.Event, error) bool) bool {
	done, err := calls.take(p.newID)
	if err != nil {
		yield(model.Event{}, p.failure(false, "openai: %s", err.Error()).With("provider", providerName))
		return false
	}
	for _, tc := range done {
		if !yield(model.Event{Kind: model.EventToolCall, ToolCall: tc}, nil) {
			return false
		}
	}
	return true
}

// params compiles a model.Request into SDK parameters. req.View is not used:
// the coordinator already renders it into the system prompt.
func (p *Provider) params(req model.Request) (oai.ChatCompletionNewParams, error) {
	msgs := make([]oai.ChatCompletionMessageParamUnion, 0, len(req.Messages)+1)
	if req.System != "" {
		msgs = append(msgs, oai.SystemMessage(req.System))
	}
	for i, m := range req.Messages {
		switch m.Role {
		case model.RoleUser:
			msgs = append(msgs, oai.UserMessage(m.Content))
		case model.RoleAssistant:
			var a oai.ChatCompletionAssistantMessageParam
			if m.Content != "" || len(m.ToolCalls) == 0 {
				a.Content.OfString = oai.String(m.Content)
			}
			for _, tc := range m.ToolCalls {
				args := strings.TrimSpace(string(tc.Arguments))
				if args == "" {
					args = "{}"
				}
				a.ToolCalls = append(a.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
						ID: tc.ID,
						Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{
							Name:      tc.Name,
							Arguments: args,
						},
					},
				})
			}
			msgs = append(msgs, oai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case model.RoleTool:
			content := m.Content
			if m.ToolError {
				content = "error: " + content
			}
			msgs = append(msgs, oai.ToolMessage(content, m.ToolCallID))
		default:
			return oai.ChatCompletionNewParams{}, protocol.Errorf(protocol.ModelFailure, "openai: message %d has unknown role %q", i, m.Role)
		}
	}
	params := oai.ChatCompletionNewParams{
		Model:    p.cfg.Model,
		Messages: msgs,
	}
	for _, t := range req.Tools {
		schema := map[string]any{"type": "object", "properties": map[string]any{}}
		if len(t.Schema) > 0 {
			schema = nil
			if err := json.Unmarshal(t.Schema, &schema); err != nil || schema == nil {
				return oai.ChatCompletionNewParams{}, protocol.Errorf(protocol.ModelFailure, "openai: tool %q has a schema that is not a JSON object", t.Name)
			}
		}
		fn := oai.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
		if t.Description != "" {
			fn.Description = oai.String(t.Description)
		}
		params.Tools = append(params.Tools, oai.ChatCompletionFunctionTool(fn))
	}
	return params, nil
}

// toolCalls reassembles streamed tool-call deltas. OpenAI sends the id and
// name in the first delta of an index and the arguments split over many;
// some compatible servers send each call whole, or repeat the id.
type toolCalls struct {
	pending []*pendingCall
	byIndex map[int64]*pendingCall
}

type pendingCall struct {
	index int64
	id    string
	name  string
	args  strings.Builder
}

func (t *toolCalls) add(d oai.ChatCompletionChunkChoiceDeltaToolCall) {
	pc := t.byIndex[d.Index]
	if pc == nil || (d.ID != "" && pc.id != "" && d.ID != pc.id) {
		pc = &pendingCall{index: d.Index}
		t.pending = append(t.pending, pc)
		if t.byIndex == nil {
			t.byIndex = make(map[int64]*pendingCall)
		}
		t.byIndex[d.Index] = pc
	}
	if d.ID != "" {
		pc.id = d.ID
	}
	if n := d.Function.Name; n != "" && n != pc.name {
		pc.name += n
	}
	pc.args.WriteString(d.Function.Arguments)
}

// take returns the gathered calls in index order and forgets them.
func (t *toolCalls) take(newID func() string) ([]model.ToolCall, error) {
	pending := t.pending
	t.pending, t.byIndex = nil, nil
	sort.SliceStable(pending, func(i, j int) bool { return pending[i].index < pending[j].index })
	out := make([]model.ToolCall, 0, len(pending))
	for _, pc := range pending {
		if pc.name == "" {
			return nil, fmt.Errorf("tool call %d has no function name", pc.index)
		}
		args, err := objectArguments(pc.args.String())
		if err != nil {
			return nil, fmt.Errorf("tool call %q: %v", pc.name, err)
		}
		id := pc.id
		if id == "" {
			id = newID()
		}
		out = append(out, model.ToolCall{ID: id, Name: pc.name, Arguments: args})
	}
	return out, nil
}

// objectArguments checks that s is one JSON object and returns it compacted.
// An empty string is an empty object (a tool without parameters).
func objectArguments(s string) (jsontext.Value, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return jsontext.Value("{}"), nil
	}
	v := jsontext.Value(s)
	if !v.IsValid() || v.Kind() != '{' {
		return nil, errors.New("arguments are not a valid JSON object")
	}
	v = v.Clone()
	if err := v.Compact(); err != nil {
		return nil, errors.New("arguments are not a valid JSON object")
	}
	return v, nil
}

func randomCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}
