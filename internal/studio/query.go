package studio

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/paging"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Page sizes of list queries.
const (
	DefaultPageSize = paging.DefaultLimit
	MaxPageSize     = paging.MaxLimit
)

// pageOf checks a list query's limit and cursor.
func pageOf(limit int, cur, list string) (int, paging.Cursor, error) {
	n, err := paging.Limit(limit)
	if err != nil {
		return 0, paging.Cursor{}, err
	}
	c, err := paging.Decode(cur, list)
	return n, c, err
}

func isUUID(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil && len(s) == 36
}

// lookupPlaybook finds a playbook by id or name. Names are never UUIDs, so
// a reference is unambiguous.
func (s *Service) lookupPlaybook(ctx context.Context, ref string) (store.Playbook, error) {
	if ref == "" {
		return store.Playbook{}, protocol.Errorf(protocol.Validation, "a playbook id or name is required").With("field", "playbook")
	}
	if isUUID(ref) {
		return s.store.GetPlaybook(ctx, ref)
	}
	return s.store.GetPlaybookByName(ctx, ref)
}

func (s *Service) lookupWorkflow(ctx context.Context, ref string) (store.Workflow, error) {
	if ref == "" {
		return store.Workflow{}, protocol.Errorf(protocol.Validation, "a workflow id or name is required").With("field", "workflow")
	}
	if isUUID(ref) {
		return s.store.GetWorkflow(ctx, ref)
	}
	return s.store.GetWorkflowByName(ctx, ref)
}

func (s *Service) lookupSchedule(ctx context.Context, ref string) (store.Schedule, error) {
	if ref == "" {
		return store.Schedule{}, protocol.Errorf(protocol.Validation, "a schedule id or name is required").With("field", "schedule")
	}
	if isUUID(ref) {
		return s.store.GetSchedule(ctx, ref)
	}
	return s.store.GetScheduleByName(ctx, ref)
}

func (s *Service) lookupRun(ctx context.Context, id string) (store.Run, error) {
	if !isUUID(id) {
		return store.Run{}, protocol.Errorf(protocol.NotFound, "run %s not found", id)
	}
	return s.store.GetRun(ctx, id)
}

// PlaybookQuery filters playbooks: Query matches name or description.
type PlaybookQuery struct {
	Query   string
	Project string
	Limit   int
	Cursor  string
}

// ListPlaybooks pages playbooks by name.
func (s *Service) ListPlaybooks(ctx context.Context, q PlaybookQuery) (PlaybookPage, error) {
	limit, c, err := pageOf(q.Limit, q.Cursor, "playbooks")
	if err != nil {
		return PlaybookPage{}, err
	}
	rows, err := s.store.ListPlaybooks(ctx, store.ListPlaybooksParams{Project: q.Project, Query: q.Query, AfterName: c.Name, Limit: limit + 1})
	if err != nil {
		return PlaybookPage{}, err
	}
	var page PlaybookPage
	page.Playbooks, page.NextCursor = paging.Cut(rows, limit, PlaybookView,
		func(p store.Playbook) paging.Cursor { return paging.Cursor{List: "playbooks", Name: p.Name} })
	return page, nil
}

// GetPlaybook returns a playbook by id or name.
func (s *Service) GetPlaybook(ctx context.Context, ref string) (Playbook, error) {
	p, err := s.lookupPlaybook(ctx, ref)
	if err != nil {
		return Playbook{}, err
	}
	return PlaybookView(p), nil
}

// WorkflowQuery filters workflows: Query matches name or description.
type WorkflowQuery struct {
	Query   string
	Project string
	Limit   int
	Cursor  string
}

