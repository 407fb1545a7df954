// Package anthropic is a model provider for the Anthropic Messages API with
// streaming tool use, built on the official SDK
// github.com/anthropics/anthropic-sdk-go/v2. Text deltas are yielded as they
// arrive; a tool_use block's streamed input JSON is reassembled and yielded as
// one model.EventToolCall when the block stops.
//
// The provider reads no environment variables itself (the SDK's own
// ANTHROPIC_* autoload is switched off); cmd/studio fills Config. The SDK
// makes no retries: retrying is the coordinator's decision (docs/design.md §13).
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
)

// DefaultBaseURL is the public Anthropic API.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultMaxTokens bounds one answer when Config.MaxTokens is 0.
const DefaultMaxTokens = 4096

// Environment variables cmd/studio should read into Config; error messages
// name them so a user knows what to fix.
const (
	EnvAPIKey  = "ANTHROPIC_API_KEY"
	EnvBaseURL = "STUDIO_ANTHROPIC_BASE_URL" // optional: a proxy or gateway
	EnvModel   = "STUDIO_MODEL_NAME"
)

const providerName = "anthropic"

// Config configures a Provider.
type Config struct {
	// APIKey is required unless BaseURL points at a gateway that needs none.
	APIKey string
	// Model is the model name or alias, e.g. "claude-sonnet-4-5". Required.
	Model string
	// BaseURL of the API without /v1; empty means DefaultBaseURL. Tests
	// point it at a fake server.
	BaseURL string
	// HTTPClient is optional; nil means a plain http.Client.
	HTTPClient *http.Client
	// MaxTokens bounds one answer; 0 means DefaultMaxTokens.
	MaxTokens int64
}

// Provider streams Messages API answers. It is safe for concurrent use.
type Provider struct {
	cfg    Config
	host   string
	client sdk.Client
	now    func() time.Time
}

var (
	_ model.Provider = (*Provider)(nil)
	_ model.Checker  = (*Provider)(nil)
)

// New validates cfg and returns a provider. It makes no request.
func New(cfg Config) (*Provider, error) {
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, fmt.Errorf("anthropic: a model name is required (set %s)", EnvModel)
	}
	if cfg.MaxTokens < 0 {
		return nil, errors.New("anthropic: MaxTokens must not be negative")
	}
	if cfg.MaxTokens == 0 {
		cfg.MaxTokens = DefaultMaxTokens
	}
	if cfg.APIKey == "" && cfg.BaseURL == "" {
		return nil, fmt.Errorf("anthropic: an API key is required (set %s)", EnvAPIKey)
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("anthropic: base URL must be an absolute http(s) URL such as %s (check %s)", DefaultBaseURL, EnvBaseURL)
	}
	httpClient := cfg.HTTPClient
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(cfg.BaseURL),
		option.WithHTTPClient(httpClient),
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	return &Provider{cfg: cfg, host: u.Host, client: sdk.NewClient(opts...), now: time.Now}, nil
}

// Name implements model.Provider.
func (p *Provider) Name() string { return providerName }

// Check retrieves the configured model: it proves the API is reachable, the
// key accepted and the model name known.
func (p *Provider) Check(ctx context.Context) error {
	var c model.Capture
	if _, err := p.client.Models.Get(ctx, p.cfg.Model, sdk.ModelGetParams{}, option.WithMiddleware(c.Middleware)); err != nil {
		return p.mapError(ctx, err, &c)
	}
	return nil
}

// toolBlock is a tool_use content block being streamed.
type toolBlock struct {
	id, name string
	initial  string // the input of content_block_start, normally {}
	partial  strings.Builder
}

// Stream implements model.Provider.
func (p *Provider) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		params, err := p.params(req)
		if err != nil {
			yield(model.Event{}, err)
			return
		}
		var c model.Capture
		stream := p.client.Messages.NewStreaming(ctx, params, option.WithMiddleware(c.Middleware))
		defer stream.Close()

		blocks := map[int64]*toolBlock{}
		stopped := false
		var usage model.Usage // message_start has the input, message_delta the cumulative output
		for stream.Next() {
			ev := stream.Current()
			switch ev.Type {
			case "message_start":
				usage.InputTokens, usage.OutputTokens = ev.Message.Usage.InputTokens, ev.Message.Usage.OutputTokens
			case "message_delta":
				usage.OutputTokens = max(usage.OutputTokens, ev.Usage.OutputTokens)
			case "content_block_start":
				cb := ev.ContentBlock
				switch cb.Type {
				case "text":
					if cb.Text != "" && !yield(model.Event{Kind: model.EventText, Text: cb.Text}, nil) {
						return
					}
				case "tool_use":
					blocks[ev.Index] = &toolBlock{id: cb.ID, name: cb.Name, initial: cb.JSON.Input.Raw()}
				}
			case "content_block_delta":
				switch ev.Delta.Type {
				case "text_delta":
					if ev.Delta.Text != "" && !yield(model.Event{Kind: model.EventText, Text: ev.Delta.Text}, nil) {
						return
					}
				case "input_json_delta":
					if b := blocks[ev.Index]; b != nil {
						b.partial.WriteString(ev.Delta.PartialJSON)
					}
				}
			case "content_block_stop":
				b := blocks[ev.Index]
				if b == nil {
					continue
				}
				delete(blocks, ev.Index)
				call := b.call()
				if !yield(model.Event{Kind: model.EventToolCall, ToolCall: call}, nil) {
					return
				}
			case "message_stop":
				stopped = true
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
		if !stopped {
			yield(model.Event{}, p.failure(true, "anthropic: the stream from %s ended before message_stop", p.host))
			return
		}
		if len(blocks) > 0 {
			yield(model.Event{}, p.failure(true, "anthropic: the stream stopped inside a tool_use block"))
			return
		}
		if usage != (model.Usage{}) {
			yield(model.Event{Kind: model.EventUsage, Usage: usage}, nil)
		}
	}
}

