package studio

import (
	"context"
	"fmt"
	"slices"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// Maintenance actions of run_maintenance.
const (
	MaintenanceVacuum                    = "vacuum"
	MaintenanceCheckpoint                = "checkpoint"
	MaintenanceIntegrityCheck            = "integrity_check"
	MaintenancePurgeDeletedConversations = "purge_deleted_conversations"
	MaintenancePurgeFrames               = "purge_frames"
	// reconcile_proposal (docs/design.md §9.4) settles a proposal left executing;
	// it is a command of its own (cmd_reconcile.go), not an action here.
)

// MaintenanceActions lists the actions, in the order the cockpit shows them.
var MaintenanceActions = []string{MaintenanceVacuum, MaintenanceCheckpoint, MaintenanceIntegrityCheck,
	MaintenancePurgeDeletedConversations, MaintenancePurgeFrames}

// RunMaintenanceCommand is run_maintenance.
type RunMaintenanceCommand struct {
	Action         string `json:"action" jsonschema:"enum=vacuum,enum=checkpoint,enum=integrity_check,enum=purge_deleted_conversations,enum=purge_frames" jsonschema_description:"vacuum rebuilds the database file; checkpoint folds the write-ahead log into it; integrity_check verifies it; purge_deleted_conversations removes conversations deleted longer ago than the recovery window; purge_frames removes one conversation's frames before a sequence."`
	ConversationID string `json:"conversationId,omitempty" jsonschema:"minLength=36,maxLength=36" jsonschema_description:"purge_frames only: the conversation whose older frames go."`
	BeforeSequence int64  `json:"beforeSequence,omitzero" jsonschema:"minimum=1" jsonschema_description:"purge_frames only: frames with a lower sequence are removed; replay from an older cursor then answers replay_gap."`
}

// Validate implements Command.
func (c RunMaintenanceCommand) Validate() error {
	if !slices.Contains(MaintenanceActions, c.Action) {
		return invalid("action", "action must be one of %v", MaintenanceActions)
	}
	if c.Action == MaintenancePurgeFrames {
		if !isUUID(c.ConversationID) {
			return invalid("conversationId", "purge_frames needs conversationId (a conversation id)")
		}
		if c.BeforeSequence < 1 {
			return invalid("beforeSequence", "purge_frames needs beforeSequence (1 or more)")
		}
		return nil
	}
	if c.ConversationID != "" || c.BeforeSequence != 0 {
		return invalid("action", "conversationId and beforeSequence belong to purge_frames only")
	}
	return nil
}

// Summary implements Command.
func (c RunMaintenanceCommand) Summary() string {
	switch c.Action {
	case MaintenanceVacuum:
		return "Vacuum the database (rebuild the file; writes wait meanwhile)"
	case MaintenanceCheckpoint:
		return "Checkpoint the database write-ahead log"
	case MaintenanceIntegrityCheck:
		return "Check the database's integrity"
	case MaintenancePurgeDeletedConversations:
		return "Permanently remove conversations deleted longer ago than the recovery window"
	case MaintenancePurgeFrames:
		return fmt.Sprintf("Permanently remove the frames before sequence %d of conversation %s", c.BeforeSequence, c.ConversationID)
	}
	return "Run maintenance " + c.Action
}

// impact: only the purges remove anything.
func (c RunMaintenanceCommand) impact() Impact {
	if c.Action == MaintenancePurgeDeletedConversations || c.Action == MaintenancePurgeFrames {
		return ImpactIrreversible
	}
	return ImpactNone
}

func (RunMaintenanceCommand) resolve(context.Context, *Service) (*protocol.ResourceVersion, error) {
	return nil, nil
}

// check refuses purge_frames of a conversation that does not exist (or is
// deleted) or a sequence past its end.
func (c RunMaintenanceCommand) check(ctx context.Context, s *Service) error {
	if c.Action != MaintenancePurgeFrames {
		return nil
	}
	conv, err := s.store.GetConversation(ctx, c.ConversationID)
	if err != nil {
		return err
	}
	if conv.Status == store.ConversationDeleted {
		return protocol.Errorf(protocol.NotFound, "conversation %s not found", c.ConversationID)
	}
	if c.BeforeSequence > conv.NextSequence {
		return invalid("beforeSequence", "beforeSequence must be from 1 to %d (the next sequence)", conv.NextSequence)
	}
	return nil
}

// MaintenanceResult is what a maintenance action found or did.
type MaintenanceResult struct {
	Action string `json:"action"`
	OK     bool   `json:"ok"`
	// integrity_check
	Problems []string `json:"problems,omitempty"`
	// checkpoint: readers kept part of the WAL; vacuum and checkpoint: sizes after.
	Busy          bool   `json:"busy,omitzero"`
	DatabaseBytes *int64 `json:"databaseBytes,omitzero"`
	WALBytes      *int64 `json:"walBytes,omitzero"`
	// purge_deleted_conversations
	DeletedBefore *float64      `json:"deletedBefore,omitzero"`
	Removed       *PurgedCounts `json:"removed,omitzero"`
	// purge_frames
	FramesPurged          *int64 `json:"framesPurged,omitzero"`
	RetainedFromSequence  *int64 `json:"retainedFromSequence,omitzero"`
	EarliestAfterSequence *int64 `json:"earliestAfterSequence,omitzero"`
}

// PurgedCounts counts the rows purge_deleted_conversations removed.
type PurgedCounts struct {
	Conversations int64 `json:"conversations"`
	Turns         int64 `json:"turns"`
	Frames        int64 `json:"frames"`
	Proposals     int64 `json:"proposals"`
	Effects       int64 `json:"effects"`
	Tickets       int64 `json:"tickets"`
}

func unavailable(action string) error {
	return &protocol.Error{Code: protocol.ServiceFailure, Retryable: false,
		Message: fmt.Sprintf("maintenance action %s is not available for this database backend", action)}
}

func (c RunMaintenanceCommand) execute(ctx context.Context, s *Service, env execEnv) (Result, error) {
	res := &MaintenanceResult{Action: c.Action}
	switch c.Action {
	case MaintenancePurgeDeletedConversations:
		cutoff := env.now.Add(-s.cfg.RecoveryWindow)
		n, err := s.store.PurgeDeletedConversations(ctx, store.PurgeDeletedConversationsParams{DeletedBefore: cutoff, Audit: env.audit("")})
		if err != nil {
			return Result{}, err
		}
		before := stamp(cutoff)
		res.OK, res.DeletedBefore = true, &before
		res.Removed = &PurgedCounts{Conversations: n.Conversations, Turns: n.Turns, Frames: n.Frames,
			Proposals: n.Proposals, Effects: n.Effects, Tickets: n.Tickets}
		return Result{Maintenance: res}, nil
	case MaintenancePurgeFrames:
		n, err := s.store.PurgeFrames(ctx, store.PurgeFramesParams{ConversationID: c.ConversationID, BeforeSequence: c.BeforeSequence,
			Now: env.now, Audit: env.audit(c.ConversationID)})
		if err != nil {
			return Result{}, err
		}
		earliest := n.RetainedFrom - 1
		res.OK, res.FramesPurged, res.RetainedFromSequence, res.EarliestAfterSequence = true, &n.Purged, &n.RetainedFrom, &earliest
		return Result{Maintenance: res}, nil
	}
	if s.maint == nil {
		return Result{}, unavailable(c.Action)
	}
	// Vacuum, checkpoint and the integrity check cannot share a transaction
	// with the audit row, so the audit row goes first: no record, no action.
	if _, err := s.store.AppendAdminEvent(ctx, *env.audit("")); err != nil {
		return Result{}, protocol.Errorf(protocol.AuditUnavailable, "the audit trail is unavailable; maintenance did not run")
	}
	switch c.Action {
	case MaintenanceVacuum:
		if err := s.maint.Vacuum(ctx); err != nil {
			return Result{}, err
		}
		res.OK = true
	case MaintenanceCheckpoint:
		busy, err := s.maint.Checkpoint(ctx)
		if err != nil {
			return Result{}, err
		}
		res.OK, res.Busy = !busy, busy
	case MaintenanceIntegrityCheck:
		problems, err := s.maint.IntegrityCheck(ctx, false)
		if err != nil {
			return Result{}, err
		}
		res.OK, res.Problems = len(problems) == 0, problems
	}
	if _, db, wal, err := s.maint.DatabaseFiles(); err == nil {
		res.DatabaseBytes, res.WALBytes = &db, &wal
	}
	return Result{Maintenance: res}, nil
}