// ListWorkflows pages workflows by name.
func (s *Service) ListWorkflows(ctx context.Context, q WorkflowQuery) (WorkflowPage, error) {
	limit, c, err := pageOf(q.Limit, q.Cursor, "workflows")
	if err != nil {
		return WorkflowPage{}, err
	}
	rows, err := s.store.ListWorkflows(ctx, store.ListWorkflowsParams{Project: q.Project, Query: q.Query, AfterName: c.Name, Limit: limit + 1})
	if err != nil {
		return WorkflowPage{}, err
	}
	var page WorkflowPage
	page.Workflows, page.NextCursor = paging.Cut(rows, limit, WorkflowView,
		func(w store.Workflow) paging.Cursor { return paging.Cursor{List: "workflows", Name: w.Name} })
	return page, nil
}

// GetWorkflow returns a workflow by id or name.
func (s *Service) GetWorkflow(ctx context.Context, ref string) (Workflow, error) {
	w, err := s.lookupWorkflow(ctx, ref)
	if err != nil {
		return Workflow{}, err
	}
	return WorkflowView(w), nil
}

// RunQuery filters runs. Playbook is an id, or a name as the run recorded
// it (so runs of a deleted playbook stay findable). Since and Until bound
// the creation time, [Since, Until).
type RunQuery struct {
	Status   string
	Playbook string
	Project  string
	Trigger  string
	Schedule string // schedule id
	Workflow string // workflow id: the runs of its launches
	Query    string // playbook name or input (substring), or run id prefix
	// Counts asks for the counts by status on the first page.
	Counts bool
	Since  *time.Time
	Until  *time.Time
	Limit  int
	Cursor string
}

// ListRuns pages runs newest first.
func (s *Service) ListRuns(ctx context.Context, q RunQuery) (RunPage, error) {
	limit, c, err := pageOf(q.Limit, q.Cursor, "runs")
	if err != nil {
		return RunPage{}, err
	}
	p := store.ListRunsParams{Status: store.RunStatus(q.Status), Project: q.Project, Trigger: store.RunTrigger(q.Trigger),
		ScheduleID: q.Schedule, WorkflowID: q.Workflow, Query: q.Query, Since: q.Since, Until: q.Until, Limit: limit + 1}
	if len(q.Query) > MaxQueryLength {
		return RunPage{}, protocol.Errorf(protocol.Validation, "q is at most %d bytes", MaxQueryLength).With("field", "q")
	}
	if q.Status != "" && !slices.Contains(store.RunStatuses, p.Status) {
		return RunPage{}, protocol.Errorf(protocol.Validation, "status must be one of queued, running, succeeded, failed, cancelled").With("field", "status")
	}
	if q.Trigger != "" && !validTrigger(Trigger(q.Trigger)) {
		return RunPage{}, protocol.Errorf(protocol.Validation, "trigger must be manual, schedule or operator").With("field", "trigger")
	}
	if q.Since != nil && q.Until != nil && !q.Until.After(*q.Since) {
		return RunPage{}, protocol.Errorf(protocol.Validation, "until must be after since").With("field", "until")
	}
	if q.Playbook != "" {
		if isUUID(q.Playbook) {
			p.PlaybookID = q.Playbook
		} else {
			pb, err := s.store.GetPlaybookByName(ctx, q.Playbook)
			switch {
			case err == nil:
				p.PlaybookID = pb.ID
			case protocol.IsCode(err, protocol.NotFound):
				return RunPage{Runs: []Run{}}, nil
			default:
				return RunPage{}, err
			}
		}
	}
	if q.Cursor != "" {
		t := protocol.Time(c.At)
		p.BeforeCreated, p.BeforeID = &t, c.ID
	}
	rows, err := s.store.ListRuns(ctx, p)
	if err != nil {
		return RunPage{}, err
	}
	var page RunPage
	page.Runs, page.NextCursor = paging.Cut(rows, limit, RunView,
		func(r store.Run) paging.Cursor { return paging.Cursor{List: "runs", At: stamp(r.CreatedAt), ID: r.ID} })
	if q.Counts && q.Cursor == "" && q.Schedule == "" && q.Workflow == "" && q.Project == "" {
		if page.Counts, page.Total, err = s.runCounts(ctx, p); err != nil {
			return RunPage{}, err
		}
	}
	return page, nil
}

