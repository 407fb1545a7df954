package studio

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// LaunchPlaybookCommand is launch_playbook: queue a run.
type LaunchPlaybookCommand struct {
	Playbook string            `json:"playbook" jsonschema:"minLength=1" jsonschema_description:"The playbook to run: its name (for example audit-repo) or id."`
	Input    string            `json:"input,omitempty" jsonschema:"maxLength=32768" jsonschema_description:"What the run works on, in plain words (for example the repository or the text to process)."`
	Args     map[string]string `json:"args,omitempty" jsonschema_description:"Values for the playbook's declared arguments. Undeclared arguments are refused; required ones without a default must be given."`
}

// Validate implements Command.
func (c LaunchPlaybookCommand) Validate() error {
	if err := CheckRef("playbook", c.Playbook, true); err != nil {
		return err
	}
	if err := CheckText("input", c.Input, MaxInputLen, false); err != nil {
		return err
	}
	return checkArgValues("args", c.Args)
}

// Summary implements Command.
func (c LaunchPlaybookCommand) Summary() string {
	s := fmt.Sprintf("Launch playbook %q", c.Playbook)
	if c.Input != "" {
		s += " with input " + quote(c.Input)
	}
	// An argument that repeats the input is named, not quoted a second time.
	args := make(map[string]string, len(c.Args))
	var same []string
	for k, v := range c.Args {
		if c.Input != "" && v == c.Input {
			same = append(same, k)
		} else {
			args[k] = v
		}
	}
	if len(args) > 0 {
		if c.Input != "" {
			s += " and"
		} else {
			s += " with"
		}
		s += " args " + argsPhrase(args)
	}
	if len(same) > 0 {
		sort.Strings(same)
		s += " (also as " + strings.Join(same, ", ") + ")"
	}
	return s
}

func (c LaunchPlaybookCommand) resolve(ctx context.Context, s *Service) (*protocol.ResourceVersion, error) {
	return UpdatePlaybookCommand{Playbook: c.Playbook}.resolve(ctx, s)
}

// check refuses undeclared and missing arguments before a launch is proposed.
func (c LaunchPlaybookCommand) check(ctx context.Context, s *Service) error {
	_, _, err := s.bindPlaybookArgs(ctx, c.Playbook, c.Args)
	return err
}

func (c LaunchPlaybookCommand) execute(ctx context.Context, s *Service, env execEnv) (Result, error) {
	pb, err := s.store.GetPlaybook(ctx, env.targetID())
	if err != nil {
		return Result{}, err
	}
	if pb.Version != env.expected {
		return Result{}, conflictVersion(env.target, env.expected, pb.Version)
	}
	args, err := bindArgs("args", pb, c.Args, false)
	if err != nil {
		return Result{}, err
	}
	id := uuid.NewString()
	// The run pins the playbook version the args were checked against.
	r, err := s.store.CreateRun(ctx, store.CreateRunParams{ID: id, PlaybookID: pb.ID, ExpectedPlaybookVersion: pb.Version,
		Input: c.Input, Args: args, Trigger: store.RunTrigger(env.trigger), Now: env.now, Audit: env.audit(pb.ID, id)})
	if err != nil {
		return Result{}, err
	}
	s.runQueued(r.ID)
	v := RunView(r)
	return Result{Target: resourceVersion(store.KindRun, r.ID, r.Version), Run: &v}, nil
}

// CancelRunCommand is cancel_run.
type CancelRunCommand struct {
	Run string `json:"run" jsonschema:"minLength=36,maxLength=36" jsonschema_description:"The id of the queued or running run to cancel."`
}

// Validate implements Command.
func (c CancelRunCommand) Validate() error {
	if !isUUID(c.Run) {
		return invalid("run", "run must be a run id (a UUID)")
	}
	return nil
}

// Summary implements Command.
func (c CancelRunCommand) Summary() string { return "Cancel run " + c.Run }

// summaryNamed is "Cancel the audit-repo run bb6b9763": the playbook, not a UUID.
func (c CancelRunCommand) summaryNamed(name string) string { return "Cancel the " + name }

func (c CancelRunCommand) resolve(ctx context.Context, s *Service) (*protocol.ResourceVersion, error) {
	r, err := s.lookupRun(ctx, c.Run)
	if err != nil {
		return nil, err
	}
	return resourceVersion(store.KindRun, r.ID, r.Version), nil
}

