package studio

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/robfig/cron/v3"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// cronParser reads the standard five fields (minute hour day-of-month month
// day-of-week) and nothing else: no seconds, no descriptors, no time zone.
// Schedules run in UTC.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// maxSlotWalk bounds how many missed slots one firing counts one by one (a
// minutely schedule down for ten weeks); beyond it the count is a floor.
const maxSlotWalk = 100_000

// NormalizeCron is expr with its fields separated by single spaces.
func NormalizeCron(expr string) string { return strings.Join(strings.Fields(expr), " ") }

// ParseCron validates a 5-field cron expression.
func ParseCron(expr string) (cron.Schedule, error) {
	fields := strings.Fields(expr)
	if len(expr) > MaxCronLen {
		return nil, invalid("cron", "cron expression is longer than %d characters", MaxCronLen)
	}
	if len(fields) != 5 {
		return nil, invalid("cron", "cron expression %q must have 5 fields: minute hour day-of-month month day-of-week", expr)
	}
	sched, err := cronParser.Parse(strings.Join(fields, " "))
	if err != nil {
		return nil, invalid("cron", "cron expression %q is not valid: %v", expr, err)
	}
	// A date that never comes (30 February) makes a schedule that never fires.
	if sched.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, invalid("cron", "cron expression %q never fires", expr)
	}
	return sched, nil
}

// MaxPreview bounds CronPreview's count.
const MaxPreview = 20

// CronPreview returns the next count run times (UTC) of a cron expression,
// from now: what the cockpit shows while a schedule is edited.
func (s *Service) CronPreview(expr string, count int) (CronPreview, error) {
	if count == 0 {
		count = 5
	}
	if count < 1 || count > MaxPreview {
		return CronPreview{}, invalid("count", "count must be from 1 to %d", MaxPreview)
	}
	sched, err := ParseCron(expr)
	if err != nil {
		return CronPreview{}, err
	}
	out := CronPreview{Cron: NormalizeCron(expr), Next: make([]float64, 0, count)}
	t := s.now()
	for range count {
		t = sched.Next(t)
		if t.IsZero() {
			break
		}
		out.Next = append(out.Next, stamp(t))
	}
	return out, nil
}

// TickResult is what one scheduler pass did.
type TickResult struct {
	Launched []Run
	// Skipped counts the slots found missed (all schedules).
	Skipped int64
	// Lost counts schedules another scheduler handled first.
	Lost int
}

// Tick launches every due schedule once: the latest due slot of a schedule
// runs if it is no older than the missed-run grace; older slots were missed
// while the daemon was down and are skipped and recorded (on the schedule
// and as a studio.schedule.skipped audit row). Each schedule is claimed in
// the database, so schedulers racing over one store launch a slot once.
func (s *Service) Tick(ctx context.Context) (TickResult, error) {
	var res TickResult
	now := s.now()
	due, err := s.store.DueSchedules(ctx, store.DueSchedulesParams{Now: now, Limit: 100})
	if err != nil {
		return res, err
	}
	var errs []error
	for _, sc := range due {
		run, skipped, err := s.fire(ctx, sc, now)
		switch {
		case protocol.IsCode(err, protocol.Conflict), protocol.IsCode(err, protocol.NotFound):
			res.Lost++ // handled, changed or deleted meanwhile: the next pass sees it as it is
		case err != nil:
			errs = append(errs, err)
		default:
			res.Skipped += skipped
			if run != nil {
				res.Launched = append(res.Launched, RunView(*run))
			}
		}
	}
	return res, errors.Join(errs...)
}

// fire handles the due slots of one schedule.
func (s *Service) fire(ctx context.Context, sc store.Schedule, now time.Time) (*store.Run, int64, error) {
	if sc.NextRunAt == nil {
		return nil, 0, nil
	}
	sched, err := ParseCron(sc.Cron)
	if err != nil {
		return nil, 0, err
	}
	// Walk the due slots: dueAt, ..., last <= now.
	dueAt := *sc.NextRunAt
	last, prev := dueAt, time.Time{}
	count := int64(1)
	next := sched.Next(dueAt)
	capped := false
	for !next.After(now) {
		if count >= maxSlotWalk {
			capped = true
			next = sched.Next(now)
			break
		}
		prev, last = last, next
		count++
		next = sched.Next(next)
	}
	p := store.FireScheduleParams{ScheduleID: sc.ID, DueAt: dueAt, NextRunAt: next, Now: now}
	reason := "missed: the scheduler was not running at that time"
	launch := !capped && now.Sub(last) <= s.cfg.MissedGrace
	if launch {
		pb, err := s.store.GetPlaybook(ctx, sc.PlaybookID)
		if err != nil {
			return nil, 0, err
		}
		args, err := bindArgs("args", pb, sc.Args, false)
		if err != nil {
			launch, reason = false, "the schedule's arguments no longer match the playbook: "+protocol.ErrorOf(err).Message
		} else {
			scheduleID := sc.ID
			p.Launch = &store.CreateRunParams{ID: uuid.NewString(), Project: sc.Project, PlaybookID: pb.ID,
				ExpectedPlaybookVersion: pb.Version, Input: sc.Input, Args: args, Trigger: store.TriggerSchedule,
				ScheduleID: &scheduleID, Now: now}
			p.LaunchedFor = last
		}
	}
	if launch {
		p.Skipped = count - 1
		p.SkippedFrom, p.SkippedTo = dueAt, prev
	} else {
		p.Skipped = count
		p.SkippedFrom, p.SkippedTo = dueAt, last
	}
	if p.Skipped > 0 {
		details, err := protocol.Marshal(map[string]any{
			"schedule_id": sc.ID, "schedule": sc.Name, "skipped": p.Skipped, "count_is_floor": capped,
			"from": stamp(p.SkippedFrom), "to": stamp(p.SkippedTo), "reason": reason,
		})
		if err != nil {
			return nil, 0, err
		}
		id := sc.ID
		p.SkipEvent = &store.AppendAdminEventParams{Actor: ActorScheduler, Action: ActionScheduleSkipped, TargetID: &id,
			Details: details, Now: now}
	}
	fired, err := s.store.FireSchedule(ctx, p)
	if err != nil {
		return nil, 0, err
	}
	if p.Skipped > 0 {
		s.log.Warn("schedule slots skipped", "schedule", sc.Name, "skipped", p.Skipped, "reason", reason)
	}
	lag := time.Duration(-1) // no launch
	if fired.Run != nil {
		s.runQueued(fired.Run.ID)
		lag = now.Sub(last)
	}
	s.cfg.Observer.ScheduleFired(lag, p.Skipped)
	return fired.Run, p.Skipped, nil
}

// schedulerLoop ticks every SchedulerInterval until Stop.
func (s *Service) schedulerLoop() {
	defer s.wg.Done()
	t := time.NewTimer(0) // a first pass at start catches up on (skips) missed slots
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(s.base, time.Minute)
		res, err := s.Tick(ctx)
		cancel()
		if err != nil && !s.stopping() {
			s.log.Error("scheduler pass", "err", err)
		}
		for _, r := range res.Launched {
			s.log.Info("schedule launched run", "run", r.ID, "playbook", r.PlaybookName, "schedule", deref(r.ScheduleID))
		}
		t.Reset(s.cfg.SchedulerInterval)
	}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
