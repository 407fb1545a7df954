package studio

import (
	"context"
	"strconv"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Checks a command makes against the current state, shared by Prepare (before
// a proposal is made: docs/design.md §9.3, step 1, a command that could not
// run never becomes a proposal) and Execute (when it runs): every check but
// the write itself, one function each, so the two cannot drift apart.

// versionHolds refuses a command whose own expectedVersion is not
// its target's current version.
func versionHolds(cmd Command, target *protocol.ResourceVersion) error {
	v, ok := cmd.(versioned)
	if !ok || v.expectedVersion() == 0 || target == nil {
		return nil
	}
	current, err := strconv.ParseInt(target.Version, 10, 64)
	if err != nil {
		return err
	}
	if v.expectedVersion() != current {
		return conflictVersion(target, v.expectedVersion(), current)
	}
	return nil
}

// namer is a command that gives a resource a name (a create, a rename):
// names are unique per kind.
type namer interface {
	claimsName() (kind, name string)
}

func (c CreatePlaybookCommand) claimsName() (string, string) { return store.KindPlaybook, c.Name }
func (c UpdatePlaybookCommand) claimsName() (string, string) {
	return store.KindPlaybook, deref(c.Name)
}
func (c CreateWorkflowCommand) claimsName() (string, string) { return store.KindWorkflow, c.Name }
func (c UpdateWorkflowCommand) claimsName() (string, string) {
	return store.KindWorkflow, deref(c.Name)
}
func (c CreateScheduleCommand) claimsName() (string, string) { return store.KindSchedule, c.Name }
func (c UpdateScheduleCommand) claimsName() (string, string) {
	return store.KindSchedule, deref(c.Name)
}

// checkNameFree refuses a command that would give its resource a name
// another resource of the kind has (the target itself may keep its own).
func (s *Service) checkNameFree(ctx context.Context, cmd Command, target *protocol.ResourceVersion) error {
	n, ok := cmd.(namer)
	if !ok {
		return nil
	}
	kind, name := n.claimsName()
	if name == "" {
		return nil
	}
	var id string
	var err error
	switch kind {
	case store.KindPlaybook:
		var p store.Playbook
		p, err = s.store.GetPlaybookByName(ctx, name)
		id = p.ID
	case store.KindWorkflow:
		var w store.Workflow
		w, err = s.store.GetWorkflowByName(ctx, name)
		id = w.ID
	case store.KindSchedule:
		var sc store.Schedule
		sc, err = s.store.GetScheduleByName(ctx, name)
		id = sc.ID
	}
	switch {
	case protocol.IsCode(err, protocol.NotFound):
		return nil
	case err != nil:
		return err
	case target != nil && target.ID == id:
		return nil
	}
	return protocol.Errorf(protocol.Conflict, "a %s named %q already exists", kind, name).
		With("kind", kind).With("name", name).With("id", id)
}
