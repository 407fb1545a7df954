package studio

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// CreateScheduleCommand is create_schedule.
type CreateScheduleCommand struct {
	Name     string            `json:"name" jsonschema:"minLength=1,maxLength=64,pattern=^[a-z0-9][a-z0-9._-]*$" jsonschema_description:"Unique schedule name: lowercase letters, digits, '-', '_' or '.' (for example nightly-audit)."`
	Cron     string            `json:"cron" jsonschema:"minLength=9,maxLength=100" jsonschema_description:"Standard 5-field cron expression in UTC: minute hour day-of-month month day-of-week (for example \"0 2 * * *\" is every day at 02:00)."`
	Playbook string            `json:"playbook" jsonschema:"minLength=1" jsonschema_description:"The playbook to launch: its name or id."`
	Input    string            `json:"input,omitempty" jsonschema:"maxLength=32768" jsonschema_description:"Input of every launched run."`
	Args     map[string]string `json:"args,omitempty" jsonschema_description:"Arguments of every launched run; only arguments the playbook declares."`
	Enabled  *bool             `json:"enabled,omitzero" jsonschema_description:"Whether the schedule starts enabled; default true."`
	Project  string            `json:"project,omitempty" jsonschema:"maxLength=64" jsonschema_description:"Project the schedule belongs to; default the playbook's."`
}

// Validate implements Command.
func (c CreateScheduleCommand) Validate() error {
	if err := checkName("name", c.Name); err != nil {
		return err
	}
	if _, err := ParseCron(c.Cron); err != nil {
		return err
	}
	if err := CheckRef("playbook", c.Playbook, true); err != nil {
		return err
	}
	if err := CheckText("input", c.Input, MaxInputLen, false); err != nil {
		return err
	}
	if err := checkArgValues("args", c.Args); err != nil {
		return err
	}
	return checkProject(c.Project)
}

func (c CreateScheduleCommand) enabled() bool { return c.Enabled == nil || *c.Enabled }

// Summary implements Command.
func (c CreateScheduleCommand) Summary() string {
	s := fmt.Sprintf("Create schedule %q launching playbook %q at %q (UTC)", c.Name, c.Playbook, NormalizeCron(c.Cron))
	if c.Input != "" {
		s += " with input " + quote(c.Input)
	}
	if len(c.Args) > 0 {
		s += " and args " + argsPhrase(c.Args)
	}
	if !c.enabled() {
		s += ", paused"
	}
	return s
}

func (CreateScheduleCommand) resolve(context.Context, *Service) (*protocol.ResourceVersion, error) {
	return nil, nil
}

// check refuses an unknown playbook and arguments it does not declare.
func (c CreateScheduleCommand) check(ctx context.Context, s *Service) error {
	_, _, err := s.bindPlaybookArgs(ctx, c.Playbook, c.Args)
	return err
}

func (c CreateScheduleCommand) execute(ctx context.Context, s *Service, env execEnv) (Result, error) {
	pb, args, err := s.bindPlaybookArgs(ctx, c.Playbook, c.Args)
	if err != nil {
		return Result{}, err
	}
	expr := NormalizeCron(c.Cron)
	var next *time.Time
	if c.enabled() {
		if next, err = nextRun(expr, env.now); err != nil {
			return Result{}, err
		}
	}
	project := c.Project
	if project == "" {
		project = pb.Project
	}
	id := uuid.NewString()
	sc, err := s.store.CreateSchedule(ctx, store.CreateScheduleParams{ID: id, Project: project, Name: c.Name, Cron: expr,
		PlaybookID: pb.ID, Input: c.Input, Args: args, Enabled: c.enabled(), NextRunAt: next, Now: env.now, Audit: env.audit(id)})
	if err != nil {
		return Result{}, err
	}
	v := ScheduleView(sc)
	return Result{Target: resourceVersion(store.KindSchedule, sc.ID, sc.Version), Schedule: &v}, nil
}

// nextRun is the first slot of expr after now.
func nextRun(expr string, now time.Time) (*time.Time, error) {
	sched, err := ParseCron(expr)
	if err != nil {
		return nil, err
	}
	t := sched.Next(now.UTC())
	return &t, nil
}

// UpdateScheduleCommand is update_schedule: only the fields given change.
type UpdateScheduleCommand struct {
	Schedule        string             `json:"schedule" jsonschema:"minLength=1" jsonschema_description:"The schedule to change: its name or id."`
	ExpectedVersion int64              `json:"expectedVersion" jsonschema:"minimum=1" jsonschema_description:"The schedule's version as last read; the update is refused if it changed since."`
	Name            *string            `json:"name,omitzero" jsonschema:"minLength=1,maxLength=64,pattern=^[a-z0-9][a-z0-9._-]*$" jsonschema_description:"New unique name."`
	Cron            *string            `json:"cron,omitzero" jsonschema:"minLength=9,maxLength=100" jsonschema_description:"New 5-field cron expression (UTC)."`
	Playbook        *string            `json:"playbook,omitzero" jsonschema:"minLength=1" jsonschema_description:"New playbook: its name or id."`
	Input           *string            `json:"input,omitzero" jsonschema:"maxLength=32768" jsonschema_description:"New input of launched runs."`
	Args            *map[string]string `json:"args,omitzero" jsonschema_description:"New arguments of launched runs; they replace the old ones."`
}