// call returns the reassembled tool call. Input that is not one JSON
// object passes as it came: the coordinator answers the model with what is
// wrong with it (a validation result), as it does for an unknown or empty
// name (a call without an id gets one from the coordinator).
func (b *toolBlock) call() model.ToolCall {
	s := strings.TrimSpace(b.partial.String())
	if s == "" {
		s = strings.TrimSpace(b.initial)
	}
	if s == "" || s == "null" {
		s = "{}"
	}
	v := jsontext.Value(s).Clone()
	if v.IsValid() && v.Kind() == '{' {
		_ = v.Compact()
	}
	return model.ToolCall{ID: b.id, Name: b.name, Arguments: v}
}

// params compiles a model.Request into Messages API parameters. Tool results
// become tool_result blocks of a user message (consecutive ones share it),
// assistant tool calls become tool_use blocks, and messages of the same role
// that follow each other are merged, as the API wants roles to alternate.
// req.View is not used: the coordinator renders it into the system prompt.
func (p *Provider) params(req model.Request) (sdk.MessageNewParams, error) {
	var msgs []sdk.MessageParam
	// add appends blocks to the last message when it has the same role.
	add := func(role string, blocks ...sdk.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(msgs); n > 0 {
			last := msgs[n-1]
			if role == model.RoleUser && last.OfUser != nil {
				last.OfUser.Content = append(last.OfUser.Content, blocks...)
				return
			}
			if role == model.RoleAssistant && last.OfAssistant != nil {
				last.OfAssistant.Content = append(last.OfAssistant.Content, blocks...)
				return
			}
		}
		if role == model.RoleUser {
			msgs = append(msgs, sdk.NewUserMessage(blocks...))
		} else {
			msgs = append(msgs, sdk.NewAssistantMessage(blocks...))
		}
	}
	for i, m := range req.Messages {
		switch m.Role {
		case model.RoleUser:
			if m.Content != "" {
				add(model.RoleUser, sdk.NewTextBlock(m.Content))
			}
		case model.RoleAssistant:
			var blocks []sdk.ContentBlockParamUnion
			if m.Content != "" {
				blocks = append(blocks, sdk.NewTextBlock(m.Content))
			}
			for _, tc := range m.ToolCalls {
				args := json.RawMessage(strings.TrimSpace(string(tc.Arguments)))
				if len(args) == 0 {
					args = json.RawMessage("{}")
				}
				if !json.Valid(args) {
					return sdk.MessageNewParams{}, protocol.Errorf(protocol.ModelFailure, "anthropic: message %d: tool call %q has invalid arguments", i, tc.Name)
				}
				blocks = append(blocks, sdk.NewToolUseBlock(tc.ID, args, model.HistoryToolName(tc.Name)))
			}
			add(model.RoleAssistant, blocks...)
		case model.RoleTool:
			result := sdk.ToolResultBlockParam{ToolUseID: m.ToolCallID}
			if m.Content != "" {
				result.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: m.Content}}}
			}
			if m.ToolError {
				result.IsError = sdk.Bool(true)
			}
			add(model.RoleUser, sdk.ContentBlockParamUnion{OfToolResult: &result})
		default:
			return sdk.MessageNewParams{}, protocol.Errorf(protocol.ModelFailure, "anthropic: message %d has unknown role %q", i, m.Role)
		}
	}
	params := sdk.MessageNewParams{
		Model:     p.cfg.Model,
		MaxTokens: p.cfg.MaxTokens,
		Messages:  msgs,
	}
	if req.System != "" {
		params.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	for _, t := range req.Tools {
		schema := json.RawMessage(strings.TrimSpace(string(t.Schema)))
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		if v := jsontext.Value(schema); !v.IsValid() || v.Kind() != '{' {
			return sdk.MessageNewParams{}, protocol.Errorf(protocol.ModelFailure, "anthropic: tool %q has a schema that is not a JSON object", t.Name)
		}
		tool := sdk.ToolParam{
			Name: t.Name,
			// The schema goes to the API verbatim, keyword for keyword.
			InputSchema: param.Override[sdk.ToolInputSchemaParam](schema),
		}
		if t.Description != "" {
			tool.Description = sdk.String(t.Description)
		}
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: &tool})
	}
	return params, nil
}
