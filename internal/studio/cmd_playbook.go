package studio

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// CreatePlaybookCommand is create_playbook.
type CreatePlaybookCommand struct {
	Name        string        `json:"name" jsonschema:"minLength=1,maxLength=64,pattern=^[a-z0-9][a-z0-9._-]*$" jsonschema_description:"Unique playbook name: lowercase letters, digits, '-', '_' or '.', starting with a letter or digit (for example audit-repo)."`
	Description string        `json:"description,omitempty" jsonschema:"maxLength=2000" jsonschema_description:"One or two sentences saying what the playbook is for."`
	Prompt      string        `json:"prompt" jsonschema:"minLength=1,maxLength=32768" jsonschema_description:"Instructions the model receives when the playbook runs. {{input}} is replaced by the run's input and {{name}} by the argument called name; input and arguments the prompt does not mention are appended after it."`
	Args        []PlaybookArg `json:"args,omitempty" jsonschema:"maxItems=20" jsonschema_description:"Arguments a launch may or must give."`
	Project     string        `json:"project,omitempty" jsonschema:"maxLength=64" jsonschema_description:"Project the playbook belongs to; default \"default\"."`
}

// Validate implements Command.
func (c CreatePlaybookCommand) Validate() error {
	if err := checkName("name", c.Name); err != nil {
		return err
	}
	if err := CheckText("description", c.Description, MaxDescriptionLen, false); err != nil {
		return err
	}
	if err := CheckText("prompt", c.Prompt, MaxPromptLen, true); err != nil {
		return err
	}
	if err := checkArgDecls("args", c.Args); err != nil {
		return err
	}
	return checkProject(c.Project)
}

// Summary implements Command.
func (c CreatePlaybookCommand) Summary() string {
	s := fmt.Sprintf("Create playbook %q", c.Name)
	if len(c.Args) > 0 {
		names := make([]string, len(c.Args))
		for i, a := range c.Args {
			names[i] = a.Name
		}
		s += " with arguments " + strings.Join(names, ", ")
	}
	return s
}

func (CreatePlaybookCommand) resolve(context.Context, *Service) (*protocol.ResourceVersion, error) {
	return nil, nil
}

func (c CreatePlaybookCommand) execute(ctx context.Context, s *Service, env execEnv) (Result, error) {
	id := uuid.NewString()
	p, err := s.store.CreatePlaybook(ctx, store.CreatePlaybookParams{
		ID: id, Project: projectOr(c.Project), Name: c.Name, Description: c.Description, Prompt: c.Prompt,
		Args: storeArgs(c.Args), Now: env.now, Audit: env.audit(id),
	})
	if err != nil {
		return Result{}, err
	}
	v := PlaybookView(p)
	return Result{Target: resourceVersion(store.KindPlaybook, p.ID, p.Version), Playbook: &v}, nil
}

// UpdatePlaybookCommand is update_playbook: only the fields given change.
type UpdatePlaybookCommand struct {
	Playbook        string         `json:"playbook" jsonschema:"minLength=1" jsonschema_description:"The playbook to change: its name (for example audit-repo) or id."`
	ExpectedVersion int64          `json:"expectedVersion" jsonschema:"minimum=1" jsonschema_description:"The playbook's version as last read; the update is refused if it changed since."`
	Name            *string        `json:"name,omitzero" jsonschema:"minLength=1,maxLength=64,pattern=^[a-z0-9][a-z0-9._-]*$" jsonschema_description:"New unique name."`
	Description     *string        `json:"description,omitzero" jsonschema:"maxLength=2000" jsonschema_description:"New description."`
	Prompt          *string        `json:"prompt,omitzero" jsonschema:"minLength=1,maxLength=32768" jsonschema_description:"New prompt."`
	Args            *[]PlaybookArg `json:"args,omitzero" jsonschema:"maxItems=20" jsonschema_description:"New argument declarations; they replace all existing ones."`
}

func (c UpdatePlaybookCommand) expectedVersion() int64 { return c.ExpectedVersion }