func (c UpdateScheduleCommand) expectedVersion() int64 { return c.ExpectedVersion }

// Validate implements Command.
func (c UpdateScheduleCommand) Validate() error {
	if err := CheckRef("schedule", c.Schedule, true); err != nil {
		return err
	}
	if err := checkExpectedVersion(c.ExpectedVersion, true); err != nil {
		return err
	}
	if c.Name == nil && c.Cron == nil && c.Playbook == nil && c.Input == nil && c.Args == nil {
		return invalid("schedule", "nothing to change: give name, cron, playbook, input or args")
	}
	if c.Name != nil {
		if err := checkName("name", *c.Name); err != nil {
			return err
		}
	}
	if c.Cron != nil {
		if _, err := ParseCron(*c.Cron); err != nil {
			return err
		}
	}
	if c.Playbook != nil {
		if err := CheckRef("playbook", *c.Playbook, true); err != nil {
			return err
		}
	}
	if c.Input != nil {
		if err := CheckText("input", *c.Input, MaxInputLen, false); err != nil {
			return err
		}
	}
	if c.Args != nil {
		return checkArgValues("args", *c.Args)
	}
	return nil
}

// Summary implements Command.
func (c UpdateScheduleCommand) Summary() string {
	var parts []string
	if c.Name != nil {
		parts = append(parts, fmt.Sprintf("rename to %q", *c.Name))
	}
	if c.Cron != nil {
		parts = append(parts, fmt.Sprintf("cron %q (UTC)", NormalizeCron(*c.Cron)))
	}
	if c.Playbook != nil {
		parts = append(parts, fmt.Sprintf("playbook %q", *c.Playbook))
	}
	if c.Input != nil {
		parts = append(parts, "input "+quote(*c.Input))
	}
	if c.Args != nil {
		parts = append(parts, "args "+argsPhrase(*c.Args))
	}
	return fmt.Sprintf("Update schedule %q (%s) from version %d", c.Schedule, strings.Join(parts, ", "), c.ExpectedVersion)
}

func (c UpdateScheduleCommand) resolve(ctx context.Context, s *Service) (*protocol.ResourceVersion, error) {
	sc, err := s.lookupSchedule(ctx, c.Schedule)
	if err != nil {
		return nil, err
	}
	return resourceVersion(store.KindSchedule, sc.ID, sc.Version), nil
}

// check refuses a new playbook or arguments that do not bind.
func (c UpdateScheduleCommand) check(ctx context.Context, s *Service) error {
	if c.Playbook == nil && c.Args == nil {
		return nil
	}
	cur, err := s.lookupSchedule(ctx, c.Schedule)
	if err != nil {
		return err
	}
	_, _, err = c.bind(ctx, s, cur)
	return err
}

// bind binds the schedule's playbook and arguments as the update leaves them.
func (c UpdateScheduleCommand) bind(ctx context.Context, s *Service, cur store.Schedule) (store.Playbook, map[string]string, error) {
	ref, given := cur.PlaybookID, cur.Args
	if c.Playbook != nil {
		ref = *c.Playbook
	}
	if c.Args != nil {
		given = *c.Args
	}
	return s.bindPlaybookArgs(ctx, ref, given)
}

func (c UpdateScheduleCommand) execute(ctx context.Context, s *Service, env execEnv) (Result, error) {
	cur, err := s.store.GetSchedule(ctx, env.targetID())
	if err != nil {
		return Result{}, err
	}
	if cur.Version != env.expected {
		return Result{}, conflictVersion(env.target, env.expected, cur.Version)
	}
	p := store.UpdateScheduleParams{ID: cur.ID, ExpectedVersion: cur.Version, Name: c.Name, Input: c.Input,
		Now: env.now, Audit: env.audit(cur.ID)}
	if c.Playbook != nil || c.Args != nil {
		pb, args, err := c.bind(ctx, s, cur)
		if err != nil {
			return Result{}, err
		}
		p.PlaybookID, p.Args = &pb.ID, &args
	}
	if c.Cron != nil {
		expr := NormalizeCron(*c.Cron)
		p.Cron = &expr
		if cur.Enabled {
			next, err := nextRun(expr, env.now)
			if err != nil {
				return Result{}, err
			}
			p.SetNextRunAt, p.NextRunAt = true, next
		}
	}
	sc, err := s.store.UpdateSchedule(ctx, p)
	if err != nil {
		return Result{}, err
	}
	v := ScheduleView(sc)
	return Result{Target: resourceVersion(store.KindSchedule, sc.ID, sc.Version), Schedule: &v}, nil
}