// runCounts counts by status the runs the list's other filters match.
func (s *Service) runCounts(ctx context.Context, p store.ListRunsParams) (map[string]int64, *int64, error) {
	sp := store.RunStatsParams{Since: time.Unix(0, 0), Until: s.now().Add(time.Hour), PlaybookID: p.PlaybookID, Trigger: p.Trigger, Query: p.Query}
	if p.Since != nil {
		sp.Since = *p.Since
	}
	if p.Until != nil {
		sp.Until = *p.Until
	}
	st, err := s.store.RunStats(ctx, sp)
	if err != nil {
		return nil, nil, err
	}
	counts := map[string]int64{}
	for k, v := range st.Counts {
		counts[string(k)] = v
	}
	return counts, &st.Total, nil
}

// GetRun returns one run by its id, or by a unique prefix of it (the
// short id the lists and the command line show).
func (s *Service) GetRun(ctx context.Context, id string) (Run, error) {
	if !isUUID(id) && runPrefix.MatchString(id) {
		return s.runByPrefix(ctx, strings.ToLower(id))
	}
	r, err := s.lookupRun(ctx, id)
	if err != nil {
		return Run{}, err
	}
	return RunView(r), nil
}

// runPrefix is a short run id: the first characters of a UUID, at least
// four (the lists and the command line show eight).
var runPrefix = regexp.MustCompile(`^[0-9a-fA-F-]{4,35}$`)

