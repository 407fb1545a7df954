package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/studio/operator/internal/apiclient"
	"github.com/studio/operator/internal/conversations"
	"github.com/studio/operator/internal/coordinator"
	"github.com/studio/operator/internal/httpapi"
	"github.com/studio/operator/internal/metrics"
	"github.com/studio/operator/internal/model"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/spaces"
	"github.com/studio/operator/internal/store/sqlite"
	"github.com/studio/operator/internal/studio"
	"github.com/studio/operator/internal/tools"
	"github.com/studio/operator/internal/turnstats"
)

// secretShape is one family of secrets: how it is written, and the part of
// it that must never be found anywhere (for a URL, its password).
type secretShape struct {
	family, value, needle string
}

// secretCorpus is ten families of secret shapes, made up.
var secretCorpus = []secretShape{
	{"openai", "sk-proj-Q7wErTyUiOp0AsDfGhJkL1ZxCvBnM2qW3eR4t", "Q7wErTyUiOp0AsDfGhJkL1"},
	{"anthropic", "sk-ant-api03-ZyXwVuTsRqPoNmLkJiHgFeDcBa0123456789", "ZyXwVuTsRqPoNmLkJiHg"},
	{"openai glued", "run_sk-LmNoPqRsTuVwXyZ0123456789AbCdEf", "LmNoPqRsTuVwXyZ0123456789"},
	{"url password", "https://admin:Hunter2Secret@db.internal.example/prod", "Hunter2Secret"},
	{"aws key id", "AKIAZ7QWERTYUIOPASDF", "AKIAZ7QWERTYUIOPASDF"},
	{"aws secret", "aws_secret_access_key=wJalrXUtnFEMIzK7MDENGzbPxRfiCYzEXAMPLEKEY", "wJalrXUtnFEMIzK7MDENG"},
	{"github", "ghp_Zq9aZ8bY7cX6dW5eV4fU3gT2hS1iR0jQ9kP8", "Zq9aZ8bY7cX6dW5eV4fU3gT2"},
	{"slack", "xoxb-1234567890-0987654321-QwErTyUiOpAsDfGhJkLzXcVb", "QwErTyUiOpAsDfGhJkLzXcVb"},
	{"stripe", "sk_live_51HxQwErTyUiOpAsDfGhJkLz", "51HxQwErTyUiOpAsDfGhJkLz"},
	{"jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjb3JwdXMtdGVzdCJ9.QwErTyUiOpAsDfGhJkLzXcVbNm0123456789", "QwErTyUiOpAsDfGhJkLzXcVbNm"},
	{"password", "password: CorrectHorseBatteryStaple9", "CorrectHorseBatteryStaple9"},
}

// The places a model or its provider writes, each driven by an
// instruction "CHANNEL N" naming the shape by its index: the instruction
// itself never holds the secret.
var secretChannels = []string{
	"text",          // streamed text, split in small deltas
	"model-error",   // a provider's typed error: the turn's error frame
	"plain-error",   // a provider's untyped error
	"tool-name",     // an unknown tool's name
	"call-id",       // a tool call's id
	"read-args",     // a read tool's arguments
	"effect-params", // a navigate effect's parameters
	"command-args",  // a command's arguments: a proposal
	"run-error",     // a playbook run's failure: run.error
	"run-output",    // a playbook run's output
}

// secretModel writes the corpus through every channel.
type secretModel struct{}

func (secretModel) Name() string { return "secrets" }

func (secretModel) Stream(_ context.Context, req model.Request) iter.Seq2[model.Event, error] {
	return func(yield func(model.Event, error) bool) {
		channel, n, _ := strings.Cut(strings.TrimSpace(req.CurrentInstruction()), " ")
		i, err := strconv.Atoi(strings.Fields(n + " x")[0])
		if err != nil || i < 0 || i >= len(secretCorpus) {
			yield(model.Event{Kind: model.EventText, Text: "hello"}, nil)
			return
		}
		if len(req.CurrentToolResults()) > 0 { // after a tool: finish
			yield(model.Event{Kind: model.EventText, Text: "done."}, nil)
			return
		}
		s := secretCorpus[i].value
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
		case "effect-params":
			call("call_1", "navigate", `{"space":"library","params":{"q":`+string(quoted)+`}}`)
		case "command-args":
			call("call_1", "create_playbook", `{"name":"leak","prompt":`+string(quoted)+`}`)
		}
	}
}

