package httpapi_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/conversations"
	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/metrics"
	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/redact"
	"github.com/studio/operator/internal/redact/redacttest"
	"github.com/studio/operator/internal/spaces"
	"github.com/studio/operator/internal/store"
	"github.com/studio/operator/internal/store/postgres"
	"github.com/studio/operator/internal/store/postgres/pgtest"
	"github.com/studio/operator/internal/store/sqlite"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/testutil"
	"github.com/studio/operator/internal/tools"
	"github.com/studio/operator/internal/turnstats"
	"github.com/studio/operator/internal/webhooks"
)

// The places a model, its provider or a person writes, each driven by an
// instruction "CHANNEL N" naming the shape by its index: the instruction
// itself holds the secret only in the instruction channel.
var secretChannels = []string{
	"text",           // streamed text, split in small deltas
	"model-error",    // a provider's typed error: the turn's error frame (and a turn.failed webhook)
	"plain-error",    // a provider's untyped error
	"tool-name",      // an unknown tool's name
	"call-id",        // a tool call's id
	"read-args",      // a read tool's arguments
	"args-key",       // a secret as a member name of the arguments
	"effect-params",  // a navigate effect's parameters
	"prefill-values", // a prefill effect's values
	"command-args",   // a command's arguments: a proposal
	"command-key",    // a secret as a member name of a command
	"instruction",    // the person's instruction
	"title",          // the conversation's title, set by the person
	"run-error",      // a playbook run's failure: run.error (and a run.failed webhook)
	"run-output",     // a playbook run's output
}

// secretModel writes the corpus through every channel.
type secretModel struct{ corpus *[]redacttest.Shape }

func (secretModel) Name() string { return "secrets" }

func (m secretModel) Stream(_ context.Context, req model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		fields := strings.Fields(req.CurrentInstruction() + " x x")
		channel := fields[0]
		i, err := strconv.Atoi(fields[1])
		if err != nil || i < 0 || i >= len(*m.corpus) || channel == "instruction" {
			yield(model.Event{Kind: model.EventText, Text: "hello"}, nil)
			return
		}
		if len(req.CurrentToolResults()) > 0 { // after a tool: finish
			yield(model.Event{Kind: model.EventText, Text: "done."}, nil)
			return
		}
		s := (*m.corpus)[i].Value
		text := func(t string) bool {
			for len(t) > 0 { // deltas of five bytes: secrets cross them
				k := min(5, len(t))
				if !yield(model.Event{Kind: model.EventText, Text: t[:k]}, nil) {
					return false
				}
				t = t[k:]
			}
			return true
		}
		call := func(id, name, args string) {
			yield(model.Event{Kind: model.EventToolCall, ToolCall: model.ToolCall{ID: id, Name: name, Arguments: []byte(args)}}, nil)
		}
		quoted, _ := json.Marshal(s)
		switch channel {
		case "text", "run-output":
			text("Here it is: " + s + " — keep it safe.\n")
		case "model-error", "run-error":
			yield(model.Event{}, protocol.Errorf(protocol.ModelFailure, "upstream rejected the request: %s (HTTP 401)", s).With("upstream", s))
		case "plain-error":
			yield(model.Event{}, fmt.Errorf("POST https://api.example/v1: %s", s))
		case "tool-name":
			call("call_1", "run_"+s, `{}`)
		case "call-id":
			call("call_"+s, "list_runs", `{}`)
		case "read-args":
			call("call_1", "list_runs", `{"playbook":`+string(quoted)+`}`)
		case "args-key":
			call("call_1", "list_runs", `{`+string(quoted)+`:1}`)
		case "effect-params":
			call("call_1", "navigate", `{"space":"library","params":{"q":`+string(quoted)+`}}`)
		case "prefill-values":
			call("call_1", "prefill_form", `{"form":"playbook","values":{"description":`+string(quoted)+`}}`)
		case "command-args":
			call("call_1", "create_playbook", `{"name":"leak","prompt":`+string(quoted)+`}`)
		case "command-key":
			call("call_1", "create_playbook", `{"name":"leak","prompt":"p",`+string(quoted)+`:"x"}`)
		}
	}
}

