package studio

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// LaunchWorkflowCommand is launch_workflow: one run per step, queued in
// step order, each recording the workflow and its step.
// WorkflowLaunch answers a workflow launch: the workflow and its queued
// runs, one per step, in order.
type WorkflowLaunch struct {
	Workflow *Workflow `json:"workflow"`
	Runs     []Run     `json:"runs"`
}

// LaunchWorkflowCommand launches a workflow.
type LaunchWorkflowCommand struct {
	Workflow        string `json:"workflow" jsonschema:"minLength=1" jsonschema_description:"The workflow to launch: its name or id."`
	ExpectedVersion int64  `json:"expectedVersion,omitzero" jsonschema:"minimum=1" jsonschema_description:"Optional: the workflow's version as last read."`
}

func (c LaunchWorkflowCommand) expectedVersion() int64 { return c.ExpectedVersion }

// Validate implements Command.
func (c LaunchWorkflowCommand) Validate() error {
	if err := CheckRef("workflow", c.Workflow, true); err != nil {
		return err
	}
	return checkExpectedVersion(c.ExpectedVersion, false)
}

// Summary implements Command.
func (c LaunchWorkflowCommand) Summary() string {
	return fmt.Sprintf("Launch workflow %q: one run per step, queued in order", c.Workflow)
}

func (c LaunchWorkflowCommand) resolve(ctx context.Context, s *Service) (*protocol.ResourceVersion, error) {
	return UpdateWorkflowCommand{Workflow: c.Workflow}.resolve(ctx, s)
}

// check refuses a workflow whose steps' playbooks now need arguments the
// steps do not give.
func (c LaunchWorkflowCommand) check(ctx context.Context, s *Service) error {
	w, err := s.lookupWorkflow(ctx, c.Workflow)
	if err != nil {
		return err
	}
	_, err = s.bindWorkflowArgs(ctx, w)
	return err
}

// bindWorkflowArgs binds each step's arguments against its playbook as it
// is now.
func (s *Service) bindWorkflowArgs(ctx context.Context, w store.Workflow) ([]map[string]string, error) {
	if len(w.Steps) == 0 {
		return nil, protocol.Errorf(protocol.Conflict, "workflow %s has no steps to launch", w.Name)
	}
	out := make([]map[string]string, len(w.Steps))
	for i, st := range w.Steps {
		pb, err := s.store.GetPlaybook(ctx, st.PlaybookID)
		if err != nil {
			return nil, err
		}
		if out[i], err = bindArgs(fmt.Sprintf("steps[%d].args", i), pb, st.Args, false); err != nil {
			return nil, stepError(i, err)
		}
	}
	return out, nil
}

func (c LaunchWorkflowCommand) execute(ctx context.Context, s *Service, env execEnv) (Result, error) {
	w, err := s.store.GetWorkflow(ctx, env.targetID())
	if err != nil {
		return Result{}, err
	}
	if w.Version != env.expected {
		return Result{}, conflictVersion(env.target, env.expected, w.Version)
	}
	args, err := s.bindWorkflowArgs(ctx, w)
	if err != nil {
		return Result{}, err
	}
	ids := make([]string, len(w.Steps))
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	runs, err := s.store.LaunchWorkflow(ctx, store.LaunchWorkflowParams{WorkflowID: w.ID, ExpectedVersion: w.Version, RunIDs: ids,
		Args: args, Trigger: store.RunTrigger(env.trigger), Now: env.now, Audit: env.audit(w.ID, ids...)})
	if err != nil {
		return Result{}, err
	}
	res := Result{Target: resourceVersion(store.KindWorkflow, w.ID, w.Version)}
	for _, r := range runs {
		res.Runs = append(res.Runs, RunView(r))
		s.runQueued(r.ID)
	}
	v := WorkflowView(w)
	res.Workflow = &v
	return res, nil
}

// DeleteWorkflowCommand is delete_workflow.
type DeleteWorkflowCommand struct {
	Workflow        string `json:"workflow" jsonschema:"minLength=1" jsonschema_description:"The workflow to delete: its name or id."`
	ExpectedVersion int64  `json:"expectedVersion,omitzero" jsonschema:"minimum=1" jsonschema_description:"Optional: the workflow's version as last read."`
}

func (c DeleteWorkflowCommand) expectedVersion() int64 { return c.ExpectedVersion }

// Validate implements Command.
func (c DeleteWorkflowCommand) Validate() error { return LaunchWorkflowCommand(c).Validate() }

// Summary implements Command.
func (c DeleteWorkflowCommand) Summary() string { return fmt.Sprintf("Delete workflow %q", c.Workflow) }

func (c DeleteWorkflowCommand) resolve(ctx context.Context, s *Service) (*protocol.ResourceVersion, error) {
	return UpdateWorkflowCommand{Workflow: c.Workflow}.resolve(ctx, s)
}

func (c DeleteWorkflowCommand) execute(ctx context.Context, s *Service, env execEnv) (Result, error) {
	w, err := s.store.DeleteWorkflow(ctx, store.DeleteWorkflowParams{ID: env.targetID(), ExpectedVersion: env.expected,
		Audit: env.audit(env.targetID())})
	if err != nil {
		return Result{}, err
	}
	v := WorkflowView(w)
	return Result{Target: resourceVersion(store.KindWorkflow, w.ID, w.Version), Deleted: true, Workflow: &v}, nil
}
