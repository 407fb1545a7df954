// Package apiclient is the Go client of the daemon's HTTP API: the operator
// protocol (conversations, turns, streams, proposals, effects), the
// application API, principals and webhooks. The studio command line and the
// tests use it; it knows the wire types of package protocol and nothing of
// the server.
package apiclient

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/studio/operator/internal/protocol"
)

// Client is a Go client of the daemon's API, used by the CLI and the tests.
type Client struct {
	BaseURL string // e.g. http://127.0.0.1:8765
	Token   string
	HTTP    *http.Client
	// UserAgent, when set, is sent with every request; the studio command
	// line sends CLIUserAgent + its version, and its changes are audited
	// as the command line's.
	UserAgent string
}

// New returns a client; hc nil means a default client without timeout
// (streams are long-lived; cancel them with the context).
func New(baseURL, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), Token: token, HTTP: hc}
}

// Do sends a JSON request and decodes a JSON answer into out (if non-nil).
// Error answers come back as *protocol.Error.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := protocol.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return c.transportError(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return responseError(resp.StatusCode, data)
	}
	if resp.StatusCode == http.StatusAccepted && strings.HasPrefix(resp.Header.Get("Location"), approvalLocation) {
		ap := &ApprovalPendingError{}
		if err := protocol.Unmarshal(data, &ap.Request); err != nil {
			return fmt.Errorf("decode %s %s: %w", method, path, err)
		}
		return ap
	}
	if out == nil {
		return nil
	}
	if err := protocol.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode %s %s: %w", method, path, err)
	}
	return nil
}

// approvalLocation starts the Location of a direct command's 202 that
// made it an approval request (its proposal).
const approvalLocation = "/api/operator/proposals/"

// ApprovalPendingError is a direct command the daemon did not run: it
// needs a second approver, and became the pending proposal Request, which
// another principal confirms or denies (studio approvals).
type ApprovalPendingError struct {
	Request protocol.ApprovalRequest
}

func (e *ApprovalPendingError) Error() string {
	return fmt.Sprintf("%s (proposal %s, expires %s)", e.Request.Message, e.Request.ID,
		protocol.Time(e.Request.ExpiresAt).UTC().Format(time.RFC3339))
}

