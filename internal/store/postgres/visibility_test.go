package postgres

import (
	"context"
	"io"
	"net"
	neturl "net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/storetest"
	"github.com/studio/operator/internal/testutil"
)

// failAtCommit makes every commit that stored a frame whose payload holds
// marker fail, at COMMIT itself (a deferred constraint trigger): the
// frame's statement and its notification were accepted, its commit is not.
func failAtCommit(t *testing.T, s *Store, marker string) {
	t.Helper()
	for _, q := range []string{
		`CREATE FUNCTION refuse_marked() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.payload_json::text LIKE '%` + marker + `%' THEN
				RAISE EXCEPTION 'refused at commit';
			END IF;
			RETURN NULL;
		END $$`,
		`CREATE CONSTRAINT TRIGGER refuse_marked AFTER INSERT ON studio_operator_frames
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_marked()`,
	} {
		if _, err := s.db.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFramesNotVisibleBeforeCommit: a batched append's frames travel in
// the same round trip as its COMMIT, with their notification; when that
// COMMIT fails, no other process sees them (neither a subscriber of
// another Store nor a bare listener of the channels), the append fails,
// and the next append takes the sequence the failed one did not keep, so
// the streams see no gap and no duplicate.
func TestFramesNotVisibleBeforeCommit(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	a, b := openWith(t, url, Options{appendWriters: 1}), openAt(t, url)
	ctx := t.Context()
	turn := storetest.ActiveTurns(t, a, 1, storetest.Epoch)[0]
	const marker = "refused-at-commit"
	failAtCommit(t, a, marker)
	sub := b.Subscribe(turn.ConversationID)
	defer sub.Close()
	after := b.getConv(t, turn.ConversationID).LastSequence()

	// A bare listener: every notification of both channels, in order.
	lc, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close(ctx)
	for _, ch := range []string{framesChannel, channel} {
		if _, err := lc.Exec(ctx, "LISTEN "+ch); err != nil {
			t.Fatal(err)
		}
	}
	appendText := func(s string) ([]store.Frame, error) {
		return a.AppendFrames(ctx, store.AppendFramesParams{ConversationID: turn.ConversationID, RequestID: turn.RequestID,
			Frames: []store.NewFrame{{Payload: text(s)}}, Now: storetest.Epoch})
	}
	if fs, err := appendText("this one " + marker); err == nil {
		t.Fatalf("append whose commit fails: stored as %d, want an error", fs[0].Sequence)
	} else if !strings.Contains(err.Error(), "refused at commit") {
		t.Fatalf("append whose commit fails: %v, want the commit's error", err)
	}
	fs, err := appendText("after")
	if err != nil {
		t.Fatal(err)
	}
	if fs[0].Sequence != after+1 {
		t.Fatalf("next append stored at %d, want %d (the failed one's sequence is not kept)", fs[0].Sequence, after+1)
	}

	// The listener's notifications up to the good commit's: none carries
	// the refused frame.
	for seen := false; !seen; {
		wctx, cancel := context.WithTimeout(ctx, testutil.Patience)
		n, err := lc.WaitForNotification(wctx)
		cancel()
		if err != nil {
			t.Fatalf("the good commit's notification never came: %v", err)
		}
		if strings.Contains(n.Payload, marker) {
			t.Fatalf("notified a frame whose commit failed: %s %s", n.Channel, n.Payload)
		}
		seen = n.Channel == framesChannel && strings.Contains(n.Payload, "after")
	}
	// The subscriber of the other Store: the good frame alone, at the
	// cursor's next sequence.
	evs := readTo(t, sub, after, fs[0].Sequence)
	if len(evs) != 1 || strings.Contains(string(evs[0].SSE), marker) || !strings.Contains(string(evs[0].SSE), "after") {
		t.Fatalf("the other Store's stream got %d events, first %q; want the good frame alone", len(evs), evs[0].SSE)
	}
	stored, err := b.ListFrames(ctx, store.ListFramesParams{ConversationID: turn.ConversationID, AfterSequence: after})
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 1 || stored[0].Sequence != fs[0].Sequence {
		t.Fatalf("stored after %d: %d frames, want the good one alone", after, len(stored))
	}
}

// TestConnectionLostWithCommitIsUnknown: the second round trip of a batch
// carries its COMMIT, so a connection lost while it is answered (with no
// word from the server) leaves the batch's outcome unknown: its appends
// fail with a commit of unknown outcome (the caller looks before writing
// again), and never run again on their own, which could store their frames
// twice.
func TestConnectionLostWithCommitIsUnknown(t *testing.T) {
	t.Parallel()
	url := newDatabase(t)
	p := newCutProxy(t, url)
	a := openWith(t, p.url, Options{appendWriters: 1})
	admin := openAt(t, url)
	ctx := t.Context()
	turn := storetest.ActiveTurns(t, a, 1, storetest.Epoch)[0]
	const marker = "slow-to-write"
	// The first frame marked sleeps in its statement (a sequence: not
	// undone by a rollback); an append run again would not.
	for _, q := range []string{
		`CREATE SEQUENCE slept`,
		`CREATE FUNCTION slow_marked() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.payload_json::text LIKE '%` + marker + `%' AND nextval('slept') = 1 THEN
				PERFORM pg_sleep(60);
			END IF;
			RETURN NEW;
		END $$`,
		`CREATE TRIGGER slow_marked BEFORE INSERT ON studio_operator_frames FOR EACH ROW EXECUTE FUNCTION slow_marked()`,
	} {
		if _, err := admin.db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := a.AppendFrames(ctx, store.AppendFramesParams{ConversationID: turn.ConversationID, RequestID: turn.RequestID,
			Frames: []store.NewFrame{{Payload: text(marker)}}, Now: storetest.Epoch})
		done <- err
	}()
	sleeping := func() (pid int) {
		err := admin.db.QueryRowContext(ctx, `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event = 'PgSleep' AND query LIKE '%INSERT INTO studio_operator_frames%'`).Scan(&pid)
		if err != nil {
			return 0
		}
		return pid
	}
	testutil.Eventually(t, func() bool { return sleeping() != 0 }, "the batch's writer sleeping in its frames' statement")
	// The network fails: the client hears nothing from the server.
	pid := sleeping()
	p.cut()
	select {
	case err := <-done:
		if !store.IsCommitUnknown(err) {
			t.Fatalf("append on a connection lost with its COMMIT: err = %v (%T), want a commit of unknown outcome", err, err)
		}
	case <-time.After(testutil.Patience):
		t.Fatal("the append never returned")
	}
	// The server's side of the lost connection holds the conversation's
	// lock until it ends.
	if _, err := admin.db.ExecContext(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AppendFrames(ctx, store.AppendFramesParams{ConversationID: turn.ConversationID, RequestID: turn.RequestID,
		Frames: []store.NewFrame{{Payload: text("after")}}, Now: storetest.Epoch}); err != nil {
		t.Fatal(err)
	}
	fs, err := admin.ListFrames(ctx, store.ListFramesParams{ConversationID: turn.ConversationID})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if strings.Contains(string(f.Payload), marker) {
			t.Fatalf("the frame of the lost commit is stored (%d): it was run again", f.Sequence)
		}
	}
}

// cutProxy forwards TCP connections to a database's server until cut,
// which closes every connection it carries, as a failed network would.
type cutProxy struct {
	url   string // the database's URL through the proxy
	mu    sync.Mutex
	conns []net.Conn
}

func newCutProxy(t *testing.T, dbURL string) *cutProxy {
	t.Helper()
	u, err := neturl.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	u.Host = ln.Addr().String()
	p := &cutProxy{url: u.String()}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go func() { _, _ = io.Copy(c, s); c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
