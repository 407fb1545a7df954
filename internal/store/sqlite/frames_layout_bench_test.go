package sqlite

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkFramesLayout measures the group-commit appends of
// BenchmarkGroupCommit on other layouts of the frames table than the
// migrations' (a rowid table, its primary key an index of its own, on
// 4 KiB pages), to keep the reasons they were not adopted reproducible:
//
//   - clustered: a WITHOUT ROWID table keyed by (conversation_id,
//     sequence), one B-tree instead of the table and its key's index.
//     Appends of many conversations at once then land all over the
//     table's leaves (the rowid table appends its rows at its end, and
//     only the narrow index entries scatter), so a commit writes more
//     pages to the WAL: more CPU per append, small and 8 KiB frames alike.
//   - pages8k, pages16k: 8 or 16 KiB pages (a new database's page_size;
//     an 8 KiB frame fits a 16 KiB page whole). Fewer, larger pages per
//     commit: less CPU per small append at 16 KiB, more per 8 KiB one.
func BenchmarkFramesLayout(b *testing.B) {
	line := "a line of model output of ordinary length, streamed."
	layouts := []struct {
		name string
		sql  []string
	}{
		{"rowid", nil},
		{"clustered", []string{clusteredFrames}},
		{"pages8k", pageSize(8192)},
		{"pages16k", pageSize(16384)},
	}
	for _, l := range layouts {
		for _, c := range []struct{ appenders, bytes int }{{1000, 0}, {100, 8192}} {
			text := line
			if c.bytes > 0 {
				text += strings.Repeat("x", c.bytes-len(line))
			}
			b.Run(fmt.Sprintf("%s/appenders=%d/bytes=%d", l.name, c.appenders, max(c.bytes, len(line))), func(b *testing.B) {
				s := mustOpen(b)
				for _, q := range l.sql {
					if _, err := s.w.ExecContext(b.Context(), q); err != nil {
						b.Fatalf("%s: %v", q, err)
					}
				}
				var page, want int
				if err := s.w.QueryRowContext(b.Context(), `PRAGMA page_size`).Scan(&page); err != nil {
					b.Fatal(err)
				}
				if _, err := fmt.Sscanf(l.name, "pages%dk", &want); err == nil && page != want*1024 {
					b.Fatalf("page size %d, want %d KiB", page, want)
				}
				benchAppends(b, s, c.appenders, text)
			})
		}
	}
}

// pageSize changes a new, empty database's page size: only outside WAL
// mode, and the VACUUM rewrites the file with it.
func pageSize(bytes int) []string {
	return []string{`PRAGMA journal_mode = DELETE`, fmt.Sprintf(`PRAGMA page_size = %d`, bytes), `VACUUM`, `PRAGMA journal_mode = WAL`}
}

// clusteredFrames rebuilds the frames table WITHOUT ROWID, with the same
// columns, constraints and triggers as migration 0018's (its triggers
// read from it).
var clusteredFrames = `
CREATE TABLE studio_operator_frames_clustered (
  conversation_id   TEXT NOT NULL REFERENCES studio_operator_conversations(id),
  sequence           INTEGER NOT NULL,
  request_id         TEXT NOT NULL,
  frame_type         TEXT NOT NULL,
  payload_json       JSON NOT NULL,
  created_at         REAL NOT NULL,
  PRIMARY KEY(conversation_id, sequence),
  FOREIGN KEY(conversation_id, request_id) REFERENCES studio_operator_turns(conversation_id, request_id)
) WITHOUT ROWID;
INSERT INTO studio_operator_frames_clustered SELECT * FROM studio_operator_frames;
DROP TABLE studio_operator_frames;
ALTER TABLE studio_operator_frames_clustered RENAME TO studio_operator_frames;
` + func() string {
	b, err := migrationFS.ReadFile("migrations/0018_turn_frame_range.sql")
	if err != nil {
		panic(err)
	}
	s := string(b)
	return s[strings.Index(s, "CREATE TRIGGER studio_operator_search_turn AFTER INSERT"):]
}()
