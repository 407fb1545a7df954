package postgres

import "testing"

func TestRebind(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`SELECT 1`, `SELECT 1`},
		{`SELECT a FROM t WHERE id = ?`, `SELECT a FROM t WHERE id = $1`},
		{`UPDATE t SET a = ?, b = ? WHERE id = ? AND c IN (?, ?)`, `UPDATE t SET a = $1, b = $2 WHERE id = $3 AND c IN ($4, $5)`},
		{`SELECT '?', "a?b" FROM t WHERE x = ?`, `SELECT '?', "a?b" FROM t WHERE x = $1`},
		{`SELECT 'it''s ?' WHERE x = ?`, `SELECT 'it''s ?' WHERE x = $1`},
		{`WHERE lower(name) LIKE ? ESCAPE '\' OR lower(d) LIKE ? ESCAPE '\'`, `WHERE lower(name) LIKE $1 ESCAPE '\' OR lower(d) LIKE $2 ESCAPE '\'`},
	} {
		if got := rebind(tc.in); got != tc.want {
			t.Errorf("rebind(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
