package studio

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// WorkflowStepInput is one step of create_workflow and update_workflow.
type WorkflowStepInput struct {
	Playbook string            `json:"playbook" jsonschema:"minLength=1" jsonschema_description:"The step's playbook: its name (for example audit-repo) or id."`
	Input    string            `json:"input,omitempty" jsonschema:"maxLength=32768" jsonschema_description:"Input the step passes to the playbook."`
	Args     map[string]string `json:"args,omitempty" jsonschema_description:"Arguments for the playbook; only arguments it declares."`
}

func checkSteps(steps []WorkflowStepInput) error {
	if len(steps) == 0 || len(steps) > MaxSteps {
		return invalid("steps", "a workflow needs 1 to %d steps", MaxSteps)
	}
	for i, st := range steps {
		f := fmt.Sprintf("steps[%d]", i)
		if err := CheckRef(f+".playbook", st.Playbook, true); err != nil {
			return err
		}
		if err := CheckText(f+".input", st.Input, MaxInputLen, false); err != nil {
			return err
		}
		if err := checkArgValues(f+".args", st.Args); err != nil {
			return err
		}
	}
	return nil
}

// bindSteps resolves each step's playbook and binds its args as a launch
// would: an undeclared argument, or a required one the step leaves unset,
// is a validation error now, not a failed launch later. The error names
// the step as people count (step 2) and as the field (steps[1].args).
func (s *Service) bindSteps(ctx context.Context, steps []WorkflowStepInput) ([]store.WorkflowStep, error) {
	out := make([]store.WorkflowStep, 0, len(steps))
	for i, st := range steps {
		pb, err := s.lookupPlaybook(ctx, st.Playbook)
		if err != nil {
			return nil, stepError(i, err)
		}
		args, err := bindArgs(fmt.Sprintf("steps[%d].args", i), pb, st.Args, false)
		if err != nil {
			return nil, stepError(i, err)
		}
		out = append(out, store.WorkflowStep{PlaybookID: pb.ID, PlaybookName: pb.Name, Input: st.Input, Args: args})
	}
	return out, nil
}

// stepError says which step (1-based, as the Designer numbers them) a
// step's error is about: in the message and as details.step.
func stepError(i int, err error) error {
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		return err
	}
	out := pe.With("step", i+1)
	out.Message = fmt.Sprintf("step %d: %s", i+1, pe.Message)
	return out
}

func stepNames(steps []WorkflowStepInput) string {
	names := make([]string, len(steps))
	for i, st := range steps {
		names[i] = st.Playbook
	}
	return strings.Join(names, " → ")
}

// CreateWorkflowCommand is create_workflow.
type CreateWorkflowCommand struct {
	Name        string              `json:"name" jsonschema:"minLength=1,maxLength=64,pattern=^[a-z0-9][a-z0-9._-]*$" jsonschema_description:"Unique workflow name: lowercase letters, digits, '-', '_' or '.'."`
	Description string              `json:"description,omitempty" jsonschema:"maxLength=2000" jsonschema_description:"What the workflow is for."`
	Steps       []WorkflowStepInput `json:"steps" jsonschema:"minItems=1,maxItems=50" jsonschema_description:"The playbooks to run, in order."`
	Project     string              `json:"project,omitempty" jsonschema:"maxLength=64" jsonschema_description:"Project the workflow belongs to; default \"default\"."`
}

// Validate implements Command.
func (c CreateWorkflowCommand) Validate() error {
	if err := checkName("name", c.Name); err != nil {
		return err
	}
	if err := CheckText("description", c.Description, MaxDescriptionLen, false); err != nil {
		return err
	}
	if err := checkSteps(c.Steps); err != nil {
		return err
	}
	return checkProject(c.Project)
}

// Summary implements Command.
func (c CreateWorkflowCommand) Summary() string {
	return fmt.Sprintf("Create workflow %q with %d steps: %s", c.Name, len(c.Steps), stepNames(c.Steps))
}

func (CreateWorkflowCommand) resolve(context.Context, *Service) (*protocol.ResourceVersion, error) {
	return nil, nil
}

// check refuses steps whose playbook or arguments do not bind.
func (c CreateWorkflowCommand) check(ctx context.Context, s *Service) error {
	_, err := s.bindSteps(ctx, c.Steps)
	return err
}