// corpusBackend opens the store a corpus run writes to, and reads back
// every byte it keeps.
type corpusBackend struct {
	name  string
	open  func(t *testing.T) store.Store
	bytes func(t *testing.T) map[string][]byte
}

// Every family of the secrets corpus through every channel, on SQLite and
// on PostgreSQL; then no frame, proposal, effect, audit row, search
// document, run, log line, metric, webhook body or byte of the database
// (the SQLite files, every PostgreSQL table) holds any of them.
func TestSecretsCorpusNeverStored(t *testing.T) {
	t.Parallel()
	redacttest.Register() // as cmd/studio does with its own
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		runSecretsCorpus(t, corpusBackend{name: "sqlite",
			open: func(t *testing.T) store.Store {
				st, err := sqlite.Open(filepath.Join(dir, "studio.db"))
				if err != nil {
					t.Fatal(err)
				}
				return st
			},
			bytes: func(t *testing.T) map[string][]byte {
				out := map[string][]byte{}
				entries, _ := os.ReadDir(dir)
				for _, e := range entries { // studio.db, and its -wal and -shm
					b, err := os.ReadFile(filepath.Join(dir, e.Name()))
					if err != nil {
						t.Fatal(err)
					}
					out["file "+e.Name()] = b
				}
				return out
			}})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		srv := pgtest.New(t)
		url := srv.NewDatabase(t, "")
		runSecretsCorpus(t, corpusBackend{name: "postgres",
			open: func(t *testing.T) store.Store {
				st, err := postgres.Open(t.Context(), url)
				if err != nil {
					t.Fatal(err)
				}
				return st
			},
			bytes: func(t *testing.T) map[string][]byte { return postgresTables(t, url) }})
	})
}