// Validate implements Command.
func (c UpdatePlaybookCommand) Validate() error {
	if err := CheckRef("playbook", c.Playbook, true); err != nil {
		return err
	}
	if err := checkExpectedVersion(c.ExpectedVersion, true); err != nil {
		return err
	}
	if c.Name == nil && c.Description == nil && c.Prompt == nil && c.Args == nil {
		return invalid("playbook", "nothing to change: give name, description, prompt or args")
	}
	if err := checkChangedNameDescription(c.Name, c.Description); err != nil {
		return err
	}
	if c.Prompt != nil {
		if err := CheckText("prompt", *c.Prompt, MaxPromptLen, true); err != nil {
			return err
		}
	}
	if c.Args != nil {
		return checkArgDecls("args", *c.Args)
	}
	return nil
}

// Summary implements Command.
func (c UpdatePlaybookCommand) Summary() string {
	parts := changedNameDescription(c.Name, c.Description)
	if c.Prompt != nil {
		parts = append(parts, "prompt")
	}
	if c.Args != nil {
		parts = append(parts, fmt.Sprintf("%d argument declarations", len(*c.Args)))
	}
	return fmt.Sprintf("Update playbook %q (%s) from version %d", c.Playbook, strings.Join(parts, ", "), c.ExpectedVersion)
}

func (c UpdatePlaybookCommand) resolve(ctx context.Context, s *Service) (*protocol.ResourceVersion, error) {
	p, err := s.lookupPlaybook(ctx, c.Playbook)
	if err != nil {
		return nil, err
	}
	return resourceVersion(store.KindPlaybook, p.ID, p.Version), nil
}

func (c UpdatePlaybookCommand) execute(ctx context.Context, s *Service, env execEnv) (Result, error) {
	p := store.UpdatePlaybookParams{ID: env.targetID(), ExpectedVersion: env.expected, Name: c.Name,
		Description: c.Description, Prompt: c.Prompt, Now: env.now, Audit: env.audit(env.targetID())}
	if c.Args != nil {
		a := storeArgs(*c.Args)
		p.Args = &a
	}
	pb, err := s.store.UpdatePlaybook(ctx, p)
	if err != nil {
		return Result{}, err
	}
	v := PlaybookView(pb)
	return Result{Target: resourceVersion(store.KindPlaybook, pb.ID, pb.Version), Playbook: &v}, nil
}

// DeletePlaybookCommand is delete_playbook.
type DeletePlaybookCommand struct {
	Playbook        string `json:"playbook" jsonschema:"minLength=1" jsonschema_description:"The playbook to delete: its name or id."`
	ExpectedVersion int64  `json:"expectedVersion,omitzero" jsonschema:"minimum=1" jsonschema_description:"Optional: the playbook's version as last read; the delete is refused if it changed since."`
}

func (c DeletePlaybookCommand) expectedVersion() int64 { return c.ExpectedVersion }

// Validate implements Command.
func (c DeletePlaybookCommand) Validate() error {
	if err := CheckRef("playbook", c.Playbook, true); err != nil {
		return err
	}
	return checkExpectedVersion(c.ExpectedVersion, false)
}

// Summary implements Command.
func (c DeletePlaybookCommand) Summary() string { return fmt.Sprintf("Delete playbook %q", c.Playbook) }

func (c DeletePlaybookCommand) resolve(ctx context.Context, s *Service) (*protocol.ResourceVersion, error) {
	return UpdatePlaybookCommand{Playbook: c.Playbook}.resolve(ctx, s)
}

func (c DeletePlaybookCommand) execute(ctx context.Context, s *Service, env execEnv) (Result, error) {
	pb, err := s.store.DeletePlaybook(ctx, store.DeletePlaybookParams{ID: env.targetID(), ExpectedVersion: env.expected,
		Audit: env.audit(env.targetID())})
	if err != nil {
		return Result{}, err
	}
	v := PlaybookView(pb)
	return Result{Target: resourceVersion(store.KindPlaybook, pb.ID, pb.Version), Deleted: true, Playbook: &v}, nil
}
