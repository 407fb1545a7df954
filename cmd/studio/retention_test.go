package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/studio/operator/internal/store"
)

func TestParseRetention(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"90d", 90 * 24 * time.Hour, true}, {"1d", 24 * time.Hour, true}, {"36h", 36 * time.Hour, true},
		{"", 0, true}, {"0", 0, true}, {"off", 0, true},
		{"0d", 0, false}, {"-3d", 0, false}, {"1.5d", 0, false}, {"10m", 0, false}, {"ninety", 0, false}, {"90", 0, false},
	} {
		got, err := parseRetention(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseRetention(%q) = %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
	r := retentionFlag{90 * 24 * time.Hour}
	if r.String() != "90d" {
		t.Fatalf("String = %s", r.String())
	}
}

// TestDoctorCountsWhatRetentionRemoves: doctor reading the database with
// --retention counts the conversations a pass would remove (not the pinned
// one, not the recent one) and prints it.
func TestDoctorCountsWhatRetentionRemoves(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, _, err := openStore(context.Background(), &config{dataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	longAgo := time.Now().Add(-100 * 24 * time.Hour)
	for _, c := range []struct {
		id     string
		at     time.Time
		pinned bool
	}{{"old", longAgo, false}, {"old-pinned", longAgo, true}, {"recent", time.Now(), false}} {
		if _, err := st.CreateConversation(t.Context(), store.CreateConversationParams{ID: c.id, Now: c.at}); err != nil {
			t.Fatal(err)
		}
		if c.pinned {
			if _, err := st.UpdateConversation(t.Context(), store.UpdateConversationParams{ID: c.id, Pinned: ptrTo(true), Now: c.at}); err != nil {
				t.Fatal(err)
			}
		}
	}
	st.Close()
	cfg := &config{dataDir: dir, addr: "127.0.0.1:1"}
	rep, source, _, err := doctorReport(t.Context(), cfg, true, 90*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Database.Retention; r == nil || r.Removable != 1 {
		t.Fatalf("retention report = %+v, want 1 removable", r)
	}
	var out bytes.Buffer
	printDoctor(&out, rep, source)
	if want := "retention:  conversations unused for 90d are removed; 1 would be now"; !strings.Contains(out.String(), want) {
		t.Fatalf("output lacks %q:\n%s", want, out.String())
	}
	if rep, _, _, err := doctorReport(t.Context(), cfg, true, 0); err != nil || rep.Database.Retention != nil {
		t.Fatalf("without retention: %+v, %v", rep.Database.Retention, err)
	}
}

func ptrTo[T any](v T) *T { return &v }
