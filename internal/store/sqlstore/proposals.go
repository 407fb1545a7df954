package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

const proposalCols = `id, conversation_id, request_id, call_id, command_type, command_json, command_hash,
	target_kind, target_id, target_version, risk, summary, idempotency_key, status, expires_at,
	confirmed_at, completed_at, result_json, error_code, created_at, impact, target_name, amended_from, owner_instance, owner_epoch, executed_at, submitted_by, decided_by, project, executed_audit_id, origin`

func scanProposal(row scanner) (store.Proposal, error) {
	var p store.Proposal
	var command string
	var kind, id, version, result, code, impact, targetName, amended, owner, submittedBy, decidedBy, project sql.NullString
	var expires, created float64
	var confirmed, completed, executed sql.NullFloat64
	var executedAudit sql.NullInt64
	if err := row.Scan(&p.ID, &p.ConversationID, &p.RequestID, &p.CallID, &p.CommandType, &command, &p.CommandHash,
		&kind, &id, &version, &p.Risk, &p.Summary, &p.IdempotencyKey, &p.Status, &expires,
		&confirmed, &completed, &result, &code, &created, &impact, &targetName, &amended, &owner, &p.Epoch, &executed, &submittedBy, &decidedBy, &project, &executedAudit, &p.Origin); err != nil {
		return p, err
	}
	p.Impact, p.TargetName = impact.String, targetName.String
	p.Owner, p.SubmittedBy, p.DecidedBy, p.Project = owner.String, submittedBy.String, decidedBy.String, project.String
	p.Command = jsontext.Value(command)
	if kind.Valid {
		p.Target = &protocol.ResourceVersion{Kind: kind.String, ID: id.String, Version: version.String}
	}
	if result.Valid {
		p.Result = jsontext.Value(result.String)
	}
	p.ErrorCode, p.AmendedFrom = nullString(code), nullString(amended)
	p.ExpiresAt, p.CreatedAt = fromTS(expires), fromTS(created)
	p.ConfirmedAt, p.CompletedAt, p.ExecutedAt = nullTS(confirmed), nullTS(completed), nullTS(executed)
	p.ExecutedAuditID = executedAudit.Int64
	return p, nil
}

func getProposal(ctx context.Context, q querier, id string) (store.Proposal, error) {
	return loadProposal(ctx, q, id, "")
}

func loadProposal(ctx context.Context, q querier, id, lock string) (store.Proposal, error) {
	p, err := scanProposal(q.QueryRowContext(ctx, `SELECT `+proposalCols+` FROM studio_operator_proposals WHERE id = ?`+lock, id))
	if errors.Is(err, sql.ErrNoRows) {
		return p, notFound("proposal", id)
	}
	if err != nil {
		return p, fmt.Errorf("get proposal: %w", err)
	}
	return p, nil
}

// requireActive refuses frames for a request that is not the conversation's
// active turn; it locks the conversation.
func requireActive(ctx context.Context, tx *writeTx, convID, reqID string) error {
	c, err := lockConversation(ctx, tx, convID)
	if err != nil {
		return err
	}
	if c.ActiveRequestID == nil || *c.ActiveRequestID != reqID {
		return protocol.Errorf(protocol.Conflict, "request %s is not the conversation's active turn", reqID)
	}
	return nil
}

// CreateProposal implements store.ProposalStore.
func (s *Store) CreateProposal(ctx context.Context, p store.CreateProposalParams) (store.Proposal, error) {
	defer s.timed("create_proposal", time.Now())
	var out store.Proposal
	err := s.txn(ctx, func(tx *writeTx) error {
		pr := p.Proposal
		if err := requireActive(ctx, tx, pr.ConversationID, pr.RequestID); err != nil {
			return err
		}
		var err error
		if out, err = insertProposal(ctx, tx, pr, p.Now); err != nil {
			return err
		}
		if p.Audit != nil {
			_, err = appendAdminEvent(ctx, tx, *p.Audit)
		}
		return err
	})
	return out, err
}