// Ten secret shapes through every place a model or provider writes; then
// no frame, audit row, log line, metric or byte of the database files
// holds any of them.
func TestSecretsCorpusNeverStored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "studio.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Migrate(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := metrics.New(metrics.Build{Version: "test"})
	p := metrics.InstrumentProvider(secretModel{}, "secret", reg)
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
	api := httpapi.New(httpapi.Config{Coordinator: coord, Conversations: conversations.New(conversations.Config{Store: st, Engine: coord}), Token: testToken, App: svc, Logger: log, Metrics: reg, Recent: recent})
	srv := httptest.NewServer(api.Observed())
	t.Cleanup(func() {
		api.Close()
		srv.Close()
		coord.Shutdown(context.Background())
		svc.Stop(context.Background())
		st.Close()
	})
	client := apiclient.New(srv.URL, testToken, srv.Client())
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
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

	// The turns: one conversation per shape, one turn per channel.
	var convs []string
	for i := range secretCorpus {
		c, err := client.CreateConversation(ctx, protocol.CreateConversationRequest{})
		if err != nil {
			t.Fatal(err)
		}
		convs = append(convs, c.ID)
		for _, ch := range secretChannels {
			if strings.HasPrefix(ch, "run-") {
				continue
			}
			page, err := client.GetConversation(ctx, c.ID, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			acc, err := client.SubmitTurn(ctx, c.ID, turnRequest(fmt.Sprintf("%s %d", ch, i), page.LatestSequence))
			if err != nil {
				t.Fatalf("%s %d: %v", ch, i, err)
			}
			waitTurn(t, ctx, client, c.ID, acc.RequestID)
		}
	}
	// The runs.
	var runs []string
	for i := range secretCorpus {
		for _, pb := range []string{"corpus-fail", "corpus-out"} {
			var run struct{ ID string }
			if err := json.Unmarshal(call("POST", "/api/app/runs", fmt.Sprintf(`{"playbook":%q,"input":"%d"}`, pb, i)), &run); err != nil || run.ID == "" {
				t.Fatalf("launch: %v %+v", err, run)
			}
			runs = append(runs, run.ID)
		}
	}
	for _, id := range runs {
		for {
			var run struct{ Status string }
			_ = json.Unmarshal(call("GET", "/api/app/runs/"+id, ""), &run)
			if run.Status != "queued" && run.Status != "running" {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("run %s never ended", id)
			case <-time.After(10 * time.Millisecond): // a poll, not an assertion
			}
		}
	}

	// What the daemon holds and shows.
	sinks := map[string][]byte{}
	for i, id := range convs {
		sinks[fmt.Sprintf("frames of conversation %d", i)] = call("GET", "/api/operator/conversations/"+id+"?limit=1000", "")
	}
	sinks["proposals"] = call("GET", "/api/operator/proposals", "")
	sinks["runs"] = call("GET", "/api/app/runs?limit=100", "")
	sinks["audit"] = call("GET", "/api/app/audit?limit=200", "")
	sinks["metrics"] = call("GET", "/metrics", "")
	sinks["operator activity"] = call("GET", "/api/app/system/operator", "")
	coord.Shutdown(context.Background())
	svc.Stop(context.Background())
	entries, _ := os.ReadDir(dir)
	for _, e := range entries { // studio.db, and its -wal and -shm
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sinks["file "+e.Name()] = b
	}
	sinks["logs"] = []byte(logs.String())

	// The corpus was really written: each channel left its mark.
	all := string(sinks["logs"])
	for _, b := range sinks {
		all += string(b)
	}
	for _, mark := range []string{"[redacted]", "secret_in_arguments", "upstream rejected the request"} {
		if !strings.Contains(all, mark) {
			t.Errorf("nothing says %q: the corpus did not go through", mark)
		}
	}

	type tally struct{ tried, held, failed int }
	counts := map[string]*tally{}
	for _, s := range secretCorpus {
		c := &tally{tried: len(secretChannels)}
		var where []string
		for name, b := range sinks {
			if strings.Contains(string(b), s.needle) {
				where = append(where, name)
			}
		}
		sort.Strings(where)
		if len(where) > 0 {
			c.failed = c.tried
			t.Errorf("%s (%s) found in: %s", s.family, s.needle, strings.Join(where, ", "))
			for _, name := range where {
				b := string(sinks[name])
				i := strings.Index(b, s.needle)
				t.Logf("  %s: …%s…", name, b[max(0, i-300):min(len(b), i+100)])
			}
		} else {
			c.held = c.tried
		}
		counts[s.family] = c
	}
	var lines []string
	for _, s := range secretCorpus {
		c := counts[s.family]
		lines = append(lines, fmt.Sprintf("%-13s tried %d held %d failed %d", s.family, c.tried, c.held, c.failed))
	}
	t.Logf("secrets corpus: %d shapes × %d channels, %d sinks scanned\n%s", len(secretCorpus), len(secretChannels), len(sinks), strings.Join(lines, "\n"))
}

// waitTurn waits for a turn's done frame.
func waitTurn(t *testing.T, ctx context.Context, client *apiclient.Client, convID, requestID string) {
	t.Helper()
	err := client.Stream(ctx, convID, 0, func(f protocol.Frame) error {
		if f.RequestID == requestID && f.Type == protocol.FrameDone {
			return apiclient.ErrStopStream
		}
		return nil
	})
	if err != nil && !errors.Is(err, apiclient.ErrStopStream) {
		t.Fatalf("turn %s: %v", requestID, err)
	}
}