// SetScheduleEnabledCommand is set_schedule_enabled: enable or pause.
type SetScheduleEnabledCommand struct {
	Schedule        string `json:"schedule" jsonschema:"minLength=1" jsonschema_description:"The schedule: its name (for example nightly-audit) or id."`
	Enabled         *bool  `json:"enabled" jsonschema_description:"true enables the schedule; false pauses it."`
	ExpectedVersion int64  `json:"expectedVersion,omitzero" jsonschema:"minimum=1" jsonschema_description:"Optional: the schedule's version as last read."`
}

func (c SetScheduleEnabledCommand) expectedVersion() int64 { return c.ExpectedVersion }

// Validate implements Command.
func (c SetScheduleEnabledCommand) Validate() error {
	if err := CheckRef("schedule", c.Schedule, true); err != nil {
		return err
	}
	if c.Enabled == nil {
		return invalid("enabled", "enabled (true or false) is required")
	}
	return checkExpectedVersion(c.ExpectedVersion, false)
}

// Summary implements Command.
func (c SetScheduleEnabledCommand) Summary() string {
	if c.Enabled != nil && *c.Enabled {
		return fmt.Sprintf("Enable schedule %q", c.Schedule)
	}
	return fmt.Sprintf("Pause schedule %q", c.Schedule)
}

func (c SetScheduleEnabledCommand) resolve(ctx context.Context, s *Service) (*protocol.ResourceVersion, error) {
	return UpdateScheduleCommand{Schedule: c.Schedule}.resolve(ctx, s)
}

// unchanged refuses to propose pausing a paused schedule or enabling an
// enabled one.
func (c SetScheduleEnabledCommand) unchanged(ctx context.Context, s *Service) (string, error) {
	cur, err := s.lookupSchedule(ctx, c.Schedule)
	if err != nil {
		return "", err
	}
	return c.unchangedBy(cur), nil
}

func (c SetScheduleEnabledCommand) unchangedBy(cur store.Schedule) string {
	if cur.Enabled != *c.Enabled {
		return ""
	}
	if cur.Enabled {
		return fmt.Sprintf("schedule %q is already enabled", cur.Name)
	}
	return fmt.Sprintf("schedule %q is already paused", cur.Name)
}

func (c SetScheduleEnabledCommand) execute(ctx context.Context, s *Service, env execEnv) (Result, error) {
	cur, err := s.store.GetSchedule(ctx, env.targetID())
	if err != nil {
		return Result{}, err
	}
	if cur.Version != env.expected {
		return Result{}, conflictVersion(env.target, env.expected, cur.Version)
	}
	if why := c.unchangedBy(cur); why != "" { // already so: nothing changes, nothing to audit
		v := ScheduleView(cur)
		res := noChangeResult(resourceVersion(store.KindSchedule, cur.ID, cur.Version), why)
		res.Schedule = &v
		return res, nil
	}
	p := store.UpdateScheduleParams{ID: cur.ID, ExpectedVersion: cur.Version, Enabled: c.Enabled, SetNextRunAt: true,
		Now: env.now, Audit: env.audit(cur.ID)}
	if *c.Enabled {
		// Slots while paused are not missed runs: the next run is after now.
		if p.NextRunAt, err = nextRun(cur.Cron, env.now); err != nil {
			return Result{}, err
		}
	}
	sc, err := s.store.UpdateSchedule(ctx, p)
	if err != nil {
		return Result{}, err
	}
	v := ScheduleView(sc)
	return Result{Target: resourceVersion(store.KindSchedule, sc.ID, sc.Version), Schedule: &v}, nil
}

// DeleteScheduleCommand is delete_schedule.
type DeleteScheduleCommand struct {
	Schedule        string `json:"schedule" jsonschema:"minLength=1" jsonschema_description:"The schedule to delete: its name or id."`
	ExpectedVersion int64  `json:"expectedVersion,omitzero" jsonschema:"minimum=1" jsonschema_description:"Optional: the schedule's version as last read."`
}

func (c DeleteScheduleCommand) expectedVersion() int64 { return c.ExpectedVersion }

// Validate implements Command.
func (c DeleteScheduleCommand) Validate() error {
	if err := CheckRef("schedule", c.Schedule, true); err != nil {
		return err
	}
	return checkExpectedVersion(c.ExpectedVersion, false)
}

// Summary implements Command.
func (c DeleteScheduleCommand) Summary() string { return fmt.Sprintf("Delete schedule %q", c.Schedule) }

func (c DeleteScheduleCommand) resolve(ctx context.Context, s *Service) (*protocol.ResourceVersion, error) {
	return UpdateScheduleCommand{Schedule: c.Schedule}.resolve(ctx, s)
}

func (c DeleteScheduleCommand) execute(ctx context.Context, s *Service, env execEnv) (Result, error) {
	sc, err := s.store.DeleteSchedule(ctx, store.DeleteScheduleParams{ID: env.targetID(), ExpectedVersion: env.expected,
		Audit: env.audit(env.targetID())})
	if err != nil {
		return Result{}, err
	}
	v := ScheduleView(sc)
	return Result{Target: resourceVersion(store.KindSchedule, sc.ID, sc.Version), Deleted: true, Schedule: &v}, nil
}
