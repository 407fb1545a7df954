package studio

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Command is a typed application command (docs/design.md §14): a plain struct
// with json tags, decoded strictly, that a model can fill in and a human can
// confirm. Its type id and risk are declared once, in commandSpecs (TypeOf,
// SpecOf). The set is closed: the unexported methods keep other packages from
// adding commands this package cannot execute.
type Command interface {
	// Validate checks the command on its own, without the store: required
	// fields, lengths, patterns, enums. Errors are validation.
	Validate() error
	// Summary is a short human sentence naming exactly what will happen,
	// e.g. `Launch playbook "audit-repo" with input "repo x"`.
	Summary() string

	// resolve names the command's target with its current version; nil for
	// creates and maintenance.
	resolve(ctx context.Context, s *Service) (*protocol.ResourceVersion, error)
	// execute applies the command in one store transaction.
	execute(ctx context.Context, s *Service, env execEnv) (Result, error)
}

// checker is implemented by commands that can tell before execution that
// they cannot run against the current state (an undeclared argument, a
// playbook or conversation that does not exist): Prepare calls it, so such
// a command never becomes a proposal a human confirms in vain.
type checker interface {
	check(ctx context.Context, s *Service) error
}

// CommandSpec describes one command type: what a tool registry needs to
// offer it to a model, and the risk of its proposals.
type CommandSpec struct {
	Type        string
	Title       string
	Description string
	Risk        string
	// Impact marks a destructive or irreversible command (impact.go).
	Impact Impact
	// New returns a zero command of this type (a pointer to its struct),
	// for decoding and for generating its JSON Schema.
	New func() Command

	goType reflect.Type
}

// command declares one command type: its Go type, id, title, risk and
// description, once.
func command[C any, P interface {
	*C
	Command
}](typ, title, risk, description string) CommandSpec {
	return CommandSpec{Type: typ, Title: title, Risk: risk, Description: description,
		New: func() Command { return P(new(C)) }, goType: reflect.TypeFor[C]()}
}

// commandSpecs is the registry, in a stable order: the one place a
// command's type id and risk are written.
var commandSpecs = []CommandSpec{
	command[CreatePlaybookCommand]("create_playbook", "Create playbook", protocol.RiskMutate,
		"Create a playbook: a named prompt with declared arguments that runs can launch."),
	command[UpdatePlaybookCommand]("update_playbook", "Update playbook", protocol.RiskMutate,
		"Change a playbook's name, description, prompt or arguments; only the given fields change."),
	command[DeletePlaybookCommand]("delete_playbook", "Delete playbook", protocol.RiskMutate,
		"Delete a playbook that no workflow or schedule uses. Its past runs stay.").irreversible(),
	command[CreateWorkflowCommand]("create_workflow", "Create workflow", protocol.RiskMutate,
		"Create a workflow: an ordered list of playbook steps."),
	command[UpdateWorkflowCommand]("update_workflow", "Update workflow", protocol.RiskMutate,
		"Change a workflow's name, description or steps; only the given fields change."),
	command[DeleteWorkflowCommand]("delete_workflow", "Delete workflow", protocol.RiskMutate,
		"Delete a workflow and its steps. The runs it launched stay.").irreversible(),
	command[LaunchPlaybookCommand]("launch_playbook", "Launch playbook", protocol.RiskExecute,
		"Queue a run of a playbook with an input and arguments; the model provider executes it."),
	command[LaunchWorkflowCommand]("launch_workflow", "Launch workflow", protocol.RiskExecute,
		"Queue one run per step of a workflow, in step order, each with its step's playbook, input and arguments."),
	command[CancelRunCommand]("cancel_run", "Cancel run", protocol.RiskExecute,
		"Cancel a queued or running run.").destructive(),
	command[RetryRunCommand]("retry_run", "Retry run", protocol.RiskExecute,
		"Launch a failed or cancelled run again with the same playbook, input and arguments."),
	command[CreateScheduleCommand]("create_schedule", "Create schedule", protocol.RiskMutate,
		"Create a schedule that launches a playbook on a 5-field cron expression (UTC)."),
	command[UpdateScheduleCommand]("update_schedule", "Update schedule", protocol.RiskMutate,
		"Change a schedule's name, cron expression, playbook, input or arguments; only the given fields change."),
	command[SetScheduleEnabledCommand]("set_schedule_enabled", "Enable or pause schedule", protocol.RiskMutate,
		"Enable a schedule or pause it."),
	command[DeleteScheduleCommand]("delete_schedule", "Delete schedule", protocol.RiskMutate,
		"Delete a schedule. The runs it launched stay.").irreversible(),
	command[RunMaintenanceCommand]("run_maintenance", "Run maintenance", protocol.RiskAdmin,
		"Database and retention maintenance: vacuum, WAL checkpoint, integrity check, purge of deleted conversations past the recovery window, purge of a conversation's older frames.").irreversible(),
	command[ReconcileProposalCommand]("reconcile_proposal", "Reconcile proposal", protocol.RiskAdmin,
		"Record the real outcome of an operator proposal left executing (indeterminate) because its result could not be recorded; nothing runs again."),
}

