package studio

import (
	"context"
	"fmt"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Starter content: a new installation's cockpit and operator get a few
// useful playbooks and one paused schedule to work with.

func strPtr(s string) *string { return &s }

// StarterPlaybooks are created on first start with an empty database.
var StarterPlaybooks = []CreatePlaybookCommand{
	{
		Name:        "audit-repo",
		Description: "Review a repository for security, testing and documentation gaps and list the findings by severity.",
		Prompt: "Audit the repository {{repo}}. Focus on: {{focus}}.\n\n" +
			"List concrete findings, most severe first. For each give the area, what is wrong, why it matters and a suggested fix. " +
			"End with the three changes that would help most. Say plainly when the information given is not enough to judge.\n\n" +
			"Notes from the requester:\n{{input}}",
		Args: []PlaybookArg{
			{Name: "repo", Description: "The repository to audit (a name or URL).", Required: true},
			{Name: "focus", Description: "What to look at.", Default: strPtr("security, tests, documentation")},
		},
	},
	{
		Name:        "summarize-failed-runs",
		Description: "Summarise failed runs (their errors and output) into causes, affected playbooks and next steps.",
		Prompt: "Below are the failed Studio runs of the last {{window}}: for each, its playbook, error and the end of its output.\n\n" +
			"Group them by likely cause. For each group say which playbooks it hit, how many runs, the probable root cause, " +
			"and the next step to fix it. Keep it short; a reader should know what to do first.\n\n{{input}}",
		Args: []PlaybookArg{
			{Name: "window", Description: "The period the failures come from.", Default: strPtr("24 hours")},
		},
	},
	{
		Name:        "write-release-notes",
		Description: "Turn a list of changes into release notes for a given audience.",
		Prompt: "Write the release notes of version {{version}} for {{audience}} from the changes below.\n\n" +
			"Group them under Highlights, Improvements, Fixes and Breaking changes (omit empty groups). " +
			"Use plain language, one line per change, and call out anything a user must do when upgrading.\n\n" +
			"Changes:\n{{input}}",
		Args: []PlaybookArg{
			{Name: "version", Description: "The version being released.", Required: true},
			{Name: "audience", Description: "Who reads the notes.", Default: strPtr("users")},
		},
	},
}

// StarterSchedules are created paused beside the starter playbooks.
var StarterSchedules = []CreateScheduleCommand{
	{
		Name: "nightly-audit", Cron: "0 2 * * *", Playbook: "audit-repo",
		Input: "Nightly audit: compare with the previous night and point out what changed.",
		Args:  map[string]string{"repo": "main"}, Enabled: func() *bool { f := false; return &f }(),
	},
}

// Seed creates the starter content on first start: once per database (an
// audit row records it) and only when it holds no playbooks other than the
// starters (a partial seed is completed). It reports whether it created
// anything.
func (s *Service) Seed(ctx context.Context) (bool, error) {
	done, err := s.store.ListAdminEvents(ctx, store.ListAdminEventsParams{Action: ActionSeeded, Limit: 1})
	if err != nil {
		return false, err
	}
	if len(done) > 0 {
		return false, nil
	}
	existing, err := s.store.ListPlaybooks(ctx, store.ListPlaybooksParams{Limit: len(StarterPlaybooks) + 1})
	if err != nil {
		return false, err
	}
	starter := map[string]bool{}
	for _, c := range StarterPlaybooks {
		starter[c.Name] = true
	}
	fresh := true
	for _, p := range existing {
		if !starter[p.Name] {
			fresh = false
		}
	}
	created := false
	if fresh {
		var cmds []Command
		for _, c := range StarterPlaybooks {
			cmds = append(cmds, c)
		}
		for _, c := range StarterSchedules {
			cmds = append(cmds, c)
		}
		for _, cmd := range cmds {
			_, err := s.seedOne(ctx, cmd)
			if protocol.IsCode(err, protocol.Conflict) {
				continue // there from a seed that stopped half-way
			}
			if err != nil {
				return created, fmt.Errorf("seed %s: %w", cmd.Summary(), err)
			}
			created = true
		}
	}
	details, _ := protocol.Marshal(map[string]any{"created": created})
	if _, err := s.store.AppendAdminEvent(ctx, store.AppendAdminEventParams{Actor: ActorSystem, Action: ActionSeeded,
		Details: details, Now: s.now()}); err != nil {
		return created, err
	}
	return created, nil
}

func (s *Service) seedOne(ctx context.Context, cmd Command) (Result, error) {
	if err := cmd.Validate(); err != nil {
		return Result{}, err
	}
	canon, err := CanonicalCommand(cmd)
	if err != nil {
		return Result{}, err
	}
	env := execEnv{trigger: TriggerManual, actor: ActorSystem, now: s.now(), canon: canon, cmdType: TypeOf(cmd)}
	res, err := cmd.execute(ctx, s, env)
	return res, err
}