// check refuses to propose cancelling a run that already ended.
func (c CancelRunCommand) check(ctx context.Context, s *Service) error {
	r, err := s.lookupRun(ctx, c.Run)
	if err != nil {
		return err
	}
	if r.Status != store.RunQueued && r.Status != store.RunRunning {
		return protocol.Errorf(protocol.Conflict, "run %s already ended %s", r.ID, r.Status).With("status", string(r.Status))
	}
	return nil
}

func (c CancelRunCommand) execute(ctx context.Context, s *Service, env execEnv) (Result, error) {
	r, err := s.store.CancelRun(ctx, store.CancelRunParams{ID: env.targetID(), ExpectedVersion: env.expected, Now: env.now,
		Audit: env.audit(env.targetID())})
	if err != nil {
		return Result{}, err
	}
	if r.Status == store.RunRunning {
		s.cancelLocal(r.ID)
	}
	s.runChanged(r.ID)
	v := RunView(r)
	return Result{Target: resourceVersion(store.KindRun, r.ID, r.Version), Run: &v}, nil
}

// RetryRunCommand is retry_run: a new run of the same playbook, input and
// arguments, at the playbook's current version.
type RetryRunCommand struct {
	Run string `json:"run" jsonschema:"minLength=36,maxLength=36" jsonschema_description:"The id of the failed or cancelled run to launch again."`
}

// Validate implements Command.
func (c RetryRunCommand) Validate() error { return CancelRunCommand(c).Validate() }

// Summary implements Command.
func (c RetryRunCommand) Summary() string { return "Retry run " + c.Run }

// summaryNamed is "Retry the audit-repo run bb6b9763".
func (c RetryRunCommand) summaryNamed(name string) string { return "Retry the " + name }

func (c RetryRunCommand) resolve(ctx context.Context, s *Service) (*protocol.ResourceVersion, error) {
	return CancelRunCommand(c).resolve(ctx, s)
}

// check refuses to propose retrying a run that did not fail or get cancelled.
func (c RetryRunCommand) check(ctx context.Context, s *Service) error {
	r, err := s.lookupRun(ctx, c.Run)
	if err != nil {
		return err
	}
	if r.Status != store.RunFailed && r.Status != store.RunCancelled {
		return protocol.Errorf(protocol.Conflict, "run %s is %s; only failed or cancelled runs can be retried", r.ID, r.Status).
			With("status", string(r.Status))
	}
	return nil
}

func (c RetryRunCommand) execute(ctx context.Context, s *Service, env execEnv) (Result, error) {
	prev, err := s.store.GetRun(ctx, env.targetID())
	if err != nil {
		return Result{}, err
	}
	if prev.Version != env.expected {
		return Result{}, conflictVersion(env.target, env.expected, prev.Version)
	}
	if prev.Status != store.RunFailed && prev.Status != store.RunCancelled {
		return Result{}, protocol.Errorf(protocol.Conflict, "run %s is %s; only failed or cancelled runs can be retried", prev.ID, prev.Status).
			With("status", string(prev.Status))
	}
	pb, err := s.store.GetPlaybook(ctx, prev.PlaybookID)
	if protocol.IsCode(err, protocol.NotFound) {
		return Result{}, protocol.Errorf(protocol.Conflict, "playbook %s of run %s no longer exists", prev.PlaybookName, prev.ID)
	}
	if err != nil {
		return Result{}, err
	}
	// Arguments the playbook still declares, re-bound to its current declarations.
	given := map[string]string{}
	for _, a := range pb.Args {
		if v, ok := prev.Args[a.Name]; ok {
			given[a.Name] = v
		}
	}
	args, err := bindArgs("args", pb, given, false)
	if err != nil {
		return Result{}, err
	}
	id := uuid.NewString()
	retryOf := prev.ID
	r, err := s.store.CreateRun(ctx, store.CreateRunParams{ID: id, Project: prev.Project, PlaybookID: pb.ID,
		ExpectedPlaybookVersion: pb.Version, Input: prev.Input, Args: args, Trigger: store.RunTrigger(env.trigger),
		RetryOf: &retryOf, ExpectedRetryOfVersion: env.expected, Now: env.now, Audit: env.audit(prev.ID, id)})
	if err != nil {
		return Result{}, err
	}
	s.runQueued(r.ID)
	v := RunView(r)
	return Result{Target: resourceVersion(store.KindRun, r.ID, r.Version), Run: &v}, nil
}
