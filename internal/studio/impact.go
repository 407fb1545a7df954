package studio

import (
	"context"
	"fmt"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Impact says how hard a command's change is to take back, beyond its risk
// class: what the proposal card shows in colour and words, and why an
// irreversible one asks for the target's name to be typed before Confirm.
type Impact string

// Impacts, from least to most severe.
const (
	ImpactNone         Impact = ""
	ImpactDestructive  Impact = "destructive"  // loses work or data that a later command can only partly restore (a cancelled run)
	ImpactIrreversible Impact = "irreversible" // removes something for good (a delete, a purge)
)

// Destructive reports whether i loses work or data.
func (i Impact) Destructive() bool { return i == ImpactDestructive || i == ImpactIrreversible }

// Irreversible reports whether i cannot be undone.
func (i Impact) Irreversible() bool { return i == ImpactIrreversible }

// destructive and irreversible mark a command spec in the commandSpecs table.
func (sp CommandSpec) destructive() CommandSpec  { sp.Impact = ImpactDestructive; return sp }
func (sp CommandSpec) irreversible() CommandSpec { sp.Impact = ImpactIrreversible; return sp }

// impactRefiner is implemented by commands whose impact depends on their
// arguments (run_maintenance: a vacuum loses nothing, a purge is for good).
// It can only lower the table's declaration, never raise it past it.
type impactRefiner interface {
	impact() Impact
}

// ImpactOf is cmd's impact: its spec's, refined by the command itself.
func ImpactOf(cmd Command) Impact {
	declared := SpecOf(cmd).Impact
	if r, ok := cmd.(impactRefiner); ok && declared != ImpactNone {
		if got := r.impact(); got == ImpactNone || (got == ImpactDestructive && declared == ImpactIrreversible) || got == declared {
			return got
		}
	}
	return declared
}

// noChanger is implemented by commands that can find, against the current
// state, that they would change nothing (pausing a paused schedule). Such a
// command is refused before it becomes a proposal, and one that became a
// no-op between its confirmation and its execution answers a NoChange
// result without a write.
type noChanger interface {
	// unchanged returns a sentence saying why nothing would change ("" when
	// something would).
	unchanged(ctx context.Context, s *Service) (string, error)
}

// noChangeError is Prepare's refusal of a command that would change nothing:
// conflict (the state already is what the command asks for), with
// details.noChange so a client or model can say so rather than retry.
func noChangeError(why string) error {
	return protocol.Errorf(protocol.Conflict, "%s; nothing to change", why).With("noChange", true)
}

// noChangeResult is what executing a command that has become a no-op
// answers: the target at its unchanged version, and why.
func noChangeResult(target *protocol.ResourceVersion, why string) Result {
	return Result{Target: target, NoChange: true, Message: why + "; nothing changed"}
}

// TargetName is the human name of a command's target (a playbook's,
// workflow's or schedule's name; a run as its playbook and short id), or ""
// when it cannot be read.
func (s *Service) TargetName(ctx context.Context, t *protocol.ResourceVersion) string {
	if t == nil {
		return ""
	}
	switch t.Kind {
	case store.KindPlaybook:
		if p, err := s.store.GetPlaybook(ctx, t.ID); err == nil {
			return p.Name
		}
	case store.KindWorkflow:
		if w, err := s.store.GetWorkflow(ctx, t.ID); err == nil {
			return w.Name
		}
	case store.KindSchedule:
		if sc, err := s.store.GetSchedule(ctx, t.ID); err == nil {
			return sc.Name
		}
	case store.KindRun:
		if r, err := s.store.GetRun(ctx, t.ID); err == nil {
			return fmt.Sprintf("%s run %s", r.PlaybookName, shortID(r.ID))
		}
	}
	return ""
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