// runByPrefix finds the one run whose id starts with prefix. None is
// not_found; more than one is a validation error that names them, so a
// link never opens a run other than the one it meant.
func (s *Service) runByPrefix(ctx context.Context, prefix string) (Run, error) {
	rows, err := s.store.ListRuns(ctx, store.ListRunsParams{IDPrefix: prefix, Limit: 6})
	if err != nil {
		return Run{}, err
	}
	switch len(rows) {
	case 0:
		return Run{}, protocol.Errorf(protocol.NotFound, "run %s not found", prefix)
	case 1:
		return RunView(rows[0]), nil
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	more := ""
	if len(rows) > 5 {
		ids, more = ids[:5], " or more"
	}
	return Run{}, protocol.Errorf(protocol.Validation, "run id %s is ambiguous: %d%s runs start with it; give more of the id", prefix, len(ids), more).
		With("field", "id").With("reason", "ambiguous").With("matches", ids)
}

// RunStatsWindows are the windows RunStats accepts.
var RunStatsWindows = map[string]time.Duration{"24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour}

// RunStats counts the runs created in the last 24h or 7d by status, with
// the median duration of those that ran.
func (s *Service) RunStats(ctx context.Context, window string) (RunStats, error) {
	if window == "" {
		window = "24h"
	}
	d, ok := RunStatsWindows[window]
	if !ok {
		return RunStats{}, protocol.Errorf(protocol.Validation, "window must be 24h or 7d").With("field", "window")
	}
	until := s.now()
	since := until.Add(-d)
	// Until is exclusive: a run created this very instant is counted.
	st, err := s.store.RunStats(ctx, store.RunStatsParams{Since: since, Until: until.Add(time.Microsecond)})
	if err != nil {
		return RunStats{}, err
	}
	out := RunStats{Window: window, Since: stamp(since), Until: stamp(until), Total: st.Total, Counts: map[string]int64{}}
	for k, v := range st.Counts {
		out.Counts[string(k)] = v
	}
	if st.MedianDuration != nil {
		ms := st.MedianDuration.Milliseconds()
		out.MedianDurationMs = &ms
	}
	return out, nil
}

// ScheduleQuery filters schedules. Playbook is an id or name.
type ScheduleQuery struct {
	Enabled  *bool
	Playbook string
	Query    string
	Limit    int
	Cursor   string
}

// ListSchedules pages schedules by name.
func (s *Service) ListSchedules(ctx context.Context, q ScheduleQuery) (SchedulePage, error) {
	limit, c, err := pageOf(q.Limit, q.Cursor, "schedules")
	if err != nil {
		return SchedulePage{}, err
	}
	p := store.ListSchedulesParams{Enabled: q.Enabled, Query: q.Query, AfterName: c.Name, Limit: limit + 1}
	if q.Playbook != "" {
		pb, err := s.lookupPlaybook(ctx, q.Playbook)
		if protocol.IsCode(err, protocol.NotFound) {
			return SchedulePage{Schedules: []Schedule{}}, nil
		}
		if err != nil {
			return SchedulePage{}, err
		}
		p.PlaybookID = pb.ID
	}
	rows, err := s.store.ListSchedules(ctx, p)
	if err != nil {
		return SchedulePage{}, err
	}
	var page SchedulePage
	page.Schedules, page.NextCursor = paging.Cut(rows, limit, ScheduleView,
		func(sc store.Schedule) paging.Cursor { return paging.Cursor{List: "schedules", Name: sc.Name} })
	return page, nil
}

// GetSchedule returns a schedule by id or name.
func (s *Service) GetSchedule(ctx context.Context, ref string) (Schedule, error) {
	sc, err := s.lookupSchedule(ctx, ref)
	if err != nil {
		return Schedule{}, err
	}
	return ScheduleView(sc), nil
}

// AuditActors lists who appears in the audit trail (principals by name,
// the daemon's own actors by their ids), by name: what the trail can be
// filtered by.
func (s *Service) AuditActors(ctx context.Context) ([]string, error) {
	return s.store.ListAuditActors(ctx, MaxPageSize)
}

// AuditQuery filters the audit trail.
type AuditQuery struct {
	Action   string
	TargetID string
	// Actor, CommandType and Target (a resource's or proposal's id, in the
	// row or named by its details) narrow it further; Since and Until bound
	// the time, [Since, Until).
	Actor       string
	CommandType string
	Target      string
	Since       *time.Time
	Until       *time.Time
	Limit       int
	Cursor      string
}

// ListAudit pages the audit trail (admin_events) newest first.
func (s *Service) ListAudit(ctx context.Context, q AuditQuery) (AuditPage, error) {
	limit, c, err := pageOf(q.Limit, q.Cursor, "audit")
	if err != nil {
		return AuditPage{}, err
	}
	if q.CommandType != "" {
		if _, ok := LookupCommand(q.CommandType); !ok {
			return AuditPage{}, protocol.Errorf(protocol.Validation, "unknown command type %q", q.CommandType).
				With("field", "action").With("commandTypes", CommandTypes())
		}
	}
	if q.Since != nil && q.Until != nil && !q.Until.After(*q.Since) {
		return AuditPage{}, protocol.Errorf(protocol.Validation, "until must be after since").With("field", "until")
	}
	rows, err := s.store.ListAdminEvents(ctx, store.ListAdminEventsParams{Action: q.Action, TargetID: q.TargetID,
		Actor: q.Actor, CommandType: q.CommandType, Target: q.Target, Since: q.Since, Until: q.Until, BeforeID: c.Seq, Limit: limit + 1})
	if err != nil {
		return AuditPage{}, err
	}
	var page AuditPage
	kept, next := paging.Cut(rows, limit, func(e store.AdminEvent) store.AdminEvent { return e },
		func(e store.AdminEvent) paging.Cursor { return paging.Cursor{List: "audit", Seq: e.ID} })
	// Each row is the policy's to show (visibility.go): a page may come
	// out shorter than limit; its cursor still leads on.
	page.Events, page.NextCursor = make([]AuditEvent, 0, len(kept)), next
	for _, e := range kept {
		if e, ok := s.visibleEvent(ctx, e); ok {
			page.Events = append(page.Events, AuditView(e))
		}
	}
	return page, nil
}
