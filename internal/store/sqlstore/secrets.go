package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/redact"
	"github.com/studio/operator/internal/store"
)

// scrubColumn is a column that keeps what people and models wrote, and
// the key of its rows.
type scrubColumn struct {
	table, column string
	key           []string
	json          bool
}

// scrubColumns are the columns ScrubSecrets reads: frames, turns (the
// instruction and the context the cockpit sent), titles, proposals (their
// command, result and summary), effects, the search index, the audit
// trail, runs (prompt, input, output, error) and webhook bodies.
var scrubColumns = []scrubColumn{
	{table: "studio_operator_frames", column: "payload_json", key: []string{"conversation_id", "sequence"}, json: true},
	{table: "studio_operator_turns", column: "instruction", key: []string{"request_id"}},
	{table: "studio_operator_turns", column: "context_json", key: []string{"request_id"}, json: true},
	{table: "studio_operator_conversations", column: "title", key: []string{"id"}},
	{table: "studio_operator_proposals", column: "command_json", key: []string{"id"}, json: true},
	{table: "studio_operator_proposals", column: "result_json", key: []string{"id"}, json: true},
	{table: "studio_operator_proposals", column: "summary", key: []string{"id"}},
	{table: "studio_operator_effects", column: "effect_json", key: []string{"id"}, json: true},
	{table: "studio_operator_search_docs", column: "content", key: []string{"id"}},
	{table: "admin_events", column: "details", key: []string{"id"}, json: true},
	{table: "studio_runs", column: "prompt", key: []string{"id"}},
	{table: "studio_runs", column: "input", key: []string{"id"}},
	{table: "studio_runs", column: "output", key: []string{"id"}},
	{table: "studio_runs", column: "error_message", key: []string{"id"}},
	{table: "studio_webhook_deliveries", column: "payload", key: []string{"id"}, json: true},
}

// ScrubSecrets implements store.SecretScrubber: every column of
// scrubColumns passes redact.Secrets (JSON ones redact.SecretsJSON); a
// value the redaction hides more of holds a secret. With Apply the values
// are rewritten and the audit row written, in one transaction. A search
// document is deleted and inserted again rather than updated, so that
// the index triggers drop its old words.
func (s *Store) ScrubSecrets(ctx context.Context, p store.ScrubSecretsParams) (store.ScrubReport, error) {
	defer s.timed("scrub_secrets", time.Now())
	var rep store.ScrubReport
	scan := func(c conn) ([][]fix, error) {
		rep = store.ScrubReport{}
		all := make([][]fix, len(scrubColumns))
		for i, col := range scrubColumns {
			fixes, err := scrubScan(ctx, c, col)
			if err != nil {
				return nil, err
			}
			all[i] = fixes
			if len(fixes) > 0 {
				rep.Found = append(rep.Found, store.ScrubCount{Table: col.table, Column: col.column, Rows: len(fixes)})
				rep.Rows += len(fixes)
			}
		}
		return all, nil
	}
	if !p.Apply {
		_, err := scan(s.r)
		return rep, err
	}
	err := s.txn(ctx, func(tx *writeTx) error {
		all, err := scan(tx.conn)
		if err != nil || rep.Rows == 0 {
			return err
		}
		for i, col := range scrubColumns {
			for _, f := range all[i] {
				if err := scrubWrite(ctx, tx, col, f); err != nil {
					return err
				}
			}
		}
		if p.Audit != nil {
			a := *p.Audit
			details, err := protocol.Marshal(map[string]any{"rows": rep.Rows, "found": rep.Found})
			if err != nil {
				return err
			}
			a.Details = details
			if _, err := appendAdminEvent(ctx, tx, a); err != nil {
				return err
			}
		}
		rep.Redacted = true
		return nil
	})
	return rep, err
}

// fix is one value to rewrite: its row's key and the redacted value.
type fix struct {
	key   []any
	value string
}

func scrubScan(ctx context.Context, c conn, col scrubColumn) ([]fix, error) {
	rows, err := c.QueryContext(ctx, fmt.Sprintf(`SELECT %s, %s FROM %s WHERE %s IS NOT NULL`,
		strings.Join(col.key, ", "), col.column, col.table, col.column))
	if err != nil {
		return nil, fmt.Errorf("scrub %s.%s: %w", col.table, col.column, err)
	}
	defer rows.Close()
	var out []fix
	for rows.Next() {
		vals := make([]any, len(col.key)+1)
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("scrub %s.%s: %w", col.table, col.column, err)
		}
		v := asString(vals[len(vals)-1])
		var red string
		if col.json {
			red = string(redact.SecretsJSON([]byte(v)))
		} else {
			red = redact.Secrets(v)
		}
		// More markers than before: a secret was hidden (a JSON value may
		// come back formatted differently without holding one).
		if strings.Count(red, redact.Secret) > strings.Count(v, redact.Secret) {
			out = append(out, fix{key: vals[:len(vals)-1], value: red})
		}
	}
	return out, rows.Err()
}

func asString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

func scrubWrite(ctx context.Context, tx *writeTx, col scrubColumn, f fix) error {
	where := make([]string, len(col.key))
	for i, k := range col.key {
		where[i] = k + " = ?"
	}
	cond := strings.Join(where, " AND ")
	if col.table == "studio_operator_search_docs" {
		var convID, reqID string
		err := tx.QueryRowContext(ctx, `SELECT conversation_id, request_id FROM studio_operator_search_docs WHERE `+cond, f.key...).
			Scan(&convID, &reqID)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // a title's document, written anew when its title was redacted
		}
		if err != nil {
			return fmt.Errorf("scrub search document: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM studio_operator_search_docs WHERE `+cond, f.key...); err != nil {
			return fmt.Errorf("scrub search document: %w", err)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO studio_operator_search_docs (id, conversation_id, request_id, content) VALUES (?, ?, ?, ?)`,
			f.key[0], convID, reqID, f.value)
		if err != nil {
			return fmt.Errorf("scrub search document: %w", err)
		}
		return nil
	}
	args := append([]any{f.value}, f.key...)
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`UPDATE %s SET %s = ? WHERE %s`, col.table, col.column, cond), args...); err != nil {
		return fmt.Errorf("scrub %s.%s: %w", col.table, col.column, err)
	}
	return nil
}
