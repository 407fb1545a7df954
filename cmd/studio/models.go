package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/model/anthropic"
	"github.com/studio/operator/internal/model/openai"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/redact"
)

// Several models at once: --provider NAME=KIND[,option=value...]
// configures one more model a conversation may choose, besides the one
// --model names (the default). Options: model (the provider's model name),
// base-url, api-key-env (the environment variable holding the key: keys
// never go on a command line) and context-tokens (the model's context
// window, shown in GET /api/operator/models). --model may also name one of
// the --provider entries to make it the default.

// providerSpec is one parsed --provider entry.
type providerSpec struct {
	name, kind    string
	model         string
	baseURL       string
	apiKeyEnv     string
	contextTokens int
}

// parseProviderSpec reads NAME=KIND[,option=value...].
func parseProviderSpec(s string) (providerSpec, error) {
	name, rest, ok := strings.Cut(strings.TrimSpace(s), "=")
	if !ok || name == "" || rest == "" {
		return providerSpec{}, fmt.Errorf("--provider %q: want NAME=KIND[,model=M][,base-url=U][,api-key-env=VAR][,context-tokens=N]", s)
	}
	if strings.ContainsAny(name, " ,;=") || len(name) > 64 {
		return providerSpec{}, fmt.Errorf("--provider %q: the name must be at most 64 characters without spaces, commas, semicolons or =", s)
	}
	parts := strings.Split(rest, ",")
	ps := providerSpec{name: name, kind: parts[0]}
	for _, opt := range parts[1:] {
		k, v, ok := strings.Cut(opt, "=")
		if !ok || v == "" {
			return ps, fmt.Errorf("--provider %s: option %q is not key=value", name, opt)
		}
		switch k {
		case "model":
			ps.model = v
		case "base-url":
			ps.baseURL = v
		case "api-key-env":
			ps.apiKeyEnv = v
		case "context-tokens":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return ps, fmt.Errorf("--provider %s: context-tokens must be a positive integer", name)
			}
			ps.contextTokens = n
		default:
			return ps, fmt.Errorf("--provider %s: unknown option %q (model, base-url, api-key-env, context-tokens)", name, k)
		}
	}
	return ps, nil
}

// buildModel makes the provider of one entry. Like newProvider, an
// incomplete configuration becomes a provider that fails every call
// naming the setting to fix, not a daemon that will not start.
func buildModel(ps providerSpec) (coordinator.Model, error) {
	m := coordinator.Model{Name: ps.name, ContextTokens: ps.contextTokens}
	kind, _, _ := strings.Cut(ps.kind, ":")
	m.Kind = kind
	var p model.Provider
	var err error
	switch kind {
	case "openai":
		keyEnv := ps.apiKeyEnv
		key := ""
		if keyEnv != "" {
			key = os.Getenv(keyEnv)
		} else if key = os.Getenv(openai.EnvAPIKey); key == "" {
			key = os.Getenv(openai.EnvAPIKeyFallback)
		}
		m.ModelName = firstOf(ps.model, os.Getenv(openai.EnvModel), defaultOpenAIModel)
		redact.AddKnown(key)
		p, err = openai.New(openai.Config{BaseURL: firstOf(ps.baseURL, os.Getenv(openai.EnvBaseURL)), APIKey: key, Model: m.ModelName})
	case "anthropic":
		m.ModelName = firstOf(ps.model, os.Getenv(anthropic.EnvModel), defaultAnthropicModel)
		redact.AddKnown(os.Getenv(firstOf(ps.apiKeyEnv, anthropic.EnvAPIKey)))
		p, err = anthropic.New(anthropic.Config{BaseURL: firstOf(ps.baseURL, os.Getenv(anthropic.EnvBaseURL)),
			APIKey: os.Getenv(firstOf(ps.apiKeyEnv, anthropic.EnvAPIKey)), Model: m.ModelName})
	default:
		if ps.model != "" || ps.baseURL != "" || ps.apiKeyEnv != "" {
			return m, fmt.Errorf("--provider %s: %s takes no model, base-url or api-key-env", ps.name, kind)
		}
		p, err = newProvider(ps.kind)
		if err != nil {
			return m, fmt.Errorf("--provider %s: %w", ps.name, err)
		}
		m.Provider = p
		return m, nil
	}
	if err != nil {
		p = unavailable{name: kind, err: protocol.Errorf(protocol.ModelFailure, "model %s (%s) is not configured: %v", ps.name, kind, err)}
	}
	m.Provider = p
	return m, nil
}

func firstOf(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// configuredModels are the models of --model and --provider, the default
// first: --model names an entry, or is a provider spec of its own (named
// by its kind) as it always was.
func configuredModels(defaultSpec string, entries []string) ([]coordinator.Model, error) {
	var out []coordinator.Model
	seen := map[string]bool{}
	for _, e := range entries {
		if strings.TrimSpace(e) == "" {
			continue
		}
		ps, err := parseProviderSpec(e)
		if err != nil {
			return nil, err
		}
		if seen[ps.name] {
			return nil, fmt.Errorf("--provider %s is given twice", ps.name)
		}
		seen[ps.name] = true
		m, err := buildModel(ps)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	for i, m := range out {
		if m.Name == defaultSpec {
			return append([]coordinator.Model{m}, append(out[:i:i], out[i+1:]...)...), nil
		}
	}
	p, err := newProvider(defaultSpec)
	if err != nil {
		return nil, err
	}
	kind, _, _ := strings.Cut(defaultSpec, ":")
	if kind == "" {
		kind = "offline"
	}
	def := coordinator.Model{Name: p.Name(), Kind: kind, Provider: p, ModelName: modelNameOf(kind)}
	if seen[def.Name] {
		return nil, fmt.Errorf("--model %s names a provider kind, and a --provider entry is named %s too; name the entry differently", defaultSpec, def.Name)
	}
	return append([]coordinator.Model{def}, out...), nil
}

// modelNameOf is the model name the default provider of a kind uses.
func modelNameOf(kind string) string {
	switch kind {
	case "openai":
		return envOr(openai.EnvModel, defaultOpenAIModel)
	case "anthropic":
		return envOr(anthropic.EnvModel, defaultAnthropicModel)
	}
	return ""
}
