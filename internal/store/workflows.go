package store

import (
	"context"
	"time"
)

// Workflow is a row of studio_workflows with its ordered steps.
type Workflow struct {
	ID          string
	Project     string
	Name        string
	Description string
	Steps       []WorkflowStep
	Version     int64
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// WorkflowStep runs one playbook. PlaybookName is filled on reads.
type WorkflowStep struct {
	PlaybookID   string
	PlaybookName string
	Input        string
	Args         map[string]string
}

// WorkflowStore keeps workflows. Names are unique; a step naming an unknown
// playbook is not_found.
type WorkflowStore interface {
	CreateWorkflow(ctx context.Context, p CreateWorkflowParams) (Workflow, error)
	GetWorkflow(ctx context.Context, id string) (Workflow, error)
	GetWorkflowByName(ctx context.Context, name string) (Workflow, error)
	// ListWorkflows pages workflows by name, ascending.
	ListWorkflows(ctx context.Context, p ListWorkflowsParams) ([]Workflow, error)
	// UpdateWorkflow changes the fields that are set; Steps replaces all steps.
	UpdateWorkflow(ctx context.Context, p UpdateWorkflowParams) (Workflow, error)
	// DeleteWorkflow removes a workflow and its steps (its runs stay) and
	// returns it as it was.
	DeleteWorkflow(ctx context.Context, p DeleteWorkflowParams) (Workflow, error)
	// LaunchWorkflow queues one run per step of the workflow at
	// ExpectedVersion, in step order, each recording the workflow and its
	// step, with one audit row: all of them or none.
	LaunchWorkflow(ctx context.Context, p LaunchWorkflowParams) ([]Run, error)
}

// CreateWorkflowParams creates a workflow at version 1.
type CreateWorkflowParams struct {
	ID          string
	Project     string
	Name        string
	Description string
	Steps       []WorkflowStep
	Now         time.Time
	Audit       *AppendAdminEventParams
}

// ListWorkflowsParams filters and pages workflows (as ListPlaybooksParams).
type ListWorkflowsParams struct {
	Project   string
	Query     string
	AfterName string
	Limit     int
}

// UpdateWorkflowParams changes the fields that are set.
type UpdateWorkflowParams struct {
	ID              string
	ExpectedVersion int64
	Name            *string
	Description     *string
	Steps           *[]WorkflowStep
	Now             time.Time
	Audit           *AppendAdminEventParams
}