// UnreachableError is a request that never reached the daemon: nothing
// listens at the address, or the name does not resolve.
type UnreachableError struct {
	BaseURL string
	Err     error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the daemon at %s: is `studio serve` running? (%v)", e.BaseURL, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// transportError names a failure to connect as an UnreachableError; other
// failures (the context ended, the connection broke mid-answer) stay as
// they are.
func (c *Client) transportError(err error) error {
	var op *net.OpError
	var dns *net.DNSError
	if errors.As(err, &dns) || (errors.As(err, &op) && op.Op == "dial") {
		return &UnreachableError{BaseURL: c.BaseURL, Err: errors.Unwrap(err)}
	}
	return err
}

func responseError(status int, data []byte) error {
	var eb protocol.ErrorBody
	if err := protocol.Unmarshal(data, &eb); err == nil && eb.Error != nil {
		return eb.Error
	}
	return fmt.Errorf("HTTP %d: %s", status, bytes.TrimSpace(data))
}

// CreateConversation creates a conversation.
func (c *Client) CreateConversation(ctx context.Context, req protocol.CreateConversationRequest) (protocol.Conversation, error) {
	var out protocol.Conversation
	return out, c.Do(ctx, http.MethodPost, "/api/operator/conversations", req, &out)
}

// ListConversations pages conversations; status "" lists active and archived.
func (c *Client) ListConversations(ctx context.Context, status, cursor string, limit int) (protocol.ConversationList, error) {
	q := url.Values{}
	if status != "" {
		q.Set("status", status)
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out protocol.ConversationList
	return out, c.Do(ctx, http.MethodGet, "/api/operator/conversations?"+q.Encode(), nil, &out)
}

// GetConversation returns a conversation and one page of frames after a cursor.
func (c *Client) GetConversation(ctx context.Context, id string, after int64, limit int) (protocol.ConversationPage, error) {
	q := url.Values{"after_sequence": {strconv.FormatInt(after, 10)}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out protocol.ConversationPage
	return out, c.Do(ctx, http.MethodGet, "/api/operator/conversations/"+url.PathEscape(id)+"?"+q.Encode(), nil, &out)
}

// UpdateConversation renames or archives/unarchives.
func (c *Client) UpdateConversation(ctx context.Context, id string, req protocol.UpdateConversationRequest) (protocol.Conversation, error) {
	var out protocol.Conversation
	return out, c.Do(ctx, http.MethodPatch, "/api/operator/conversations/"+url.PathEscape(id), req, &out)
}

// DeleteConversation marks a conversation deleted.
func (c *Client) DeleteConversation(ctx context.Context, id string) (protocol.Conversation, error) {
	var out protocol.Conversation
	return out, c.Do(ctx, http.MethodDelete, "/api/operator/conversations/"+url.PathEscape(id), nil, &out)
}

// SubmitTurn submits a turn.
func (c *Client) SubmitTurn(ctx context.Context, id string, req protocol.TurnRequest) (protocol.TurnAccepted, error) {
	var out protocol.TurnAccepted
	return out, c.Do(ctx, http.MethodPost, "/api/operator/conversations/"+url.PathEscape(id)+"/turns", req, &out)
}

// Cancel asks for a turn's cancellation.
func (c *Client) Cancel(ctx context.Context, id, requestID string) (protocol.Turn, error) {
	var out protocol.Turn
	return out, c.Do(ctx, http.MethodPost, "/api/operator/conversations/"+url.PathEscape(id)+"/requests/"+url.PathEscape(requestID)+"/cancel", nil, &out)
}

// CreateTicket issues a one-use stream ticket.
func (c *Client) CreateTicket(ctx context.Context, req protocol.StreamTicketRequest) (protocol.StreamTicket, error) {
	var out protocol.StreamTicket
	return out, c.Do(ctx, http.MethodPost, "/api/operator/stream-tickets", req, &out)
}

// ErrStopStream, returned by a Stream callback, ends the stream without error.
var ErrStopStream = errors.New("stop stream")

// Stream follows a conversation's frames after a cursor, calling fn for each
// frame in order, until ctx ends or fn returns an error. Frames are decoded
// strictly: an unknown version or type ends the stream with that error.
func (c *Client) Stream(ctx context.Context, id string, after int64, fn func(protocol.Frame) error) error {
	return c.stream(ctx, id, after, nil, fn)
}

// stream is Stream; onStatus, when set, hears the stream's status comments.
func (c *Client) stream(ctx context.Context, id string, after int64, onStatus func(*protocol.TurnProgress), fn func(protocol.Frame) error) error {
	path := "/api/operator/conversations/" + url.PathEscape(id) + "/stream?after_sequence=" + strconv.FormatInt(after, 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "text/event-stream")
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	return c.follow(req, onStatus, fn)
}

// StreamWithTicket follows a stream authenticated by a ticket instead of the
// bearer header.
func (c *Client) StreamWithTicket(ctx context.Context, id string, after int64, ticket string, fn func(protocol.Frame) error) error {
	q := url.Values{"after_sequence": {strconv.FormatInt(after, 10)}, "ticket": {ticket}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+"/api/operator/conversations/"+url.PathEscape(id)+"/stream?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	return c.follow(req, nil, fn)
}

// openStream sends a stream's request: the body of its 200 (the caller
// closes it), else the typed error of the answer.
func (c *Client) openStream(req *http.Request) (io.ReadCloser, error) {
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, c.transportError(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, responseError(resp.StatusCode, data)
	}
	return resp.Body, nil
}

func (c *Client) follow(req *http.Request, onStatus func(*protocol.TurnProgress), fn func(protocol.Frame) error) error {
	body, err := c.openStream(req)
	if err != nil {
		return err
	}
	defer body.Close()
	// An error after the stream began comes as an ": error CODE" comment
	// before the server ends it. replay_gap and not_found (the
	// conversation's frames were purged meanwhile) and access_revoked (the
	// right to read it was taken away) end the stream for good; anything
	// else is worth a reconnect, as a dropped connection is.
	var ended protocol.ErrorCode
	onComment := func(text string) {
		if code, ok := strings.CutPrefix(text, "error "); ok {
			if c := protocol.ErrorCode(strings.TrimSpace(code)); c == protocol.ReplayGap || c == protocol.NotFound || c == protocol.AccessRevoked {
				ended = c
			}
			return
		}
		if onStatus != nil {
			js, ok := strings.CutPrefix(text, "status ")
			if !ok {
				return
			}
			var v struct {
				ActiveTurn *protocol.TurnProgress `json:"activeTurn"`
			}
			if protocol.Unmarshal([]byte(js), &v) == nil {
				onStatus(v.ActiveTurn)
			}
		}
	}
	err = readEvents(body, onComment, func(ev Event) error {
		if ev.Data == "" {
			return nil
		}
		f, err := protocol.DecodeFrame([]byte(ev.Data))
		if err != nil {
			return err
		}
		return fn(f)
	})
	if errors.Is(err, ErrStopStream) || req.Context().Err() != nil {
		return nil
	}
	if err == nil && ended != "" {
		return protocol.Errorf(ended, "the server ended the stream: %s", ended)
	}
	return err
}

// Event is one Server-Sent Event.
type Event struct {
	ID   string
	Data string
}

// ReadEvents parses an SSE stream (LF or CRLF line ends, comments, multi-line
// data) and calls fn per dispatched event.
func ReadEvents(r io.Reader, fn func(Event) error) error { return readEvents(r, nil, fn) }

// readEvents is ReadEvents; onComment, when set, hears each comment line's
// text (after ": ").
func readEvents(r io.Reader, onComment func(string), fn func(Event) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var ev Event
	var data []string
	for {
		line, err := br.ReadString('\n')
		if err != nil && (err != io.EOF || line == "") {
			if err == io.EOF {
				return nil
			}
			return err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if len(data) > 0 || ev.ID != "" {
				ev.Data = strings.Join(data, "\n")
				if err := fn(ev); err != nil {
					return err
				}
			}
			ev, data = Event{}, nil
		case strings.HasPrefix(line, ":"):
			if onComment != nil {
				onComment(strings.TrimPrefix(line[1:], " "))
			}
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "data":
				data = append(data, value)
			case "id":
				ev.ID = value
			}
		}
	}
}

// AckEffect acknowledges an effect.
func (c *Client) AckEffect(ctx context.Context, convID, effectID string, req protocol.AckEffectRequest) (protocol.EffectState, error) {
	var out protocol.EffectState
	return out, c.Do(ctx, http.MethodPost, "/api/operator/conversations/"+url.PathEscape(convID)+"/effects/"+url.PathEscape(effectID)+"/ack", req, &out)
}

// GetEffect reads an effect's current acknowledgement state.
func (c *Client) GetEffect(ctx context.Context, convID, effectID string) (protocol.EffectState, error) {
	var out protocol.EffectState
	return out, c.Do(ctx, http.MethodGet, "/api/operator/conversations/"+url.PathEscape(convID)+"/effects/"+url.PathEscape(effectID), nil, &out)
}

// Confirm confirms a proposal.
func (c *Client) Confirm(ctx context.Context, convID, proposalID string, req protocol.ConfirmProposalRequest) (protocol.ProposalResult, error) {
	var out protocol.ProposalResult
	return out, c.Do(ctx, http.MethodPost, "/api/operator/conversations/"+url.PathEscape(convID)+"/proposals/"+url.PathEscape(proposalID)+"/confirm", req, &out)
}

// Deny refuses a proposal.
func (c *Client) Deny(ctx context.Context, convID, proposalID string) (protocol.ProposalResult, error) {
	var out protocol.ProposalResult
	return out, c.Do(ctx, http.MethodPost, "/api/operator/conversations/"+url.PathEscape(convID)+"/proposals/"+url.PathEscape(proposalID)+"/deny", struct{}{}, &out)
}

// Proposal fetches one proposal by id.
func (c *Client) Proposal(ctx context.Context, proposalID string) (protocol.ProposalState, error) {
	var out protocol.ProposalState
	return out, c.Do(ctx, http.MethodGet, "/api/operator/proposals/"+url.PathEscape(proposalID), nil, &out)
}

// Proposals lists proposals across conversations, filtered by status.
func (c *Client) Proposals(ctx context.Context, status string) ([]protocol.ProposalState, error) {
	var out struct {
		Proposals []protocol.ProposalState `json:"proposals"`
	}
	q := ""
	if status != "" {
		q = "?status=" + url.QueryEscape(status)
	}
	return out.Proposals, c.Do(ctx, http.MethodGet, "/api/operator/proposals"+q, nil, &out)
}

// Decidable lists the pending proposals the caller may confirm, across the
// conversations it can see (GET /api/operator/proposals?decidable=true).
func (c *Client) Decidable(ctx context.Context) ([]protocol.ProposalState, error) {
	var out struct {
		Proposals []protocol.ProposalState `json:"proposals"`
	}
	return out.Proposals, c.Do(ctx, http.MethodGet, "/api/operator/proposals?status=pending&decidable=true", nil, &out)
}

// Follow is Stream that survives a dropped connection: after a transport
// failure it reconnects from the last sequence it delivered, with capped
// backoff, until ctx ends or fn stops it. Typed errors (not_found,
// replay_gap, access_revoked, auth_required, protocol_version) end it:
// reconnecting cannot fix them. It only ever repeats reads, never a
// submission (docs/design.md §11).
func (c *Client) Follow(ctx context.Context, id string, after int64, onRetry func(err error, wait time.Duration), fn func(protocol.Frame) error) error {
	return c.FollowProgress(ctx, id, after, onRetry, nil, fn)
}

// FollowProgress is Follow that also hands onStatus the conversation's
// active turn as the stream's status comments say it (nil: no turn runs):
// queued with its place in line, working, retrying and when, waiting for
// a decision, executing — what no frame says.
func (c *Client) FollowProgress(ctx context.Context, id string, after int64, onRetry func(err error, wait time.Duration),
	onStatus func(*protocol.TurnProgress), fn func(protocol.Frame) error) error {
	wait := 250 * time.Millisecond
	for {
		var fnErr error
		err := c.stream(ctx, id, after, onStatus, func(f protocol.Frame) error {
			if f.Sequence <= after { // a redelivered frame
				return nil
			}
			after = f.Sequence
			wait = 250 * time.Millisecond
			fnErr = fn(f)
			return fnErr
		})
		if errors.Is(fnErr, ErrStopStream) || ctx.Err() != nil {
			return nil
		}
		if fnErr != nil {
			return fnErr
		}
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return err
		}
		if err == nil {
			err = io.ErrUnexpectedEOF // the server closed the stream (shutdown)
		}
		if onRetry != nil {
			onRetry(err, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		wait = min(wait*2, 5*time.Second)
	}
}

// SearchConversations lists the conversations whose title or turn text has
// every word of q (status "" for active and archived, or deleted).
func (c *Client) SearchConversations(ctx context.Context, q, status string) (protocol.ConversationList, error) {
	v := url.Values{"q": {q}}
	if status != "" {
		v.Set("status", status)
	}
	var out protocol.ConversationList
	return out, c.Do(ctx, http.MethodGet, "/api/operator/conversations?"+v.Encode(), nil, &out)
}

// ForkConversation forks a conversation up to a turn boundary.
func (c *Client) ForkConversation(ctx context.Context, id string, req protocol.ForkRequest) (protocol.ConversationPage, error) {
	var out protocol.ConversationPage
	return out, c.Do(ctx, http.MethodPost, "/api/operator/conversations/"+url.PathEscape(id)+"/fork", req, &out)
}

// RestoreConversation restores a conversation deleted within the recovery window.
func (c *Client) RestoreConversation(ctx context.Context, id string) (protocol.Conversation, error) {
	var out protocol.Conversation
	return out, c.Do(ctx, http.MethodPost, "/api/operator/conversations/"+url.PathEscape(id)+"/restore", struct{}{}, &out)
}

// ReportView reports what the operator looks at in a conversation's cockpit.
func (c *Client) ReportView(ctx context.Context, id string, req protocol.ViewReport) (protocol.ViewAccepted, error) {
	var out protocol.ViewAccepted
	return out, c.Do(ctx, http.MethodPost, "/api/operator/conversations/"+url.PathEscape(id)+"/view", req, &out)
}

// AmendProposal replaces a pending proposal with an edited command.
func (c *Client) AmendProposal(ctx context.Context, convID, proposalID string, req protocol.AmendProposalRequest) (protocol.ProposalState, error) {
	var out protocol.ProposalState
	return out, c.Do(ctx, http.MethodPost, "/api/operator/conversations/"+url.PathEscape(convID)+"/proposals/"+url.PathEscape(proposalID)+"/amend", req, &out)
}

// Models lists the configured models.
func (c *Client) Models(ctx context.Context) (protocol.ModelList, error) {
	var out protocol.ModelList
	return out, c.Do(ctx, http.MethodGet, "/api/operator/models", nil, &out)
}