var (
	specByType   = map[string]CommandSpec{}
	specByGoType = map[reflect.Type]CommandSpec{}
)

func init() {
	for _, sp := range commandSpecs {
		if _, dup := specByType[sp.Type]; dup {
			panic("app: command type " + sp.Type + " declared twice")
		}
		specByType[sp.Type], specByGoType[sp.goType] = sp, sp
	}
}

// SpecOf is the spec of a command value (a struct or a pointer to one).
func SpecOf(cmd Command) CommandSpec {
	t := reflect.TypeOf(cmd)
	if t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return specByGoType[t]
}

// TypeOf is a command's stable type id, e.g. "launch_playbook".
func TypeOf(cmd Command) string { return SpecOf(cmd).Type }

// Commands lists every command type, in a stable order.
func Commands() []CommandSpec { return append([]CommandSpec(nil), commandSpecs...) }

// CommandTypes lists the command type ids, sorted.
func CommandTypes() []string {
	out := make([]string, 0, len(commandSpecs))
	for _, sp := range commandSpecs {
		out = append(out, sp.Type)
	}
	sort.Strings(out)
	return out
}

// LookupCommand returns the spec of a command type.
func LookupCommand(commandType string) (CommandSpec, bool) {
	sp, ok := specByType[commandType]
	return sp, ok
}

