package policy

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Gate is what the doors ask: the engine's decision, with every denial
// recorded (principal, action, resource, reason) through Record, at most
// DenialsPerMinute per principal (a burst of DenialBurst) so that a flood
// of refused requests cannot drown the audit trail; the denials left out
// are counted in the next one recorded (Denial.Suppressed).
type Gate struct {
	engine *Engine
	cfg    GateConfig

	mu      sync.Mutex
	buckets map[string]*denialBucket
}

// GateConfig wires a Gate.
type GateConfig struct {
	Engine *Engine // nil: Default()
	// Record writes a denial to the audit trail; nil records none.
	Record func(ctx context.Context, d Denial) error
	Logger *slog.Logger
	// DenialsPerMinute and DenialBurst bound one principal's recorded
	// denials (defaults DefaultDenialsPerMinute, DefaultDenialBurst).
	DenialsPerMinute int
	DenialBurst      int
	Now              func() time.Time
}

// Defaults of GateConfig.
const (
	DefaultDenialsPerMinute = 30
	DefaultDenialBurst      = 10
)

// Denial is a refused request, as the audit trail records it.
type Denial struct {
	Principal protocol.Principal
	Action    Action
	Resource  Resource
	Door      Door
	Decision  Decision
	// Suppressed counts this principal's denials not recorded since the
	// previous one (the rate limit).
	Suppressed int64
}

// Details are the denial's audit details.
func (d Denial) Details() map[string]any {
	m := map[string]any{"action": string(d.Action), "resource": describe(d.Resource),
		"resourceType": string(d.Resource.Kind()), "resourceId": d.Resource.ResourceID(),
		"reason": d.Decision.Reason, "decision": string(d.Decision.Effect), "door": string(d.Door),
		"policies": d.Decision.PolicyIDs()}
	if d.Decision.Needed != "" {
		m["needed"] = string(d.Decision.Needed)
	}
	if d.Decision.Obligation != "" {
		m["obligation"] = string(d.Decision.Obligation)
	}
	if d.Suppressed > 0 {
		m["suppressed"] = d.Suppressed
	}
	// A conversation's id, under the key the audit's readers look for,
	// so that a denial about a private conversation is shown only to
	// those who may read it.
	switch r := d.Resource.(type) {
	case Conversation:
		m["conversationId"] = r.ID
	case Proposal:
		if r.Conversation != nil {
			m["conversationId"] = r.Conversation.ID
		}
	}
	return m
}

type denialBucket struct {
	tokens     float64
	at         time.Time
	suppressed int64
}

