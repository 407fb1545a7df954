package coordinator

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Model is one configured model a conversation may choose.
type Model struct {
	// Name is what a conversation's model field names (unique).
	Name string
	// Kind is the provider's kind: offline, openai, anthropic, script.
	Kind string
	// ModelName is the provider's model, when it has one.
	ModelName string
	Provider  model.Provider
	// ContextTokens is the model's context window, when configured.
	ContextTokens int
}

// models is the configured models, the default first.
type models struct {
	list []Model
}

// newModels puts the default first: DefaultModel names it, else the first
// of list; with no list, the one Provider is the only model.
func newModels(cfg *Config) models {
	list := cfg.Models
	if len(list) == 0 && cfg.Provider != nil {
		list = []Model{{Name: cfg.Provider.Name(), Kind: cfg.Provider.Name(), Provider: cfg.Provider}}
	}
	for i, m := range list {
		if m.Name == cfg.DefaultModel && i > 0 {
			list = append([]Model{m}, append(append([]Model{}, list[:i]...), list[i+1:]...)...)
			break
		}
	}
	if cfg.Provider == nil && len(list) > 0 {
		cfg.Provider = list[0].Provider
	}
	// What a model or its provider writes (text, tool names and ids, error
	// messages) passes the redactor before any of it is stored.
	list = slices.Clone(list)
	for i := range list {
		list[i].Provider = model.Redacting(list[i].Provider)
	}
	if cfg.Provider != nil {
		cfg.Provider = model.Redacting(cfg.Provider)
	}
	return models{list: list}
}

func (ms models) get(name string) *Model {
	for i := range ms.list {
		if ms.list[i].Name == name {
			return &ms.list[i]
		}
	}
	return nil
}

// CheckModel refuses, as a validation error of field model, a model this
// daemon does not have, naming those it has (a conversation's choice).
func (c *Coordinator) CheckModel(name string) error {
	if c.models.get(name) == nil {
		return protocol.Errorf(protocol.Validation, "model %q is not configured on this daemon; choose one of %s", name, c.models.names()).
			With("field", "model")
	}
	return nil
}

func (ms models) names() string {
	names := make([]string, len(ms.list))
	for i, m := range ms.list {
		names[i] = m.Name
	}
	return strings.Join(names, ", ")
}

// modelFor is the model a turn of conv uses: the one its receipt names
// (a turn keeps the model it started with), else the conversation's
// choice, else the default. A choice this daemon does not have is a
// model_failure naming it.
func (c *Coordinator) modelFor(conv store.Conversation, rec contextRecord) (*Model, error) {
	name := ""
	switch {
	case rec.Receipt != nil && rec.Receipt.Model != "":
		name = rec.Receipt.Model
	case conv.Model != nil:
		name = *conv.Model
	}
	if name == "" {
		if len(c.models.list) == 0 {
			return nil, protocol.Errorf(protocol.ModelFailure, "no model is configured")
		}
		return &c.models.list[0], nil
	}
	m := c.models.get(name)
	if m == nil {
		return nil, protocol.Errorf(protocol.ModelFailure, "this conversation uses model %q, which this daemon does not have; choose one of %s", name, c.models.names()).
			With("model", name)
	}
	return m, nil
}

// checkTimeout bounds a reachability check of GET /operator/models.
const checkTimeout = 3 * time.Second

// ListModels lists the configured models, the default first, each with
// whether its provider answers now (providers that can check themselves
// are asked, at once and within checkTimeout; the others are local).
func (c *Coordinator) ListModels(ctx context.Context) protocol.ModelList {
	out := protocol.ModelList{Models: make([]protocol.ModelInfo, len(c.models.list))}
	var wg sync.WaitGroup
	for i, m := range c.models.list {
		info := protocol.ModelInfo{Name: m.Name, Provider: m.Kind, Model: m.ModelName, Default: i == 0, Reachable: true,
			ContextLimits: protocol.ContextLimits{HistoryFrames: maxContextFrames, HistoryBytes: maxContextBytes, ContextTokens: m.ContextTokens}}
		out.Models[i] = info
		if chk, ok := m.Provider.(model.Checker); ok {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cctx, cancel := context.WithTimeout(ctx, checkTimeout)
				defer cancel()
				if err := chk.Check(cctx); err != nil {
					out.Models[i].Reachable = false
					out.Models[i].Problem = problem(err)
				}
			}()
		}
	}
	wg.Wait()
	if len(c.models.list) > 0 {
		out.Default = c.models.list[0].Name
	}
	return out
}

// problem is a check's failure as a client may see it: a typed error's
// message, else a generic sentence (an untyped error may carry anything).
func problem(err error) string {
	if protocol.CodeOf(err) != "" {
		return protocol.ErrorOf(err).Message
	}
	return "the provider did not answer the check"
}