// insertProposal appends the proposal's proposal and confirmation(required)
// frames after any frames given, then inserts it pending, in the caller's
// transaction; the caller checked that its request is the active turn.
func insertProposal(ctx context.Context, tx *writeTx, pr store.Proposal, now time.Time, before ...protocol.Payload) (store.Proposal, error) {
	// The frames first: encoding them validates the proposal, so an
	// invalid one is the caller's validation error, not a constraint's.
	cp := protocol.CommandProposal{ID: pr.ID, CommandType: pr.CommandType, Command: pr.Command, CommandHash: pr.CommandHash,
		Risk: pr.Risk, Impact: pr.Impact, Summary: pr.Summary, Target: pr.Target, TargetName: pr.TargetName,
		IdempotencyKey: pr.IdempotencyKey, ExpiresAt: ts(pr.ExpiresAt), Amends: pr.AmendedFrom, Origin: proposalOrigin(pr.Origin)}
	payloads := append(before, protocol.ProposalPayload{Proposal: cp},
		protocol.ConfirmationPayload{ProposalID: pr.ID, State: protocol.ConfirmationRequired})
	if _, err := appendFrames(ctx, tx, pr.ConversationID, pr.RequestID, now, payloads...); err != nil {
		return store.Proposal{}, err
	}
	var kind, id, version any
	if pr.Target != nil {
		kind, id, version = pr.Target.Kind, pr.Target.ID, pr.Target.Version
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO studio_operator_proposals
		(id, conversation_id, request_id, call_id, command_type, command_json, command_hash, target_kind, target_id,
		 target_version, risk, summary, idempotency_key, status, expires_at, created_at, amended_from, impact, target_name, project, origin, submitted_by)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?,
		        COALESCE(?, (SELECT submitted_by FROM studio_operator_turns WHERE request_id = ?)))`,
		pr.ID, pr.ConversationID, pr.RequestID, pr.CallID, pr.CommandType, string(pr.Command), pr.CommandHash,
		kind, id, version, pr.Risk, pr.Summary, pr.IdempotencyKey, ts(pr.ExpiresAt), ts(now), pr.AmendedFrom,
		emptyNull(pr.Impact), emptyNull(pr.TargetName), pr.Project, cp.Origin, emptyNull(pr.SubmittedBy), pr.RequestID); err != nil {
		return store.Proposal{}, fmt.Errorf("insert proposal: %w", err)
	}
	tx.touch(pr.ConversationID)
	tx.changed(store.ChangeProposalChanged, pr.ID)
	out, err := getProposal(ctx, tx, pr.ID)
	if err != nil {
		return out, err
	}
	return out, enqueueProposal(ctx, tx, store.EventProposalPending, out, "", now)
}

// proposalOrigin is a new proposal's origin: a turn's unless said.
func proposalOrigin(o string) string {
	if o == "" {
		return protocol.ProposalOriginTurn
	}
	return o
}

// GetProposal implements store.ProposalStore.
func (s *Store) GetProposal(ctx context.Context, id string) (store.Proposal, error) {
	defer s.timed("get_proposal", time.Now())
	return getProposal(ctx, s.r, id)
}

// ListProposals implements store.ProposalStore.
func (s *Store) ListProposals(ctx context.Context, p store.ListProposalsParams) ([]store.Proposal, error) {
	defer s.timed("list_proposals", time.Now())
	query := `SELECT ` + proposalCols + ` FROM studio_operator_proposals WHERE 1 = 1`
	var args []any
	if p.ConversationID != "" {
		query += ` AND conversation_id = ?`
		args = append(args, p.ConversationID)
	}
	if p.RequestID != "" {
		query += ` AND request_id = ?`
		args = append(args, p.RequestID)
	}
	if p.VisibleTo != "" {
		query += ` AND conversation_id IN (SELECT id FROM studio_operator_conversations WHERE visibility = 'team' OR owner = ?)`
		args = append(args, p.VisibleTo)
	}
	if len(p.Statuses) > 0 {
		query += ` AND status IN (?` + strings.Repeat(`, ?`, len(p.Statuses)-1) + `)`
		for _, st := range p.Statuses {
			args = append(args, string(st))
		}
	}
	query += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, limitOr(p.Limit, 100))
	return collect(ctx, s.r, "list proposals", scanProposal, query, args...)
}

// transitionParams move one proposal: from one of From, by the SET clause
// Set whose placeholders take Args (the proposal's id and status follow
// them), with its audit row and frames.
type transitionParams struct {
	ID     string
	From   []store.ProposalStatus
	Set    string
	Args   []any
	Audit  store.AppendAdminEventParams
	Frames []store.NewFrame
	Now    time.Time
}

// transition moves a proposal, appending its audit row and frames, in the
// caller's transaction. It returns the proposal as it was found when the
// transition does not apply. Where rows are locked it locks the
// conversation, then the proposal, then (resumeTurn) the turn: the order
// FinishTurn keeps too.
func transition(ctx context.Context, tx *writeTx, p transitionParams) (store.Proposal, error) {
	id, from, set, args, audit, frames, now := p.ID, p.From, p.Set, p.Args, p.Audit, p.Frames, p.Now
	payloads, err := callerPayloads(frames)
	if err != nil {
		return store.Proposal{}, err
	}
	cur, err := getProposal(ctx, tx, id)
	if err != nil {
		return cur, err
	}
	if tx.locks.rows() {
		if _, err := lockConversation(ctx, tx, cur.ConversationID); err != nil {
			return cur, err
		}
		if cur, err = loadProposal(ctx, tx, id, tx.locks.update); err != nil {
			return cur, err
		}
	}
	if !slices.Contains(from, cur.Status) {
		return cur, protocol.Errorf(protocol.Conflict, "proposal %s is %s", id, cur.Status).With("status", string(cur.Status))
	}
	if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_proposals SET `+set+` WHERE id = ? AND status = ?`,
		append(args, id, string(cur.Status))...); err != nil {
		return cur, fmt.Errorf("update proposal: %w", err)
	}
	tx.changed(store.ChangeProposalChanged, id)
	audit.Now = now
	if _, err := appendAdminEvent(ctx, tx, audit); err != nil {
		return cur, err
	}
	if len(frames) > 0 {
		if err := requireActive(ctx, tx, cur.ConversationID, cur.RequestID); err != nil {
			return cur, err
		}
		if _, err := appendFrames(ctx, tx, cur.ConversationID, cur.RequestID, now, payloads...); err != nil {
			return cur, err
		}
	}
	return getProposal(ctx, tx, id)
}

