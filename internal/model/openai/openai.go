// Package openai is a model provider for any OpenAI-compatible chat-completions
// server (OpenAI, Ollama, vLLM, llama.cpp, LM Studio). It speaks the
// streaming chat-completions API directly over net/http: one POST with
// stream true, Server-Sent Events parsed here, text deltas yielded as they
// arrive and streamed tool calls reassembled into complete
// model.EventToolCall events. It asks for usage (stream_options.include_usage)
// and reports it as model.EventUsage.
//
// Decision (figures in docs/build-weight.md): not the official SDK. The
// SDK's generated package took about 3 minutes of CPU and 2.75 GB of memory
// to compile and added 23 MB to the binary for the two endpoints used here.
//
// The provider reads no environment variables itself; cmd/studio fills
// Config (see the Env* constants for the names error messages point users
// to). It makes no retries: retrying is the coordinator's decision
// (docs/design.md §13).
package openai

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

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
	// HTTPClient is optional; nil means a plain http.Client.
	HTTPClient *http.Client
}

// Provider streams chat completions. It is safe for concurrent use.
type Provider struct {
	cfg   Config
	base  string // BaseURL without a trailing slash
	host  string
	http  *http.Client
	now   func() time.Time
	newID func() string
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
	return &Provider{cfg: cfg, base: strings.TrimRight(cfg.BaseURL, "/"), host: u.Host, http: httpClient,
		now: time.Now, newID: randomCallID}, nil
}

// Name implements model.Provider.
func (p *Provider) Name() string { return providerName }

// BaseURL is the API's address the provider calls, for the messages of
// the daemon that configured it.
func (p *Provider) BaseURL() string { return p.base }

// HasKey reports whether the provider sends an API key.
func (p *Provider) HasKey() bool { return p.cfg.APIKey != "" }

// Check lists the server's models: it proves the server is reachable and the
// key accepted. It does not insist that Model is listed, because llama.cpp
// and some proxies serve any model name under another alias.
func (p *Provider) Check(ctx context.Context) error {
	res, c, err := p.do(ctx, http.MethodGet, "/models", nil)
	if err != nil {
		return p.mapError(ctx, err, c)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20))
	return nil
}

// do sends one request; an error status comes back as an error with the
// response recorded in the capture.
func (p *Provider) do(ctx context.Context, method, path string, body []byte) (*http.Response, *model.Capture, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.base+path, rd)
	if err != nil {
		return nil, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
	}
	if p.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+p.cfg.APIKey)
	}
	c := &model.Capture{}
	res, err := c.Middleware(req, p.http.Do)
	if err != nil {
		return nil, c, err
	}
	if res.StatusCode >= 400 {
		res.Body.Close()
		return nil, c, errStatus
	}
	return res, c, nil
}

// errStatus marks an error status; the capture holds the response.
var errStatus = errors.New("error status")

// streamChunk is one chat.completion.chunk, or an error object sent inside the stream.
type streamChunk struct {
	Choices []struct {
		Index int64 `json:"index"`
		Delta struct {
			Content   string          `json:"content"`
			Refusal   string          `json:"refusal"`
			ToolCalls []toolCallDelta `json:"tool_calls"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

type toolCallDelta struct {
	Index    int64  `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// Stream implements model.Provider. Text deltas are yielded as they arrive;
// tool calls are yielded complete, in index order, when the choice finishes;
// the usage the server reports comes last.
func (p *Provider) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		body, err := p.body(req)
		if err != nil {
			yield(model.Event{}, err)
			return
		}
		res, c, err := p.do(ctx, http.MethodPost, "/chat/completions", body)
		if err != nil {
			yield(model.Event{}, p.mapError(ctx, err, c))
			return
		}
		defer res.Body.Close()

		var calls toolCalls
		finished := false
		var usage *model.Usage
		err = readEvents(res.Body, func(data []byte) (bool, error) {
			if string(bytes.TrimSpace(data)) == "[DONE]" {
				return false, nil
			}
			var ch streamChunk
			if err := json.Unmarshal(data, &ch); err != nil {
				return false, p.failure(true, "openai: the server sent a malformed stream chunk: %s", err.Error()).With("provider", providerName)
			}
			if len(ch.Error) > 0 && string(ch.Error) != "null" {
				return false, p.inStreamError(data)
			}
			if ch.Usage != nil {
				usage = &model.Usage{InputTokens: ch.Usage.PromptTokens, OutputTokens: ch.Usage.CompletionTokens}
			}
			for _, choice := range ch.Choices {
				if choice.Index != 0 {
					continue // n defaults to 1; ignore stray choices
				}
				d := choice.Delta
				for _, text := range []string{d.Content, d.Refusal} {
					if text != "" && !yield(model.Event{Kind: model.EventText, Text: text}, nil) {
						return false, errStopped
					}
				}
				for _, tc := range d.ToolCalls {
					calls.add(tc)
				}
				if choice.FinishReason != "" {
					finished = true
					if !p.flush(&calls, yield) {
						return false, errStopped
					}
				}
			}
			return true, nil
		})
		switch {
		case errors.Is(err, errStopped):
			return
		case ctx.Err() != nil:
			yield(model.Event{}, ctx.Err())
			return
		case err != nil:
			var pe *protocol.Error
			if !errors.As(err, &pe) {
				err = p.failure(true, "openai: the stream from %s broke off mid-answer: %s", p.host, err.Error()).With("provider", providerName)
			}
			yield(model.Event{}, err)
			return
		case !finished:
			yield(model.Event{}, p.failure(true, "openai: the stream from %s ended before the answer finished", p.host).
				With("provider", providerName))
			return
		}
		if !p.flush(&calls, yield) {
			return
		}
		if usage != nil {
			yield(model.Event{Kind: model.EventUsage, Usage: *usage}, nil)
		}
	}
}

// errStopped ends a stream the consumer stopped (or a yielded error ended).
var errStopped = errors.New("stopped")

// readEvents calls fn with the data of each Server-Sent Event until fn says
// stop, the body ends (nil) or a read fails.
func readEvents(body io.Reader, fn func(data []byte) (bool, error)) error {
	br := bufio.NewReaderSize(body, 64<<10)
	var data []byte
	for {
		line, err := br.ReadBytes('\n')
		if err != nil && (err != io.EOF || len(line) == 0) {
			if err == io.EOF {
				return nil
			}
			return err
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if data != nil {
				more, err := fn(data)
				if err != nil || !more {
					return err
				}
				data = nil
			}
		case line[0] == ':':
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			if string(field) == "data" {
				value = bytes.TrimPrefix(value, []byte(" "))
				if data != nil {
					data = append(data, '\n')
				}
				data = append(data, value...)
			}
		}
	}
}

// flush yields the complete tool calls gathered so far. It reports false
// when the consumer stopped.
func (p *Provider) flush(calls *toolCalls, yield func(model.Event, error) bool) bool {
	for _, tc := range calls.take(p.newID) {
		if !yield(model.Event{Kind: model.EventToolCall, ToolCall: tc}, nil) {
			return false
		}
	}
	return true
}

// The request body of POST /chat/completions.
type (
	chatRequest struct {
		Model         string        `json:"model"`
		Messages      []chatMessage `json:"messages"`
		Tools         []chatTool    `json:"tools,omitempty"`
		Stream        bool          `json:"stream"`
		StreamOptions streamOptions `json:"stream_options"`
	}
	streamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	}
	chatMessage struct {
		Role       string         `json:"role"`
		Content    *string        `json:"content,omitempty"`
		ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
		ToolCallID string         `json:"tool_call_id,omitempty"`
	}
	chatToolCall struct {
		ID       string       `json:"id"`
		Type     string       `json:"type"`
		Function chatFunction `json:"function"`
	}
	chatFunction struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	chatTool struct {
		Type     string       `json:"type"`
		Function functionSpec `json:"function"`
	}
	functionSpec struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	}
)

