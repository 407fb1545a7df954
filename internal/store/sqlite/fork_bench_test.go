package sqlite

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/store"
)

// fillConversation writes a conversation of n complete turns of ten frames
// each (the instruction, eight text deltas, done) straight into the
// database, in one statement per table: what a long-lived conversation
// looks like, without a transaction per frame.
func fillConversation(tb testing.TB, s *Store, turns int) string {
	tb.Helper()
	ctx := context.Background()
	c, err := s.CreateConversation(ctx, store.CreateConversationParams{ID: uuid.NewString(), Now: time.Unix(1, 0)})
	if err != nil {
		tb.Fatal(err)
	}
	frames := turns * 10
	for _, q := range []string{
		`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ? - 1)
		 INSERT INTO studio_operator_turns (request_id, conversation_id, instruction, context_json, context_hash, status, created_at, started_at, ended_at)
		 SELECT ?2 || '-' || i, ?2, 'question ' || i, '{"snapshot":{"space":"mission","route":"/"}}', 'h', 'completed', i, i, i FROM n`,
		`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ? * 10 - 1)
		 INSERT INTO studio_operator_frames (conversation_id, sequence, request_id, frame_type, payload_json, created_at)
		 SELECT ?2, i + 1, ?2 || '-' || (i / 10),
		        CASE i % 10 WHEN 9 THEN 'done' ELSE 'text' END,
		        CASE i % 10
		          WHEN 0 THEN '{"content":"question ' || i || '","format":"plain","role":"user"}'
		          WHEN 9 THEN '{"outcome":"completed","lastSequence":' || (i + 1) || '}'
		          ELSE '{"content":"word' || i || ' ","format":"markdown","role":"assistant"}' END,
		        i FROM n`,
	} {
		if _, err := s.w.ExecContext(ctx, q, turns, c.ID); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := s.w.ExecContext(ctx, `UPDATE studio_operator_conversations SET next_sequence = ? WHERE id = ?`, frames+1, c.ID); err != nil {
		tb.Fatal(err)
	}
	return c.ID
}

// BenchmarkFork forks conversations of 10 000 and 100 000 frames. The copy
// runs inside the database; what the process allocates grows with the
// number of turns (their new ids, a page of 500 at a time), not with the
// frames and their payloads: compare B/op, the Go heap in use (heap-MB)
// and the process's peak resident memory (peak-rss-MB, which includes
// SQLite's own allocations; run one size per process to read it) between
// the two sizes.
func BenchmarkFork(b *testing.B) {
	for _, turns := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("frames=%d", turns*10), func(b *testing.B) {
			s := mustOpen(b)
			src := fillConversation(b, s, turns)
			ctx := context.Background()
			var peak uint64
			b.ReportAllocs()
			for b.Loop() {
				c, err := s.ForkConversation(ctx, store.ForkConversationParams{SourceID: src, ID: uuid.NewString(),
					NewRequestID: uuid.NewString, Now: time.Unix(2, 0)})
				if err != nil {
					b.Fatal(err)
				}
				if c.LastSequence() != int64(turns*10) {
					b.Fatalf("fork has %d frames", c.LastSequence())
				}
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				peak = max(peak, m.HeapInuse)
			}
			b.ReportMetric(float64(peak)/(1<<20), "heap-MB")
			if hwm := peakRSS(); hwm > 0 {
				b.ReportMetric(hwm, "peak-rss-MB")
			}
		})
	}
}

func TestForkOfALongConversation(t *testing.T) {
	t.Parallel()
	s := mustOpen(t)
	src := fillConversation(t, s, 1_200) // more than two pages of turn ids
	c, err := s.ForkConversation(t.Context(), store.ForkConversationParams{SourceID: src, ID: uuid.NewString(),
		UpToSequence: ptrInt(11_000), NewRequestID: uuid.NewString, Now: time.Unix(2, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if c.LastSequence() != 11_000 || c.ForkedFrom.CopiedThrough != 11_000 {
		t.Fatalf("fork = %+v", c)
	}
	var turns, docs int
	if err := s.r.QueryRow(`SELECT COUNT(*) FROM studio_operator_turns WHERE conversation_id = ?`, c.ID).Scan(&turns); err != nil {
		t.Fatal(err)
	}
	if err := s.r.QueryRow(`SELECT COUNT(*) FROM studio_operator_search_docs WHERE conversation_id = ? AND request_id <> ''`, c.ID).Scan(&docs); err != nil {
		t.Fatal(err)
	}
	if turns != 1_100 || docs != 1_100 {
		t.Fatalf("fork turns %d, search documents %d, want 1100", turns, docs)
	}
	frames, err := s.ListFrames(t.Context(), store.ListFramesParams{ConversationID: c.ID, AfterSequence: 10_990, Limit: 20})
	if err != nil || len(frames) != 10 || string(frames[9].Payload) != `{"outcome":"completed","lastSequence":11000}` {
		t.Fatalf("last frames: %d %v", len(frames), err)
	}
}

func ptrInt(n int64) *int64 { return &n }

// peakRSS is the process's peak resident set in MiB (Linux), 0 elsewhere.
func peakRSS() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			if err == nil {
				return kb / 1024
			}
		}
	}
	return 0
}
