package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// The application resources of store.AppStore. Writes go through s.txn. A
// write reads the row it checks with the dialect's lock (FOR UPDATE on
// PostgreSQL; SQLite's one writer connection, BEGIN IMMEDIATE, runs writes
// one at a time), so the check cannot race another writer in this process
// or another. A duplicate name that two PostgreSQL writers insert at once
// is a unique violation, and txn's retry turns it into the ordinary
// conflict.

// slotRetention is how long handled schedule slots are kept; the
// compare-and-set on next_run_at is what makes a slot fire once, the slot
// rows are its backstop and history.
const slotRetention = 30 * 24 * time.Hour

func versionConflict(kind, id string, expected, actual int64) error {
	return protocol.Errorf(protocol.Conflict, "%s %s is at version %d, not the expected %d", kind, id, actual, expected).
		With("kind", kind).With("expectedVersion", expected).With("actualVersion", actual)
}

func checkVersion(kind, id string, expected, actual int64) error {
	if expected != 0 && expected != actual {
		return versionConflict(kind, id, expected, actual)
	}
	return nil
}

func nameTaken(kind, name, id string) error {
	return protocol.Errorf(protocol.Conflict, "a %s named %q already exists", kind, name).
		With("kind", kind).With("name", name).With("id", id)
}

func audit(ctx context.Context, tx *writeTx, p *store.AppendAdminEventParams) error {
	if p == nil {
		return nil
	}
	_, err := appendAdminEvent(ctx, tx, *p)
	return err
}

func encodeJSON(v any) (string, error) {
	b, err := json.Marshal(v, json.Deterministic(true))
	if err != nil {
		return "", fmt.Errorf("encode: %w", err)
	}
	return string(b), nil
}

func decodeArgs(s string) (map[string]string, error) {
	m := map[string]string{}
	if s == "" {
		return m, nil
	}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("decode args: %w", err)
	}
	return m, nil
}

// likePattern is a case-insensitive substring pattern for LIKE ... ESCAPE '\'.
func likePattern(q string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(strings.ToLower(q)) + "%"
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// nameOwner returns the id of the row of table named name, "" if none.
func nameOwner(ctx context.Context, q querier, table, name string) (string, error) {
	var id string
	err := q.QueryRowContext(ctx, `SELECT id FROM `+table+` WHERE name = ?`, name).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("look up name: %w", err)
	}
	return id, nil
}

// resource is a named, versioned table of the application (playbooks,
// workflows, schedules): what the one update transaction they share needs
// to know of it.
type resource[T any] struct {
	kind  string // store.KindPlaybook, ...: names the row in errors
	table string // for the name check
	// load reads the row by id with the lock clause lock ("": none).
	load func(ctx context.Context, q querier, id, lock string) (T, error)
	// lock picks the dialect's clause for a row this transaction changes.
	lock    func(*locks) string
	version func(T) int64
	name    func(T) string
}

// change is one update or delete of a resource row.
type change[T any] struct {
	ID              string
	ExpectedVersion int64
	Name            *string // the new name; nil keeps it
	Audit           *store.AppendAdminEventParams
	// apply writes the change to the locked, checked row cur; name is the
	// row's name after the change.
	apply func(cur T, name string) error
}

// nameFree refuses a name that a row of the table already has.
func (r *resource[T]) nameFree(ctx context.Context, tx *writeTx, name string) error {
	id, err := nameOwner(ctx, tx, r.table, name)
	if err != nil {
		return err
	}
	if id != "" {
		return nameTaken(r.kind, name, id)
	}
	return nil
}

// locked reads the row for a change: locked, and at the expected version.
func (r *resource[T]) locked(ctx context.Context, tx *writeTx, c change[T]) (T, error) {
	cur, err := r.load(ctx, tx, c.ID, r.lock(tx.locks))
	if err != nil {
		return cur, err
	}
	return cur, checkVersion(r.kind, c.ID, c.ExpectedVersion, r.version(cur))
}

// update is the update transaction of every versioned resource: lock the
// row, check the expected version, check that a new name is free, apply
// the change, audit it, and read the row back.
func (r *resource[T]) update(ctx context.Context, tx *writeTx, c change[T]) (T, error) {
	cur, err := r.locked(ctx, tx, c)
	if err != nil {
		return cur, err
	}
	name := r.name(cur)
	if c.Name != nil && *c.Name != name {
		if err := r.nameFree(ctx, tx, *c.Name); err != nil {
			return cur, err
		}
		name = *c.Name
	}
	if err := c.apply(cur, name); err != nil {
		return cur, err
	}
	if err := audit(ctx, tx, c.Audit); err != nil {
		return cur, err
	}
	tx.changed(r.kind+".changed", c.ID)
	return r.load(ctx, tx, c.ID, "")
}

// remove is the delete transaction: lock the row, check the expected
// version, apply (the checks and the delete), audit; it returns the row as
// it was.
func (r *resource[T]) remove(ctx context.Context, tx *writeTx, c change[T]) (T, error) {
	cur, err := r.locked(ctx, tx, c)
	if err != nil {
		return cur, err
	}
	if err := c.apply(cur, r.name(cur)); err != nil {
		return cur, err
	}
	tx.changed(r.kind+".changed", c.ID)
	return cur, audit(ctx, tx, c.Audit)
}