// NewGate builds a gate.
func NewGate(cfg GateConfig) *Gate {
	if cfg.Engine == nil {
		cfg.Engine = Default()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.DenialsPerMinute <= 0 {
		cfg.DenialsPerMinute = DefaultDenialsPerMinute
	}
	if cfg.DenialBurst <= 0 {
		cfg.DenialBurst = DefaultDenialBurst
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Gate{engine: cfg.Engine, cfg: cfg, buckets: map[string]*denialBucket{}}
}

// Engine is the gate's engine.
func (g *Gate) Engine() *Engine { return g.engine }

// Decide decides, and records a decision that refuses (a deny, or an
// obligation the door cannot meet yet).
func (g *Gate) Decide(ctx context.Context, p protocol.Principal, a Action, r Resource, c Context) Decision {
	d := g.engine.Decide(p, a, r, c)
	if d.Effect != EffectAllow {
		g.record(ctx, Denial{Principal: p, Action: a, Resource: r, Door: c.Door, Decision: d})
	}
	return d
}

// Allowed decides without recording: for filtering what a read shows
// (rows of a list), where leaving something out is no refusal.
func (g *Gate) Allowed(p protocol.Principal, a Action, r Resource, c Context) bool {
	return g.engine.Decide(p, a, r, c).Allowed()
}

// record writes d unless the principal's bucket is empty.
func (g *Gate) record(ctx context.Context, d Denial) {
	g.cfg.Logger.Info("policy denied", "principal", d.Principal.Name, "action", d.Action, "resource", describe(d.Resource),
		"reason", d.Decision.Reason, "door", d.Door)
	if g.cfg.Record == nil {
		return
	}
	suppressed, ok := g.take(d.Principal.Name)
	if !ok {
		return
	}
	d.Suppressed = suppressed
	// The denial is written even when the request's context ended: a
	// client that hangs up does not erase its trace.
	if err := g.cfg.Record(context.WithoutCancel(ctx), d); err != nil {
		g.cfg.Logger.Warn("policy denial not recorded", "principal", d.Principal.Name, "action", d.Action, "err", err)
	}
}

// take spends one token of the principal's bucket; ok false when empty
// (then the denial is counted as suppressed). suppressed is how many were
// left out before this one.
func (g *Gate) take(name string) (suppressed int64, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.cfg.Now()
	rate, burst := float64(g.cfg.DenialsPerMinute)/60, float64(g.cfg.DenialBurst)
	b := g.buckets[name]
	if b == nil {
		if len(g.buckets) > 10000 { // forget principals long quiet rather than grow
			for k, v := range g.buckets {
				if v.suppressed == 0 && now.Sub(v.at).Seconds()*rate >= burst {
					delete(g.buckets, k)
				}
			}
		}
		b = &denialBucket{tokens: burst, at: now}
		g.buckets[name] = b
	}
	b.tokens = min(burst, b.tokens+now.Sub(b.at).Seconds()*rate)
	b.at = now
	if b.tokens < 1 {
		b.suppressed++
		return 0, false
	}
	b.tokens--
	suppressed, b.suppressed = b.suppressed, 0
	return suppressed, true
}

type gateKey struct{}

// WithGate is ctx carrying the gate every door and service below the
// request asks. The edge sets it with the principal.
func WithGate(ctx context.Context, g *Gate) context.Context {
	return context.WithValue(ctx, gateKey{}, g)
}

var defaultGate = sync.OnceValue(func() *Gate { return NewGate(GateConfig{}) })

// GateFrom is the gate ctx carries; without one, a gate of the built-in
// policies that records nothing.
func GateFrom(ctx context.Context) *Gate {
	if g, ok := ctx.Value(gateKey{}).(*Gate); ok {
		return g
	}
	return defaultGate()
}

type doorKey struct{}

// WithDoor is ctx saying which door the request came through.
func WithDoor(ctx context.Context, d Door) context.Context {
	return context.WithValue(ctx, doorKey{}, d)
}

// ContextFrom is the decision context of ctx's request (door http when
// none is set).
func ContextFrom(ctx context.Context) Context {
	d, ok := ctx.Value(doorKey{}).(Door)
	if !ok {
		d = DoorHTTP
	}
	return Context{Door: d}
}

// Ask decides for the principal ctx carries, through the gate ctx
// carries, recording a refusal, and returns it as a typed error
// (Decision.Err). Work without a principal is the daemon's own (recovery,
// the sweeper, the scheduler), not a request: it is allowed.
func Ask(ctx context.Context, a Action, r Resource) error {
	_, err := AskDecision(ctx, a, r)
	return err
}

// AskDecision is Ask with the decision itself (an allow for the daemon's
// own work).
func AskDecision(ctx context.Context, a Action, r Resource) (Decision, error) {
	p, ok := protocol.PrincipalFrom(ctx)
	if !ok {
		return Decision{Effect: EffectAllow, Policies: []Cited{}}, nil
	}
	d := GateFrom(ctx).Decide(ctx, p, a, r, ContextFrom(ctx))
	return d, d.Err()
}

// AskConversation decides a on a conversation as every door does: one
// the principal may not read is not_found, with the answer of one that
// does not exist.
func AskConversation(ctx context.Context, a Action, res Conversation) error {
	if err := Ask(ctx, ReadConversation, res); err != nil {
		return protocol.Errorf(protocol.NotFound, "conversation %s not found", res.ID)
	}
	if a == ReadConversation {
		return nil
	}
	return Ask(ctx, a, res)
}

// AskProposal decides a on a proposal as every door does: one the
// principal may not read is not_found.
func AskProposal(ctx context.Context, a Action, res Proposal) error {
	if err := Ask(ctx, ReadProposal, res); err != nil {
		return protocol.Errorf(protocol.NotFound, "proposal %s not found", res.ID)
	}
	if a == ReadProposal {
		return nil
	}
	return Ask(ctx, a, res)
}

// May reports, without recording, whether the principal ctx carries may
// do a on r (true for the daemon's own work): the filter of reads that
// aggregate.
func May(ctx context.Context, a Action, r Resource) bool {
	p, ok := protocol.PrincipalFrom(ctx)
	return !ok || GateFrom(ctx).Allowed(p, a, r, ContextFrom(ctx))
}

// ActionDenied is the audit action of a denial.
const ActionDenied = "studio.policy.denied"

// AuditDenials records denials in StateDB's append-only audit trail:
// actor the principal, target the resource, details what was asked and
// why it was refused (Denial.Details).
func AuditDenials(st store.AuditStore, now func() time.Time) func(context.Context, Denial) error {
	return func(ctx context.Context, d Denial) error {
		b, err := protocol.Marshal(d.Details())
		if err != nil {
			return err
		}
		target := d.Resource.ResourceID()
		actor := d.Principal.Name
		if actor == "" {
			actor = protocol.AuditActor
		}
		_, err = st.AppendAdminEvent(ctx, store.AppendAdminEventParams{Actor: actor, Action: ActionDenied, TargetID: &target,
			Details: b, Now: now()})
		return err
	}
}