// resumeTurn moves the proposal's turn from awaiting_confirmation back to
// running, owned by instance; it reports whether it did (and so who
// continues the turn).
func resumeTurn(ctx context.Context, tx *writeTx, requestID, instance string) (bool, error) {
	res, err := tx.ExecContext(ctx, `UPDATE studio_operator_turns SET status = 'running', owner_instance = ?, owner_epoch = owner_epoch + 1
		WHERE request_id = ? AND status = 'awaiting_confirmation'`, nullIfEmpty(instance), requestID)
	if err != nil {
		return false, fmt.Errorf("resume turn: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// ConfirmProposal implements store.ProposalStore.
func (s *Store) ConfirmProposal(ctx context.Context, p store.ConfirmProposalParams) (store.Proposal, error) {
	defer s.timed("confirm_proposal", time.Now())
	var out store.Proposal
	err := s.txn(ctx, func(tx *writeTx) error {
		var err error
		out, err = transition(ctx, tx, transitionParams{ID: p.ID, From: []store.ProposalStatus{store.ProposalPending},
			Set:  `status = 'executing', confirmed_at = ?, owner_instance = ?, owner_epoch = owner_epoch + 1, decided_by = ?`,
			Args: []any{ts(p.Now), nullIfEmpty(p.Instance), emptyNull(p.DecidedBy)}, Audit: p.Audit, Frames: p.Frames, Now: p.Now})
		if err != nil {
			return err
		}
		tx.touch(out.ConversationID)
		if err := enqueueProposal(ctx, tx, store.EventProposalDecided, out, protocol.DecisionConfirmed, p.Now); err != nil {
			return err
		}
		// A parked turn is its executor's while the command runs: if that
		// daemon dies, a reaper knows whose work to end.
		if _, err := tx.ExecContext(ctx, `UPDATE studio_operator_turns SET owner_instance = ?, owner_epoch = owner_epoch + 1
			WHERE request_id = ? AND status = 'awaiting_confirmation'`, nullIfEmpty(p.Instance), out.RequestID); err != nil {
			return fmt.Errorf("confirm proposal: %w", err)
		}
		return nil
	})
	return out, err
}

// FinishProposal implements store.ProposalStore.
func (s *Store) FinishProposal(ctx context.Context, p store.FinishProposalParams) (store.Proposal, bool, error) {
	defer s.timed("finish_proposal", time.Now())
	if p.Status != store.ProposalSucceeded && p.Status != store.ProposalFailed {
		return store.Proposal{}, false, protocol.Errorf(protocol.Validation, "finish proposal: %s is not succeeded or failed", p.Status)
	}
	var out store.Proposal
	var resumed bool
	err := s.txn(ctx, func(tx *writeTx) error {
		var result any
		if p.Result != nil {
			result = string(p.Result)
		}
		var err error
		out, err = transition(ctx, tx, transitionParams{ID: p.ID, From: []store.ProposalStatus{store.ProposalExecuting},
			Set:  `status = ?, completed_at = ?, result_json = ?, error_code = ?`,
			Args: []any{string(p.Status), ts(p.Now), result, p.ErrorCode}, Audit: p.Audit, Frames: p.Frames, Now: p.Now})
		if err != nil {
			return err
		}
		if p.Also != nil {
			also := *p.Also
			also.Now = p.Now
			if _, err := appendAdminEvent(ctx, tx, also); err != nil {
				return err
			}
		}
		tx.touch(out.ConversationID)
		resumed, err = resumeTurn(ctx, tx, out.RequestID, p.Instance)
		return err
	})
	return out, resumed, err
}

// CloseProposal implements store.ProposalStore.
func (s *Store) CloseProposal(ctx context.Context, p store.CloseProposalParams) (store.Proposal, bool, error) {
	defer s.timed("close_proposal", time.Now())
	switch p.Status {
	case store.ProposalCancelled, store.ProposalExpired, store.ProposalConflict:
	default:
		return store.Proposal{}, false, protocol.Errorf(protocol.Validation, "close proposal: %s is not cancelled, expired or conflict", p.Status)
	}
	var out store.Proposal
	var resumed bool
	err := s.txn(ctx, func(tx *writeTx) error {
		var err error
		out, err = transition(ctx, tx, transitionParams{ID: p.ID, From: []store.ProposalStatus{store.ProposalPending},
			Set:  `status = ?, completed_at = ?, error_code = ?, decided_by = ?`,
			Args: []any{string(p.Status), ts(p.Now), p.ErrorCode, emptyNull(p.DecidedBy)}, Audit: p.Audit, Frames: p.Frames, Now: p.Now})
		if err != nil {
			return err
		}
		tx.touch(out.ConversationID)
		if denied(p) {
			if err := enqueueProposal(ctx, tx, store.EventProposalDecided, out, protocol.DecisionDenied, p.Now); err != nil {
				return err
			}
		}
		resumed, err = resumeTurn(ctx, tx, out.RequestID, p.Instance)
		return err
	})
	return out, resumed, err
}

// denied reports a close that is a person's denial, not a cancellation
// with the turn or an expiry: the code the denial records.
func denied(p store.CloseProposalParams) bool {
	return p.Status == store.ProposalCancelled && p.ErrorCode != nil && *p.ErrorCode == string(protocol.Denied)
}

// AwaitConfirmation implements store.ProposalStore.
func (s *Store) AwaitConfirmation(ctx context.Context, p store.AwaitConfirmationParams) (bool, error) {
	defer s.timed("await_confirmation", time.Now())
	var parked bool
	err := s.txn(ctx, func(tx *writeTx) error {
		if tx.locks.rows() {
			// The conversation's lock orders this after a CloseProposal or
			// FinishProposal of the same turn: the EXISTS below sees its outcome.
			t, err := getTurn(ctx, tx, p.RequestID)
			if protocol.IsCode(err, protocol.NotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			if _, err := lockConversation(ctx, tx, t.ConversationID); err != nil {
				return err
			}
		}
		// Parked on a human, the turn is no one's; parked on a proposal
		// another daemon executes, it is that daemon's.
		res, err := tx.ExecContext(ctx, `UPDATE studio_operator_turns SET status = 'awaiting_confirmation', owner_epoch = owner_epoch + 1,
			owner_instance = (SELECT MAX(owner_instance) FROM studio_operator_proposals
				WHERE request_id = ? AND status = 'executing')
			WHERE request_id = ? AND status = 'running' AND EXISTS (
				SELECT 1 FROM studio_operator_proposals
				WHERE request_id = ? AND status IN ('pending', 'executing'))`, p.RequestID, p.RequestID, p.RequestID)
		if err != nil {
			return fmt.Errorf("await confirmation: %w", err)
		}
		n, _ := res.RowsAffected()
		parked = n == 1
		return nil
	})
	return parked, err
}