// DecodeCommand strictly decodes the JSON of a command of the given type
// (unknown members, duplicate names, wrong types and trailing data are
// validation errors) and validates it.
func DecodeCommand(commandType string, data []byte) (Command, error) {
	sp, ok := specByType[commandType]
	if !ok {
		return nil, protocol.Errorf(protocol.Validation, "unknown command type %q", commandType).
			With("field", "type").With("commandTypes", CommandTypes())
	}
	cmd := sp.New()
	if err := protocol.Unmarshal(data, cmd); err != nil {
		return nil, err
	}
	if err := cmd.Validate(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// CanonicalCommand is the command's canonical JSON (RFC 8785 over the
// project's deterministic encoding): what a proposal stores and hashes.
func CanonicalCommand(cmd Command) ([]byte, error) {
	if isNil(cmd) {
		return nil, protocol.Errorf(protocol.Validation, "no command")
	}
	b, err := protocol.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	return protocol.Canonicalize(b)
}

// CommandHash is the hex SHA-256 of the canonical command.
func CommandHash(cmd Command) (string, error) {
	b, err := CanonicalCommand(cmd)
	if err != nil {
		return "", err
	}
	return protocol.CommandHash(b)
}

func isNil(cmd Command) bool {
	if cmd == nil {
		return true
	}
	v := reflect.ValueOf(cmd)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// Trigger says on whose behalf a command runs; launched runs record it.
type Trigger string

// Triggers.
const (
	TriggerManual   Trigger = "manual"   // the cockpit, a person
	TriggerSchedule Trigger = "schedule" // the scheduler
	TriggerOperator Trigger = "operator" // a confirmed operator proposal
)

func validTrigger(t Trigger) bool {
	return t == TriggerManual || t == TriggerSchedule || t == TriggerOperator
}

func (t Trigger) actor() string {
	switch t {
	case TriggerOperator:
		return ActorOperator
	case TriggerSchedule:
		return ActorScheduler
	}
	return ActorCockpit
}

// ExecOptions tune Execute.
type ExecOptions struct {
	// Trigger defaults to manual.
	Trigger Trigger
	// ExpectedTarget, when set, is the target the command was proposed and
	// confirmed against (docs/design.md §9.2): a different id or version is
	// conflict, and the change applies only if the version still matches when
	// it commits.
	ExpectedTarget *protocol.ResourceVersion
	// Actor is the audit row's actor of a manual command: the principal
	// (name) it comes from, or a label of where it came from when no
	// principal is known (ActorCLI for the command line). "" is the
	// trigger's actor (studio_cockpit for manual). Never an authorization.
	Actor string
}

// Result is what a command did. Target names the resource it created or
// changed, at its new version (a launch or retry: the new run; a delete:
// the removed resource at its last version; maintenance: nil), and the
// matching field holds that resource's projection.
type Result struct {
	CommandType string                    `json:"commandType"`
	Summary     string                    `json:"summary"`
	Target      *protocol.ResourceVersion `json:"target"`
	Deleted     bool                      `json:"deleted,omitzero"`
	Playbook    *Playbook                 `json:"playbook,omitzero"`
	Workflow    *Workflow                 `json:"workflow,omitzero"`
	Run         *Run                      `json:"run,omitzero"`
	Runs        []Run                     `json:"runs,omitzero"` // launch_workflow: one per step
	Schedule    *Schedule                 `json:"schedule,omitzero"`
	Maintenance *MaintenanceResult        `json:"maintenance,omitzero"`
	Reconciled  *ReconcileResult          `json:"reconciled,omitzero"`
	// NoChange: the command found its target already as it asked (for
	// example a paused schedule asked to pause); nothing was written and
	// the version is unchanged. Message says so in words.
	NoChange bool   `json:"noChange,omitzero"`
	Message  string `json:"message,omitzero"`
}

// JSON encodes the result (for a proposal's result_json).
func (r Result) JSON() (jsontext.Value, error) {
	b, err := protocol.Marshal(r)
	return jsontext.Value(b), err
}

// execEnv is what Execute hands a command: the trigger, the resolved
// target, the version the change must find (0: none) and the audit row.
type execEnv struct {
	trigger  Trigger
	target   *protocol.ResourceVersion
	expected int64
	now      time.Time
	canon    jsontext.Value
	cmdType  string
	actor    string // "": the trigger's actor
}

// audit is the admin_events row that commits with the command's change.
// runIDs name the runs the command creates (details.run_ids), so a run
// finds the row that launched it.
func (e execEnv) audit(targetID string, runIDs ...string) *store.AppendAdminEventParams {
	// snake_case like the operator's details (docs/design.md §10): one
	// spelling in the audit trail.
	details := map[string]any{"command_type": e.cmdType, "command": e.canon, "trigger": string(e.trigger), "target": e.target}
	if len(runIDs) > 0 {
		details["run_ids"] = runIDs
	}
	b, err := protocol.Marshal(details)
	if err != nil {
		b = []byte(`{}`)
	}
	var tid *string
	if targetID != "" {
		tid = &targetID
	}
	actor := e.actor
	if actor == "" {
		actor = e.trigger.actor()
	}
	return &store.AppendAdminEventParams{Actor: actor, Action: ActionCommand, TargetID: tid, Details: b, Now: e.now}
}

// targetID is the resolved target's id ("" for commands without one).
func (e execEnv) targetID() string {
	if e.target == nil {
		return ""
	}
	return e.target.ID
}

// versioned commands carry their own optional expected version.
type versioned interface {
	expectedVersion() int64
}

// ResolveTarget validates cmd and names its target {kind, id, version} with
// the current version (a decimal string); nil for creates and maintenance.
// An unknown target is not_found.
func (s *Service) ResolveTarget(ctx context.Context, cmd Command) (*protocol.ResourceVersion, error) {
	if isNil(cmd) {
		return nil, protocol.Errorf(protocol.Validation, "no command")
	}
	if err := cmd.Validate(); err != nil {
		return nil, err
	}
	return cmd.resolve(ctx, s)
}

// Execute validates and applies cmd in one store transaction (with its
// audit row), re-checking the target: a version that changed since it was
// resolved, proposed or given in the command is conflict, with details
// expectedVersion and actualVersion. A command either applies whole or not
// at all.
func (s *Service) Execute(ctx context.Context, cmd Command, opts ExecOptions) (Result, error) {
	if isNil(cmd) {
		return Result{}, protocol.Errorf(protocol.Validation, "no command")
	}
	if err := cmd.Validate(); err != nil {
		return Result{}, err
	}
	trigger := opts.Trigger
	if trigger == "" {
		trigger = TriggerManual
	}
	if !validTrigger(trigger) {
		return Result{}, protocol.Errorf(protocol.Validation, "trigger %q is not manual, schedule or operator", trigger)
	}
	// A manual command is a person's (a principal's name, or where it came
	// from); it never passes for the daemon's own actors.
	if opts.Actor != "" && (trigger != TriggerManual ||
		(strings.HasPrefix(opts.Actor, "studio_") && opts.Actor != ActorCockpit && opts.Actor != ActorCLI)) {
		return Result{}, protocol.Errorf(protocol.Validation, "actor %q is not one a %s command can have", opts.Actor, trigger)
	}
	target, err := cmd.resolve(ctx, s)
	if err != nil {
		return Result{}, err
	}
	env := execEnv{trigger: trigger, target: target, now: s.now(), cmdType: TypeOf(cmd), actor: opts.Actor}
	if target != nil {
		current, err := strconv.ParseInt(target.Version, 10, 64)
		if err != nil {
			return Result{}, fmt.Errorf("target version %q: %w", target.Version, err)
		}
		env.expected = current // pin what was resolved: a concurrent change is conflict
		if err := versionHolds(cmd, target); err != nil {
			return Result{}, err
		}
		if et := opts.ExpectedTarget; et != nil {
			if et.Kind != target.Kind || et.ID != target.ID {
				return Result{}, protocol.Errorf(protocol.Conflict, "the command now targets %s %s, not the confirmed %s %s",
					target.Kind, target.ID, et.Kind, et.ID).With("expectedTarget", *et).With("actualTarget", *target)
			}
			want, err := strconv.ParseInt(et.Version, 10, 64)
			if err != nil {
				return Result{}, protocol.Errorf(protocol.Validation, "expected target version %q is not an integer", et.Version).
					With("field", "expectedTargetVersion")
			}
			if want != current {
				return Result{}, conflictVersion(target, want, current)
			}
		}
	} else if opts.ExpectedTarget != nil {
		return Result{}, protocol.Errorf(protocol.Conflict, "a %s command has no target to check", TypeOf(cmd)).
			With("expectedTarget", *opts.ExpectedTarget)
	}
	canon, err := CanonicalCommand(cmd)
	if err != nil {
		return Result{}, err
	}
	env.canon = canon
	res, err := cmd.execute(ctx, s, env)
	if err != nil {
		return Result{}, err
	}
	res.CommandType, res.Summary = TypeOf(cmd), cmd.Summary()
	return res, nil
}

func conflictVersion(t *protocol.ResourceVersion, expected, actual int64) error {
	return protocol.Errorf(protocol.Conflict, "%s %s is at version %d, not the expected %d", t.Kind, t.ID, actual, expected).
		With("kind", t.Kind).With("expectedVersion", expected).With("actualVersion", actual)
}

func resourceVersion(kind, id string, version int64) *protocol.ResourceVersion {
	return &protocol.ResourceVersion{Kind: kind, ID: id, Version: strconv.FormatInt(version, 10)}
}

// Prepared is a command ready to become an operator proposal
// (docs/design.md §9.3, steps 1 and 2): its canonical JSON and hash,
// summary, risk, impact and current target with its human name.
type Prepared struct {
	Type       string
	Risk       string
	Impact     Impact
	Canonical  jsontext.Value
	Hash       string
	Summary    string
	Target     *protocol.ResourceVersion
	TargetName string
	// Project is the project of the resource it changes or creates.
	Project string
}

// Prepare validates cmd as a full application command against the current
// state — its fields, its target (not_found when it does not exist) and what
// it refers to (an undeclared argument, an unknown playbook or conversation)
// — and returns what a proposal stores. A command that fails here could not
// run if a human confirmed it, so it never becomes a proposal; nor does one
// that would change nothing (conflict with details.noChange).
func (s *Service) Prepare(ctx context.Context, cmd Command) (Prepared, error) {
	target, err := s.ResolveTarget(ctx, cmd)
	if err != nil {
		return Prepared{}, err
	}
	if err := versionHolds(cmd, target); err != nil {
		return Prepared{}, err
	}
	if err := s.checkNameFree(ctx, cmd, target); err != nil {
		return Prepared{}, err
	}
	if c, ok := cmd.(checker); ok {
		if err := c.check(ctx, s); err != nil {
			return Prepared{}, err
		}
	}
	if n, ok := cmd.(noChanger); ok {
		why, err := n.unchanged(ctx, s)
		if err != nil {
			return Prepared{}, err
		}
		if why != "" {
			return Prepared{}, noChangeError(why)
		}
	}
	canon, err := CanonicalCommand(cmd)
	if err != nil {
		return Prepared{}, err
	}
	hash, err := protocol.CommandHash(canon)
	if err != nil {
		return Prepared{}, err
	}
	sp := SpecOf(cmd)
	name := s.TargetName(ctx, target)
	project := s.commandProject(ctx, cmd, target)
	return Prepared{Type: sp.Type, Risk: sp.Risk, Impact: ImpactOf(cmd), Canonical: canon, Hash: hash, Summary: summaryOf(cmd, target, name),
		Target: target, TargetName: name, Project: project}, nil
}

// namedSummarizer is a command whose summary reads better with its
// target's human name (a run's playbook and short id) than with the id it
// carries: the summary is what a person confirms.
type namedSummarizer interface {
	summaryNamed(targetName string) string
}

// summaryOf is cmd's summary, with its target's name when it has one: a
// command that refers to its target by id (as the cockpit's forms do) is
// summarized as one that names it, so the same change reads the same
// whoever asked for it.
func summaryOf(cmd Command, target *protocol.ResourceVersion, targetName string) string {
	if n, ok := cmd.(namedSummarizer); ok && targetName != "" {
		return n.summaryNamed(targetName)
	}
	s := cmd.Summary()
	if target != nil && targetName != "" && targetName != target.ID {
		s = strings.Replace(s, strconv.Quote(target.ID), strconv.Quote(targetName), 1)
	}
	return s
}
