package main

import (
	"context"
	"fmt"
	"iter"
	"os"
	"strings"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/model/anthropic"
	"github.com/studio/operator/internal/model/offline"
	"github.com/studio/operator/internal/model/openai"
	"github.com/studio/operator/internal/model/script"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/redact"
)

// Default model names when STUDIO_MODEL_NAME is unset.
const (
	defaultOpenAIModel    = "gpt-4o-mini"
	defaultAnthropicModel = "claude-sonnet-4-5"
)

// newProvider builds the model provider named by --model: offline (the
// default), script[:PATH], openai, or anthropic. A remote provider whose
// configuration is incomplete does not stop the daemon: it becomes a provider
// that fails every call naming the setting to fix, so the cockpit and the
// rest of the daemon work (docs/design.md §1) and doctor shows the problem.
func newProvider(spec string) (model.Provider, error) {
	name, arg, _ := strings.Cut(spec, ":")
	var p model.Provider
	var err error
	switch name {
	case "", "offline":
		return offline.New(), nil
	case "script":
		if arg == "" {
			return script.New(script.Greeting)
		}
		return script.Load(arg)
	case "openai":
		key := os.Getenv(openai.EnvAPIKey)
		if key == "" {
			key = os.Getenv(openai.EnvAPIKeyFallback)
		}
		redact.AddKnown(key)
		p, err = openai.New(openai.Config{BaseURL: os.Getenv(openai.EnvBaseURL), APIKey: key,
			Model: envOr(openai.EnvModel, defaultOpenAIModel)})
	case "anthropic":
		redact.AddKnown(os.Getenv(anthropic.EnvAPIKey))
		p, err = anthropic.New(anthropic.Config{BaseURL: os.Getenv(anthropic.EnvBaseURL), APIKey: os.Getenv(anthropic.EnvAPIKey),
			Model: envOr(anthropic.EnvModel, defaultAnthropicModel)})
	default:
		return nil, fmt.Errorf("unknown model %q: use offline, openai, anthropic, script or script:PATH", spec)
	}
	if err != nil {
		return unavailable{name: name, err: protocol.Errorf(protocol.ModelFailure, "the %s model is not configured: %v", name, err)}, nil
	}
	return p, nil
}

// providerProblem says why the configured provider cannot work, "" when
// nothing says it cannot: its configuration is incomplete, or it would call
// the public OpenAI API without a key. The provider's own base URL (a
// --provider entry's base-url, else STUDIO_OPENAI_BASE_URL) is the one
// judged and named.
func providerProblem(p model.Provider) string {
	if u, ok := p.(unavailable); ok {
		return u.err.Message
	}
	if o, ok := p.(*openai.Provider); ok && !o.HasKey() && strings.Contains(o.BaseURL(), "api.openai.com") {
		return fmt.Sprintf("no API key for %s: set %s (or %s, or the variable api-key-env names), or point the base URL at a local server",
			o.BaseURL(), openai.EnvAPIKey, openai.EnvAPIKeyFallback)
	}
	return ""
}

// providerURL is the address a provider calls, "" when it calls none.
func providerURL(p model.Provider) string {
	if e, ok := p.(interface{ BaseURL() string }); ok {
		return e.BaseURL()
	}
	return ""
}

// unavailable is a provider whose configuration is incomplete.
type unavailable struct {
	name string
	err  *protocol.Error
}

func (u unavailable) Name() string { return u.name }

func (u unavailable) Stream(context.Context, model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) { yield(model.Event{}, u.err) }
}

// Check reports the configuration problem to doctor.
func (u unavailable) Check(context.Context) error { return u.err }
