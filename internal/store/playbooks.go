package store

import (
	"context"
	"time"
)

// Playbook is a row of studio_playbooks: a named prompt with declared args.
type Playbook struct {
	ID          string
	Project     string
	Name        string
	Description string
	Prompt      string
	Args        []PlaybookArg
	Version     int64
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// PlaybookArg is one declared argument of a playbook. It is stored as JSON.
type PlaybookArg struct {
	Name        string  `json:"name"`
	Description string  `json:"description,omitempty"`
	Required    bool    `json:"required,omitempty"`
	Default     *string `json:"default,omitempty"`
}

// PlaybookStore keeps playbooks. Names are unique: a duplicate is conflict.
type PlaybookStore interface {
	CreatePlaybook(ctx context.Context, p CreatePlaybookParams) (Playbook, error)
	GetPlaybook(ctx context.Context, id string) (Playbook, error)
	GetPlaybookByName(ctx context.Context, name string) (Playbook, error)
	// ListPlaybooks pages playbooks by name, ascending.
	ListPlaybooks(ctx context.Context, p ListPlaybooksParams) ([]Playbook, error)
	UpdatePlaybook(ctx context.Context, p UpdatePlaybookParams) (Playbook, error)
	// DeletePlaybook removes a playbook and returns the removed row. A
	// playbook that a workflow step or a schedule uses is conflict (details
	// usedBy); runs keep their own copy of what they ran.
	DeletePlaybook(ctx context.Context, p DeletePlaybookParams) (Playbook, error)
}

// CreatePlaybookParams creates a playbook at version 1.
type CreatePlaybookParams struct {
	ID          string
	Project     string
	Name        string
	Description string
	Prompt      string
	Args        []PlaybookArg
	Now         time.Time
	Audit       *AppendAdminEventParams
}

// ListPlaybooksParams filters and pages playbooks. Query matches name or
// description, case-insensitively. AfterName is the previous page's last name.
type ListPlaybooksParams struct {
	Project   string
	Query     string
	AfterName string
	Limit     int
}

// UpdatePlaybookParams changes the fields that are set.
type UpdatePlaybookParams struct {
	ID              string
	ExpectedVersion int64
	Name            *string
	Description     *string
	Prompt          *string
	Args            *[]PlaybookArg
	Now             time.Time
	Audit           *AppendAdminEventParams
}

// DeletePlaybookParams removes a playbook.
type DeletePlaybookParams struct {
	ID              string
	ExpectedVersion int64
	Audit           *AppendAdminEventParams
}
