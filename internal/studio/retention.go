package studio

import (
	"context"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Retention: a deployment may keep conversations only for so long
// (Config.Retention, serve --retention). A pass removes, through the
// store's purge of conversations, every conversation not used for that
// long that is not pinned and has no active turn, with an audit row; the
// streams following one end with replay_gap.

// ActionRetention is the audit action of a retention pass that removed
// conversations.
const ActionRetention = "studio.app.retention"

// DefaultRetentionInterval is how often the retention pass runs when
// Config.RetentionInterval is zero.
const DefaultRetentionInterval = time.Hour

// RetentionReport is the deployment's retention, for doctor.
type RetentionReport struct {
	// AfterSeconds: conversations unused this long are removed.
	AfterSeconds float64 `json:"afterSeconds"`
	// Removable is how many conversations a pass would remove now.
	Removable int64 `json:"removable"`
}

// RetentionResult is what one retention pass removed.
type RetentionResult struct {
	UnusedBefore time.Time
	Removed      store.PurgeDeletedConversationsResult
}

// ApplyRetention runs one retention pass now (by the service's clock).
// Without a retention configured it removes nothing.
func (s *Service) ApplyRetention(ctx context.Context) (RetentionResult, error) {
	if s.cfg.Retention <= 0 {
		return RetentionResult{}, nil
	}
	now := s.now()
	cutoff := now.Add(-s.cfg.Retention)
	res := RetentionResult{UnusedBefore: cutoff}
	if n, err := s.store.CountIdleConversations(ctx, cutoff); err != nil || n == 0 {
		return res, err // nothing to remove: no audit row every hour
	}
	details, err := protocol.Marshal(map[string]any{"retention": s.cfg.Retention.String(), "unused_before": stamp(cutoff)})
	if err != nil {
		return res, err
	}
	res.Removed, err = s.store.PurgeIdleConversations(ctx, store.PurgeIdleConversationsParams{UnusedBefore: cutoff,
		Audit: &store.AppendAdminEventParams{Actor: ActorSystem, Action: ActionRetention, Details: details, Now: now}})
	if err != nil {
		return res, err
	}
	if res.Removed.Conversations > 0 {
		s.log.Info("retention removed conversations", "conversations", res.Removed.Conversations, "turns", res.Removed.Turns,
			"frames", res.Removed.Frames, "unused_before", cutoff, "retention", s.cfg.Retention.String())
	}
	return res, nil
}

// retentionReport counts what a pass would remove; nil without retention.
func (s *Service) retentionReport(ctx context.Context) (*RetentionReport, error) {
	if s.cfg.Retention <= 0 {
		return nil, nil
	}
	n, err := s.store.CountIdleConversations(ctx, s.now().Add(-s.cfg.Retention))
	if err != nil {
		return nil, err
	}
	return &RetentionReport{AfterSeconds: s.cfg.Retention.Seconds(), Removable: n}, nil
}

// retentionLoop runs a pass at start and every RetentionInterval until Stop.
func (s *Service) retentionLoop() {
	defer s.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(s.base, 10*time.Minute)
		if _, err := s.ApplyRetention(ctx); err != nil && !s.stopping() {
			s.log.Error("retention pass", "err", err)
		}
		cancel()
		t.Reset(s.cfg.RetentionInterval)
	}
}
