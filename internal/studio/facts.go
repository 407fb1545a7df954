package studio

import (
	"context"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Facts are what an authorization policy decides a command by: its type,
// risk and impact, and the kind and project of the resource it changes or
// creates.
type Facts struct {
	Type       string
	Risk       string
	Impact     Impact
	TargetKind string // "" when it has no target
	Project    string // "" when it concerns no project (maintenance)
}

// FactsOf resolves cmd against the current state (not_found when its
// target does not exist; validation when it is malformed) and returns
// its facts.
func (s *Service) FactsOf(ctx context.Context, cmd Command) (Facts, error) {
	target, err := s.ResolveTarget(ctx, cmd)
	if err != nil {
		return Facts{}, err
	}
	f := FactsOfSpec(cmd)
	if target != nil {
		f.TargetKind = target.Kind
	}
	f.Project = s.commandProject(ctx, cmd, target)
	return f, nil
}

// commandProject is the project of the resource cmd changes (target) or
// creates.
func (s *Service) commandProject(ctx context.Context, cmd Command, target *protocol.ResourceVersion) string {
	if target != nil {
		return s.projectOf(ctx, target.Kind, target.ID)
	}
	if c, ok := cmd.(creator); ok {
		return c.project(ctx, s)
	}
	return ""
}

// FactsOfSpec are the facts cmd says of itself, without its target: its
// type, risk and impact.
func FactsOfSpec(cmd Command) Facts {
	sp := SpecOf(cmd)
	return Facts{Type: sp.Type, Risk: sp.Risk, Impact: ImpactOf(cmd)}
}

// creator is a command that creates a resource in a project.
type creator interface {
	project(ctx context.Context, s *Service) string
}

func (c CreatePlaybookCommand) project(context.Context, *Service) string { return projectOr(c.Project) }
func (c CreateWorkflowCommand) project(context.Context, *Service) string { return projectOr(c.Project) }

// project of a schedule: its own, else its playbook's.
func (c CreateScheduleCommand) project(ctx context.Context, s *Service) string {
	if c.Project != "" {
		return c.Project
	}
	if pb, err := s.lookupPlaybook(ctx, c.Playbook); err == nil {
		return pb.Project
	}
	return store.DefaultProject
}

// projectOf is the project of a resource ("" when it has none or cannot
// be read).
func (s *Service) projectOf(ctx context.Context, kind, id string) string {
	switch kind {
	case store.KindPlaybook:
		if p, err := s.store.GetPlaybook(ctx, id); err == nil {
			return p.Project
		}
	case store.KindWorkflow:
		if w, err := s.store.GetWorkflow(ctx, id); err == nil {
			return w.Project
		}
	case store.KindSchedule:
		if sc, err := s.store.GetSchedule(ctx, id); err == nil {
			return sc.Project
		}
	case store.KindRun:
		if r, err := s.store.GetRun(ctx, id); err == nil {
			return r.Project
		}
	}
	return ""
}