// postgresTables is the text of every row of every table of the database.
func postgresTables(t *testing.T, url string) map[string][]byte {
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tables, err := db.QueryContext(t.Context(), `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for tables.Next() {
		var n string
		if err := tables.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	tables.Close()
	out := map[string][]byte{}
	for _, n := range names {
		rows, err := db.QueryContext(t.Context(), `SELECT t::text FROM `+n+` t`)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for rows.Next() {
			var row string
			if err := rows.Scan(&row); err != nil {
				t.Fatal(err)
			}
			b.WriteString(row)
			b.WriteByte('\n')
		}
		rows.Close()
		out["table "+n] = []byte(b.String())
	}
	if len(out) < 10 {
		t.Fatalf("only %d tables", len(out))
	}
	return out
}

func runSecretsCorpus(t *testing.T, be corpusBackend) {
	st := be.open(t)
	if _, err := st.(interface {
		Migrate(context.Context, time.Time) (int, error)
	}).Migrate(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	log := slog.New(redact.Handler(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	reg := metrics.New(metrics.Build{Version: "test"})
	corpus := new([]redacttest.Shape)
	p := metrics.InstrumentProvider(secretModel{corpus: corpus}, "secret", reg)
	svc, err := studio.New(studio.Config{Store: st, Provider: p, ShutdownGrace: time.Millisecond, Logger: log, Observer: reg})
	if err != nil {
		t.Fatal(err)
	}
	recent := turnstats.New(1024, nil)
	coord := coordinator.New(coordinator.Config{Store: st, Provider: p, ShutdownGrace: time.Millisecond, Observer: recent,
		TextFlush: time.Millisecond, Tools: tools.Default(svc, spaces.Default, time.Now), Logger: log, Commands: svc})
	svc.SettleProposalsWith(coord)
	if err := coord.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A webhook receiver for the events a failing turn or run sends.
	var hookMu sync.Mutex
	var hookBodies bytes.Buffer
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hookMu.Lock()
		hookBodies.Write(b)
		hookBodies.WriteByte('\n')
		hookMu.Unlock()
	}))
	hookSecret, _ := webhooks.NewSecret()
	if _, err := st.CreateWebhook(context.Background(), store.CreateWebhookParams{ID: "wh_corpus", URL: receiver.URL,
		Events: store.WebhookEvents, Format: store.FormatStandard, Secret: hookSecret, CreatedBy: "owner", Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	hooksCtx, stopHooks := context.WithCancel(context.Background())
	hooksDone := make(chan struct{})
	hooks := webhooks.New(webhooks.Config{Store: st, Instance: "corpus", Poll: 50 * time.Millisecond, Logger: log})
	go func() { defer close(hooksDone); hooks.Run(hooksCtx) }()

	api := httpapi.New(withEngine(httpapi.Config{Token: testToken, App: svc, Logger: log, Metrics: reg, Recent: recent}, coord, conversations.New(conversations.Config{Store: st, Engine: coord})))
	srv := httptest.NewServer(api.Observed())
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		api.Close()
		srv.Close()
		coord.Shutdown(context.Background())
		svc.Stop(context.Background())
		stopHooks()
		<-hooksDone
		receiver.Close()
	}
	t.Cleanup(func() { stop(); st.Close() })
	client := apiclient.New(srv.URL, testToken, srv.Client())
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	call := func(method, path, body string) []byte {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return b
	}
	call("POST", "/api/app/playbooks", `{"name":"corpus-fail","prompt":"run-error {{input}}"}`)
	call("POST", "/api/app/playbooks", `{"name":"corpus-out","prompt":"run-output {{input}}"}`)

	// A real stream ticket is one of the shapes.
	first, err := client.CreateConversation(ctx, protocol.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	tk, err := client.CreateTicket(ctx, protocol.StreamTicketRequest{ConversationID: first.ID})
	if err != nil {
		t.Fatal(err)
	}
	whsec, _ := webhooks.NewSecret()
	*corpus = redacttest.Families(httpapi.NewToken(), tk.Ticket, whsec)

	// The turns: one conversation per shape, one turn per channel; a few
	// shapes at a time.
	convs := make([]string, len(*corpus))
	for i := range *corpus {
		c, err := client.CreateConversation(ctx, protocol.CreateConversationRequest{})
		if err != nil {
			t.Fatal(err)
		}
		convs[i] = c.ID
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for range corpusConcurrency {
		wg.Go(func() {
			for i := range work {
				if err := corpusTurns(ctx, client, convs[i], i, (*corpus)[i]); err != nil {
					t.Errorf("%s: %v", (*corpus)[i].Family, err)
				}
			}
		})
	}
	for i := range *corpus {
		work <- i
	}
	close(work)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// The runs.
	var runs []string
	for i := range *corpus {
		for _, pb := range []string{"corpus-fail", "corpus-out"} {
			var run struct{ ID string }
			if err := json.Unmarshal(call("POST", "/api/app/runs", fmt.Sprintf(`{"playbook":%q,"input":"%d"}`, pb, i)), &run); err != nil || run.ID == "" {
				t.Fatalf("launch: %v %+v", err, run)
			}
			runs = append(runs, run.ID)
		}
	}
	for _, id := range runs {
		testutil.Eventually(t, func() bool {
			var run struct{ Status string }
			_ = json.Unmarshal(call("GET", "/api/app/runs/"+id, ""), &run)
			return run.Status != "queued" && run.Status != "running"
		}, "run", id, "ends")
	}
	// Every failed turn and run was posted.
	testutil.Eventually(t, func() bool {
		hookMu.Lock()
		defer hookMu.Unlock()
		return strings.Count(hookBodies.String(), `"type":"run.failed"`) >= len(*corpus) &&
			strings.Count(hookBodies.String(), `"type":"turn.failed"`) >= len(*corpus)
	}, "the webhook deliveries of every failed turn and run")

	// What the daemon holds and shows.
	sinks := map[string][]byte{}
	for i, id := range convs {
		sinks[fmt.Sprintf("frames of conversation %d", i)] = call("GET", "/api/operator/conversations/"+id+"?limit=1000", "")
	}
	sinks["conversations"] = call("GET", "/api/operator/conversations?limit=200", "")
	sinks["proposals"] = call("GET", "/api/operator/proposals", "")
	sinks["runs"] = call("GET", "/api/app/runs?limit=200", "")
	sinks["audit"] = call("GET", "/api/app/audit?limit=200", "")
	sinks["metrics"] = call("GET", "/metrics", "")
	sinks["operator activity"] = call("GET", "/api/app/system/operator", "")
	stop()
	maps.Copy(sinks, be.bytes(t))
	sinks["logs"] = []byte(logs.String())
	hookMu.Lock()
	sinks["webhook bodies"] = hookBodies.Bytes()
	hookMu.Unlock()

	// The corpus was really written: each channel left its mark.
	var all strings.Builder
	for _, b := range sinks {
		all.Write(b)
	}
	for _, mark := range []string{"[redacted]", "secret_in_arguments", "upstream rejected the request", "unknown tool", `"type":"run.failed"`} {
		if !strings.Contains(all.String(), mark) {
			t.Errorf("nothing says %q: the corpus did not go through", mark)
		}
	}

	var lines []string
	failed := 0
	for _, s := range *corpus {
		var where []string
		for name, b := range sinks {
			if bytes.Contains(b, []byte(s.Needle)) {
				where = append(where, name)
			}
		}
		sort.Strings(where)
		status := "held"
		if len(where) > 0 {
			failed++
			status = "FOUND in " + strings.Join(where, ", ")
			t.Errorf("%s: %s (%s) found in: %s", be.name, s.Family, s.Needle, strings.Join(where, ", "))
			for _, name := range where {
				b := string(sinks[name])
				i := strings.Index(b, s.Needle)
				t.Logf("  %s: …%s…", name, b[max(0, i-300):min(len(b), i+100)])
			}
		}
		lines = append(lines, fmt.Sprintf("%-36s %s", s.Family, status))
	}
	if len(*corpus) < 40 {
		t.Errorf("the corpus has %d families, fewer than 40", len(*corpus))
	}
	t.Logf("secrets corpus on %s: %d families × %d channels, %d sinks scanned, %d families found stored\n%s",
		be.name, len(*corpus), len(secretChannels), len(sinks), failed, strings.Join(lines, "\n"))
}

// corpusConcurrency is how many shapes go through their channels at once.
const corpusConcurrency = 6

// corpusTurns sends one shape through every channel of a conversation.
func corpusTurns(ctx context.Context, client *apiclient.Client, convID string, i int, sh redacttest.Shape) error {
	for _, ch := range secretChannels {
		switch {
		case strings.HasPrefix(ch, "run-"):
			continue
		case ch == "title":
			title := "deploy notes " + sh.Value
			if len(title) > 200 { // the longest title there is
				title = sh.Value
			}
			if _, err := client.UpdateConversation(ctx, convID, protocol.UpdateConversationRequest{Title: &title}); err != nil {
				return fmt.Errorf("title: %w", err)
			}
			continue
		}
		instruction := fmt.Sprintf("%s %d", ch, i)
		if ch == "instruction" {
			instruction += " my key is " + sh.Value
		}
		page, err := client.GetConversation(ctx, convID, 0, 1)
		if err != nil {
			return err
		}
		acc, err := client.SubmitTurn(ctx, convID, turnRequest(instruction, page.LatestSequence))
		if err != nil {
			return fmt.Errorf("%s: %w", ch, err)
		}
		if err := settleTurn(ctx, client, convID, acc.RequestID); err != nil {
			return fmt.Errorf("%s: %w", ch, err)
		}
	}
	return nil
}

// settleTurn waits for a turn's done frame, denying what it proposes (a
// secret that became a proposal is found by the scan all the same).
func settleTurn(ctx context.Context, client *apiclient.Client, convID, requestID string) error {
	for {
		var open string
		err := client.Stream(ctx, convID, 0, func(f protocol.Frame) error {
			if f.RequestID != requestID {
				return nil
			}
			if c, ok := f.Payload.(protocol.ConfirmationPayload); ok && c.State == protocol.ConfirmationRequired {
				open = c.ProposalID
			}
			if c, ok := f.Payload.(protocol.ConfirmationPayload); ok && c.State == protocol.ConfirmationDenied && c.ProposalID == open {
				open = ""
			}
			if f.Type == protocol.FrameDone || open != "" {
				return apiclient.ErrStopStream
			}
			return nil
		})
		if err != nil && !errors.Is(err, apiclient.ErrStopStream) {
			return fmt.Errorf("turn %s: %w", requestID, err)
		}
		if open == "" {
			return nil
		}
		if _, err := client.Deny(ctx, convID, open); err != nil {
			return fmt.Errorf("deny %s: %w", open, err)
		}
	}
}