func (c CreateWorkflowCommand) execute(ctx context.Context, s *Service, env execEnv) (Result, error) {
	steps, err := s.bindSteps(ctx, c.Steps)
	if err != nil {
		return Result{}, err
	}
	id := uuid.NewString()
	w, err := s.store.CreateWorkflow(ctx, store.CreateWorkflowParams{ID: id, Project: projectOr(c.Project), Name: c.Name,
		Description: c.Description, Steps: steps, Now: env.now, Audit: env.audit(id)})
	if err != nil {
		return Result{}, err
	}
	v := WorkflowView(w)
	return Result{Target: resourceVersion(store.KindWorkflow, w.ID, w.Version), Workflow: &v}, nil
}

// UpdateWorkflowCommand is update_workflow: only the fields given change.
type UpdateWorkflowCommand struct {
	Workflow        string               `json:"workflow" jsonschema:"minLength=1" jsonschema_description:"The workflow to change: its name or id."`
	ExpectedVersion int64                `json:"expectedVersion" jsonschema:"minimum=1" jsonschema_description:"The workflow's version as last read; the update is refused if it changed since."`
	Name            *string              `json:"name,omitzero" jsonschema:"minLength=1,maxLength=64,pattern=^[a-z0-9][a-z0-9._-]*$" jsonschema_description:"New unique name."`
	Description     *string              `json:"description,omitzero" jsonschema:"maxLength=2000" jsonschema_description:"New description."`
	Steps           *[]WorkflowStepInput `json:"steps,omitzero" jsonschema:"minItems=1,maxItems=50" jsonschema_description:"New steps; they replace all existing ones."`
}

func (c UpdateWorkflowCommand) expectedVersion() int64 { return c.ExpectedVersion }

// Validate implements Command.
func (c UpdateWorkflowCommand) Validate() error {
	if err := CheckRef("workflow", c.Workflow, true); err != nil {
		return err
	}
	if err := checkExpectedVersion(c.ExpectedVersion, true); err != nil {
		return err
	}
	if c.Name == nil && c.Description == nil && c.Steps == nil {
		return invalid("workflow", "nothing to change: give name, description or steps")
	}
	if err := checkChangedNameDescription(c.Name, c.Description); err != nil {
		return err
	}
	if c.Steps != nil {
		return checkSteps(*c.Steps)
	}
	return nil
}

// Summary implements Command.
func (c UpdateWorkflowCommand) Summary() string {
	parts := changedNameDescription(c.Name, c.Description)
	if c.Steps != nil {
		parts = append(parts, fmt.Sprintf("steps: %s", stepNames(*c.Steps)))
	}
	return fmt.Sprintf("Update workflow %q (%s) from version %d", c.Workflow, strings.Join(parts, ", "), c.ExpectedVersion)
}

func (c UpdateWorkflowCommand) resolve(ctx context.Context, s *Service) (*protocol.ResourceVersion, error) {
	w, err := s.lookupWorkflow(ctx, c.Workflow)
	if err != nil {
		return nil, err
	}
	return resourceVersion(store.KindWorkflow, w.ID, w.Version), nil
}

// check refuses new steps whose playbook or arguments do not bind.
func (c UpdateWorkflowCommand) check(ctx context.Context, s *Service) error {
	if c.Steps == nil {
		return nil
	}
	_, err := s.bindSteps(ctx, *c.Steps)
	return err
}

func (c UpdateWorkflowCommand) execute(ctx context.Context, s *Service, env execEnv) (Result, error) {
	p := store.UpdateWorkflowParams{ID: env.targetID(), ExpectedVersion: env.expected, Name: c.Name,
		Description: c.Description, Now: env.now, Audit: env.audit(env.targetID())}
	if c.Steps != nil {
		steps, err := s.bindSteps(ctx, *c.Steps)
		if err != nil {
			return Result{}, err
		}
		p.Steps = &steps
	}
	w, err := s.store.UpdateWorkflow(ctx, p)
	if err != nil {
		return Result{}, err
	}
	v := WorkflowView(w)
	return Result{Target: resourceVersion(store.KindWorkflow, w.ID, w.Version), Workflow: &v}, nil
}
