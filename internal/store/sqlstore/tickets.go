package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// CreateStreamTicket implements store.TicketStore.
func (s *Store) CreateStreamTicket(ctx context.Context, p store.CreateStreamTicketParams) error {
	defer s.timed("create_stream_ticket", time.Now())
	return s.txn(ctx, func(tx *writeTx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO studio_operator_stream_tickets
			(ticket_hash, conversation_id, after_sequence, expires_at, created_at, principal_id, token_hash, groups, proxy_user)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			p.TicketHash, p.ConversationID, p.AfterSequence, ts(p.ExpiresAt), ts(p.Now), emptyNull(p.Minter.PrincipalID), emptyNull(p.Minter.TokenHash),
			emptyNull(strings.Join(p.Minter.Groups, "\n")), emptyNull(p.Minter.ProxyUser)); err != nil {
			return fmt.Errorf("create stream ticket: %w", err)
		}
		// Spent and expired tickets are of no further use; keep the table small.
		if _, err := tx.ExecContext(ctx, `DELETE FROM studio_operator_stream_tickets WHERE expires_at < ?`, ts(p.Now)-3600); err != nil {
			return fmt.Errorf("prune stream tickets: %w", err)
		}
		return nil
	})
}

// RedeemStreamTicket implements store.TicketStore.
func (s *Store) RedeemStreamTicket(ctx context.Context, p store.RedeemStreamTicketParams) (store.StreamTicket, error) {
	defer s.timed("redeem_stream_ticket", time.Now())
	var t store.StreamTicket
	err := s.txn(ctx, func(tx *writeTx) error {
		var expires, created float64
		var used sql.NullFloat64
		var principal, token, groups, proxyUser sql.NullString
		err := tx.QueryRowContext(ctx, `UPDATE studio_operator_stream_tickets SET used_at = ?
			WHERE ticket_hash = ? AND used_at IS NULL AND expires_at > ?
			RETURNING ticket_hash, conversation_id, after_sequence, expires_at, created_at, used_at, principal_id, token_hash, groups, proxy_user`,
			ts(p.Now), p.TicketHash, ts(p.Now)).Scan(&t.TicketHash, &t.ConversationID, &t.AfterSequence, &expires, &created, &used, &principal, &token, &groups, &proxyUser)
		if errors.Is(err, sql.ErrNoRows) {
			return protocol.Errorf(protocol.AuthRequired, "stream ticket is unknown, used or expired")
		}
		if err != nil {
			return fmt.Errorf("redeem stream ticket: %w", err)
		}
		t.ExpiresAt, t.CreatedAt, t.UsedAt = fromTS(expires), fromTS(created), nullTS(used)
		t.Minter = store.TicketMinter{PrincipalID: principal.String, TokenHash: token.String, ProxyUser: proxyUser.String}
		if groups.String != "" {
			t.Minter.Groups = strings.Split(groups.String, "\n")
		}
		return nil
	})
	return t, err
}
