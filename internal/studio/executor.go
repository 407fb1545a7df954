package studio

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/redact"
	"github.com/studio/operator/internal/store"
)

// The run executor: Workers goroutines claim queued runs from the store
// (oldest first; a claim is a compare-and-set that passes over rows another
// claimer holds, so two executors never run the same run) and execute each
// as a one-shot completion of the configured model provider. A launch wakes
// them — in every daemon sharing the database, through the store's control
// notifications; there, idle workers also look again every ClaimInterval,
// since a notification may be lost.

// runQueued wakes the workers after a run was queued.
func (s *Service) runQueued(id string) {
	s.queued.Notify(queuedKey)
	s.changed.Notify(id)
}

// runChanged wakes WaitRun callers of run id.
func (s *Service) runChanged(id string) { s.changed.Notify(id) }

// cancelLocal cancels the model call of a run this process executes.
func (s *Service) cancelLocal(id string) {
	s.mu.Lock()
	cancel := s.active[id]
	s.mu.Unlock()
	if cancel != nil {
		cancel(errCancelRequested)
	}
}

// WaitRun blocks until the run satisfies done, or ctx ends. It wakes on the
// changes this Service makes (launch, start, finish, cancel).
func (s *Service) WaitRun(ctx context.Context, id string, done func(Run) bool) (Run, error) {
	for {
		changed := s.changed.Wait(id) // before reading: no change is missed
		r, err := s.GetRun(ctx, id)
		if err != nil {
			return r, err
		}
		if done(r) {
			return r, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return r, ctx.Err()
		}
	}
}

// RunEnded is a WaitRun condition: the run reached a terminal status.
func RunEnded(r Run) bool { return store.RunStatus(r.Status).Terminal() }

func (s *Service) worker() {
	defer s.wg.Done()
	var poll <-chan time.Time
	if s.cfg.Shared {
		t := time.NewTicker(s.cfg.ClaimInterval)
		defer t.Stop()
		poll = t.C
	}
	for {
		wake := s.queued.Wait(queuedKey) // before claiming: no launch is missed
		remote := s.store.ControlSignal(store.RunsQueued)
		if s.stopping() {
			return
		}
		run, ok, err := s.store.ClaimRun(s.base, store.ClaimRunParams{Now: s.now(), Instance: s.cfg.Instance})
		if err != nil {
			if s.stopping() {
				return
			}
			s.log.Error("claim run", "err", err)
			// A failing store: try again, but not in a hot loop.
			t := time.NewTimer(time.Second)
			select {
			case <-t.C:
			case <-s.quit:
				t.Stop()
				return
			}
			continue
		}
		if !ok {
			select {
			case <-wake:
			case <-remote:
			case <-poll:
			case <-s.quit:
				return
			}
			continue
		}
		s.execute(run)
	}
}

// execute runs one claimed run to its end. Whatever happens, the run ends:
// succeeded, failed (with the provider's typed message, a timeout, or the
// daemon shutting down) or cancelled.
func (s *Service) execute(run store.Run) {
	ctx, cancel := context.WithCancelCause(s.base)
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, s.cfg.RunTimeout, errRunTimeout)
	started := time.Now()
	ended := s.cfg.Observer.RunStarted()
	defer ended()
	s.mu.Lock()
	s.active[run.ID] = cancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.active, run.ID)
		s.mu.Unlock()
		cancelTimeout()
		cancel(nil)
	}()
	s.runChanged(run.ID)
	// A cancel recorded by any daemon, from the claim on.
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); s.watchCancel(wctx, run.ID, cancel) }()
	defer func() { stopWatch(); <-watched }()

	output, err := s.complete(ctx, run)
	p := store.FinishRunParams{ID: run.ID, Status: store.RunSucceeded}
	p.Output, p.OutputTruncated = truncateOutput(output, s.cfg.MaxOutputBytes)
	fail := func(status store.RunStatus, code protocol.ErrorCode, msg string) {
		c := string(code)
		p.Status, p.ErrorCode, p.ErrorMessage = status, &c, &msg
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errCancelRequested):
		fail(store.RunCancelled, protocol.Cancelled, "cancelled while running")
	case errors.Is(cause, errShutdown):
		s.log.Info("run interrupted by shutdown", "run", run.ID, "playbook", run.PlaybookName,
			"outcome", string(store.RunFailed), "error_code", string(protocol.ServiceRestarted))
		fail(store.RunFailed, protocol.ServiceRestarted, "the daemon shut down while this run was running; it did not complete")
	case errors.Is(cause, errRunTimeout):
		fail(store.RunFailed, protocol.ModelFailure, fmt.Sprintf("the run did not finish within %s", s.cfg.RunTimeout))
	case err != nil:
		var pe *protocol.Error
		if errors.As(err, &pe) {
			fail(store.RunFailed, pe.Code, pe.Message)
		} else {
			fail(store.RunFailed, protocol.ModelFailure, "the model provider failed: "+redact.Text(err.Error()))
		}
	}
	// A fresh context (the run's own may be cancelled, its ending must
	// not be), still fenced: tried again through a database outage.
	finish := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := s.store.FinishRun(ctx, store.FinishRunParams{ID: p.ID, Status: p.Status, Output: p.Output,
			OutputTruncated: p.OutputTruncated, ErrorCode: p.ErrorCode, ErrorMessage: p.ErrorMessage, Now: s.now(),
			Instance: s.cfg.Instance})
		return err
	}
	// A retry that finds the run ended already (its first commit's
	// answer was lost) is conflict, as a run ended elsewhere is.
	if err := store.RideOut(context.WithoutCancel(s.base), s.cfg.OutageBudget, s.quit, func(wait time.Duration, err error) {
		s.log.Warn("finish run: the database is unavailable; retrying", "run", run.ID, "wait", wait, "err", err)
	}, finish); err != nil {
		if !protocol.IsCode(err, protocol.Conflict) { // ended elsewhere (recovered by another process)
			s.log.Error("finish run", "run", run.ID, "err", err)
		}
	} else {
		s.runEnded(run, p, time.Since(started))
	}
	s.runChanged(run.ID)
}