// body compiles a model.Request into the request body. req.View is not
// used: the coordinator already renders it into the system prompt.
func (p *Provider) body(req model.Request) ([]byte, error) {
	str := func(s string) *string { return &s }
	msgs := make([]chatMessage, 0, len(req.Messages)+1)
	if req.System != "" {
		msgs = append(msgs, chatMessage{Role: "system", Content: str(req.System)})
	}
	for i, m := range req.Messages {
		switch m.Role {
		case model.RoleUser:
			msgs = append(msgs, chatMessage{Role: "user", Content: str(m.Content)})
		case model.RoleAssistant:
			a := chatMessage{Role: "assistant"}
			if m.Content != "" || len(m.ToolCalls) == 0 {
				a.Content = str(m.Content)
			}
			for _, tc := range m.ToolCalls {
				args := strings.TrimSpace(string(tc.Arguments))
				if args == "" {
					args = "{}"
				}
				a.ToolCalls = append(a.ToolCalls, chatToolCall{ID: tc.ID, Type: "function", Function: chatFunction{Name: model.HistoryToolName(tc.Name), Arguments: args}})
			}
			msgs = append(msgs, a)
		case model.RoleTool:
			content := m.Content
			if m.ToolError {
				content = "error: " + content
			}
			msgs = append(msgs, chatMessage{Role: "tool", Content: str(content), ToolCallID: m.ToolCallID})
		default:
			return nil, protocol.Errorf(protocol.ModelFailure, "openai: message %d has unknown role %q", i, m.Role)
		}
	}
	body := chatRequest{Model: p.cfg.Model, Messages: msgs, Stream: true, StreamOptions: streamOptions{IncludeUsage: true}}
	for _, t := range req.Tools {
		schema := json.RawMessage(`{"type":"object","properties":{}}`)
		if len(t.Schema) > 0 {
			if v := jsontext.Value(t.Schema); !v.IsValid() || v.Kind() != '{' {
				return nil, protocol.Errorf(protocol.ModelFailure, "openai: tool %q has a schema that is not a JSON object", t.Name)
			}
			schema = json.RawMessage(t.Schema)
		}
		body.Tools = append(body.Tools, chatTool{Type: "function", Function: functionSpec{Name: t.Name, Description: t.Description, Parameters: schema}})
	}
	return json.Marshal(body)
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

func (t *toolCalls) add(d toolCallDelta) {
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

// take returns the gathered calls in index order and forgets them. A call
// without a name, or whose arguments are not one JSON object, passes as
// it came: the coordinator answers the model with what is wrong with it (a
// validation result) and the turn goes on.
func (t *toolCalls) take(newID func() string) []model.ToolCall {
	pending := t.pending
	t.pending, t.byIndex = nil, nil
	sort.SliceStable(pending, func(i, j int) bool { return pending[i].index < pending[j].index })
	out := make([]model.ToolCall, 0, len(pending))
	for _, pc := range pending {
		id := pc.id
		if id == "" {
			id = newID()
		}
		out = append(out, model.ToolCall{ID: id, Name: pc.name, Arguments: objectArguments(pc.args.String())})
	}
	return out
}

// objectArguments compacts arguments that are one JSON object; an empty
// string is an empty object (a tool without parameters), and anything
// else is returned as it came.
func objectArguments(s string) jsontext.Value {
	s = strings.TrimSpace(s)
	if s == "" {
		return jsontext.Value("{}")
	}
	v := jsontext.Value(s)
	if v.IsValid() && v.Kind() == '{' {
		_ = v.Compact()
	}
	return v
}

func randomCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}
