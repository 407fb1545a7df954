// Package paging is the one way list queries page: a limit checked once, a
// query for limit+1 rows, and an opaque cursor that carries the sort key of
// the page's last row, tagged with the list it belongs to so that a cursor
// of one list is refused by another. Clients see base64url JSON.
package paging

import (
	"encoding/base64"

	"github.com/studio/operator/internal/protocol"
)

// Page sizes of list queries.
const (
	DefaultLimit = 50
	MaxLimit     = 200
)

// Cursor is the sort key of the previous page's last row.
type Cursor struct {
	List string  `json:"l"`
	Name string  `json:"n,omitempty"`
	At   float64 `json:"t,omitzero"`
	ID   string  `json:"i,omitempty"`
	Seq  int64   `json:"s,omitzero"`
}

// Encode is the cursor as clients see it.
func (c Cursor) Encode() string {
	b, _ := protocol.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Decode reads a client's cursor for list; "" is the first page.
func Decode(s, list string) (Cursor, error) {
	var c Cursor
	if s == "" {
		return c, nil
	}
	bad := protocol.Errorf(protocol.Validation, "cursor is not valid for this list").With("field", "cursor")
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return c, bad
	}
	if err := protocol.Unmarshal(raw, &c); err != nil || c.List != list {
		return c, bad
	}
	return c, nil
}

// Limit checks a requested page size: 0 is DefaultLimit, and anything
// outside 1..MaxLimit is validation.
func Limit(n int) (int, error) {
	switch {
	case n == 0:
		return DefaultLimit, nil
	case n < 0 || n > MaxLimit:
		return 0, protocol.Errorf(protocol.Validation, "limit must be from 1 to %d", MaxLimit).With("field", "limit")
	}
	return n, nil
}

// Cut makes a page of rows queried with limit+1: the first limit rows as
// views (never nil, so an empty page encodes as []), and the cursor of the
// next page when there was a row more.
func Cut[Row, View any](rows []Row, limit int, view func(Row) View, next func(Row) Cursor) ([]View, string) {
	cursor := ""
	if len(rows) > limit {
		rows = rows[:limit]
		cursor = next(rows[limit-1]).Encode()
	}
	out := make([]View, 0, len(rows))
	for _, r := range rows {
		out = append(out, view(r))
	}
	return out, cursor
}