// watchCancel cancels a run's model call once its row says a cancel was
// requested — through this daemon or another — until ctx ends. The
// signal is taken before each read: no cancel is missed.
func (s *Service) watchCancel(ctx context.Context, id string, cancel context.CancelCauseFunc) {
	for {
		sig := s.store.ControlSignal(store.RunKey(id))
		if cur, err := s.store.GetRun(ctx, id); err == nil && cur.CancelRequestedAt != nil {
			cancel(errCancelRequested)
			return
		}
		select {
		case <-sig:
		case <-ctx.Done():
			return
		}
	}
}

// ReapOrphans fails the runs that reaped instances — daemons whose lease
// expired — left running, each with the reason recorded: the
// application's part of recovery by lease. Each run is failed by one
// compare-and-set on its owner, so it ends once whichever daemons reap.
func (s *Service) ReapOrphans(ctx context.Context, w store.OrphanedWork) error {
	var errs []error
	for _, r := range w.Runs {
		msg := "the daemon running this run stopped (its lease expired); it did not complete"
		if r.Owner == "" {
			msg = "no daemon owns this run any more; it did not complete"
		}
		_, err := s.store.ReapRun(ctx, store.ReapRunParams{ID: r.ID, From: r.Owner, ErrorCode: string(protocol.ServiceRestarted),
			ErrorMessage: msg, Now: s.now()})
		switch {
		case err == nil:
			s.log.Warn("failed a run whose daemon stopped", "run", r.ID, "playbook", r.PlaybookName, "instance", r.Owner)
			s.runChanged(r.ID)
		case !protocol.IsCode(err, protocol.Conflict): // another reaper failed it first
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// runEnded logs and observes a run's end: one line per run, with its error
// code (the message may quote the model and stays in the run's record).
func (s *Service) runEnded(run store.Run, p store.FinishRunParams, d time.Duration) {
	s.cfg.Observer.RunFinished(string(p.Status), d)
	attrs := []any{"run", run.ID, "playbook", run.PlaybookName, "trigger", string(run.Trigger),
		"status", string(p.Status), "duration", d.Round(time.Millisecond)}
	if p.ErrorCode != nil {
		attrs = append(attrs, "error_code", *p.ErrorCode)
	}
	if p.Status == store.RunFailed {
		s.log.Warn("run ended", attrs...)
	} else { // succeeded, or cancelled by a person: routine
		s.log.Info("run ended", attrs...)
	}
}

// complete runs the playbook's prompt as a one-shot completion.
func (s *Service) complete(ctx context.Context, run store.Run) (string, error) {
	if s.provider == nil {
		return "", protocol.Errorf(protocol.ModelFailure, "no model provider is configured; start the daemon with --model")
	}
	req := model.Request{
		System: fmt.Sprintf("You are running the Studio playbook %q (version %d). Follow its instructions and answer "+
			"with the result only. You have no tools: work from the instructions and the input given.", run.PlaybookName, run.PlaybookVersion),
		Messages: []model.Message{{Role: model.RoleUser, Content: RenderPrompt(run.Prompt, run.Input, run.Args)}},
	}
	return s.completeStreaming(ctx, run.ID, req)
}

// placeholder is {{input}} or {{argname}} in a playbook prompt.
var placeholder = regexp.MustCompile(`\{\{([a-z][a-z0-9_]*)\}\}`)

// RenderPrompt is what a run sends the model: the playbook's prompt with
// {{input}} and {{argname}} replaced in one pass (values are not expanded
// again); input and arguments the prompt does not mention are appended
// after it, so none is silently dropped.
func RenderPrompt(prompt, input string, args map[string]string) string {
	used := map[string]bool{}
	out := placeholder.ReplaceAllStringFunc(prompt, func(m string) string {
		name := m[2 : len(m)-2]
		if name == "input" {
			used[name] = true
			return input
		}
		if v, ok := args[name]; ok {
			used[name] = true
			return v
		}
		return m
	})
	names := make([]string, 0, len(args))
	for k := range args {
		if !used[k] {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(out)
	if len(names) > 0 {
		b.WriteString("\n\nArguments:")
		for _, k := range names {
			fmt.Fprintf(&b, "\n- %s: %s", k, args[k])
		}
	}
	if !used["input"] && input != "" {
		b.WriteString("\n\nInput:\n")
		b.WriteString(input)
	}
	return b.String()
}

// truncateOutput bounds output to max bytes at a character boundary and
// marks the cut.
func truncateOutput(out string, max int) (string, bool) {
	if len(out) <= max {
		return out, false
	}
	marker := fmt.Sprintf("\n[output truncated: %d bytes over the %d KiB limit]", len(out)-max, max>>10)
	cut := max - len(marker)
	if cut < 0 {
		cut = 0
	}
	for cut > 0 && !utf8.RuneStart(out[cut]) {
		cut--
	}
	return out[:cut] + marker, true
}
