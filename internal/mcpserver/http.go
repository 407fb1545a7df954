package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
)

// Handler is the stateless Streamable HTTP endpoint (POST; the edge
// answers other methods 405). The edge in front of it (httpapi)
// authenticated the principal and checked Host and Origin. Here a body
// that is not JSON-RPC is answered as JSON-RPC says (-32700, -32600), a
// method Studio does not serve is -32601, a batch (MCP up to 2025-03-26)
// is served element by element, and an initialize of a client before
// 2026-07-28 gets an Mcp-Session-Id that carries its name (see
// clientName); the policy and the rate decide each call (decided). refuse
// writes a typed error with its status.
func (s *Server) Handler(refuse func(http.ResponseWriter, *http.Request, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(policy.WithDoor(r.Context(), policy.DoorMCP))
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
		if err != nil {
			refuse(w, r, protocol.Errorf(protocol.Validation, "the request body could not be read"))
			return
		}
		if len(body) > MaxBody {
			refuse(w, r, protocol.Errorf(protocol.Validation, "the request body is larger than %d bytes", MaxBody))
			return
		}
		version := r.Header.Get("Mcp-Protocol-Version")
		raws, batch, rpcErr := parseMessages(body)
		if rpcErr == nil && batch && version >= "2025-06-18" {
			rpcErr = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
				Message: fmt.Sprintf("JSON-RPC batches are not part of MCP %s: send one message per request", version)}
		}
		if rpcErr != nil {
			writeRPC(w, http.StatusBadRequest, &jsonrpc.Response{Error: rpcErr})
			return
		}
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		r = r.WithContext(WithBase(r.Context(), scheme+"://"+r.Host))
		if batch {
			s.serveBatch(w, r, raws)
			return
		}
		s.serveOne(w, r, raws[0], version)
	})
}

// serveOne serves one JSON-RPC message: a method Studio does not serve
// is -32601 (HTTP 404 at 2026-07-28, as its transport asks; 200 before,
// the error in the body), an unknown notification is accepted and
// ignored (202); the rest is the SDK's.
func (s *Server) serveOne(w http.ResponseWriter, r *http.Request, raw json.RawMessage, version string) {
	msg, _ := jsonrpc.DecodeMessage(raw) // parseMessages decoded it once
	if req, ok := msg.(*jsonrpc.Request); ok && !served[req.Method] {
		if !req.IsCall() {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		status := http.StatusOK
		if version >= "2026-07-28" {
			status = http.StatusNotFound
		}
		writeRPC(w, status, &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
			Message: fmt.Sprintf("method %q is not served: Studio offers tools only (tools/list, tools/call)", req.Method)}})
		return
	}
	if name, ok := legacyInitialize(msg); ok && strings.TrimSpace(name) != "" {
		w.Header().Set(sessionHeader, newSessionID(name)) // a nameless client is told apart by its token
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	r.ContentLength = int64(len(raw))
	s.handler.ServeHTTP(w, r)
}

// serveBatch serves a batch one message at a time, in order, each
// exactly as if it came alone — decided and rate-limited on its own —
// and answers the array of their responses (202 when all were
// notifications). The SDK's own batch answer drops responses; this one
// does not.
func (s *Server) serveBatch(w http.ResponseWriter, r *http.Request, raws []json.RawMessage) {
	var out []json.RawMessage
	for _, raw := range raws {
		rec := &recorder{header: http.Header{}}
		s.serveOne(rec, r.Clone(r.Context()), raw, r.Header.Get("Mcp-Protocol-Version"))
		if id := rec.header.Get(sessionHeader); id != "" {
			w.Header().Set(sessionHeader, id)
		}
		if rec.status == http.StatusAccepted {
			continue
		}
		resp := bytes.TrimSpace(rec.body.Bytes())
		if !json.Valid(resp) || len(resp) == 0 || resp[0] != '{' {
			// The SDK refused the element outright (plain text): answer
			// it as JSON-RPC, with the element's id.
			var id jsonrpc.ID
			if msg, _ := jsonrpc.DecodeMessage(raw); msg != nil {
				if req, ok := msg.(*jsonrpc.Request); ok {
					id = req.ID
				}
			}
			resp, _ = jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
				Message: strings.TrimSpace(rec.body.String())}})
		}
		out = append(out, resp)
	}
	if len(out) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	b, _ := json.Marshal(out)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// recorder keeps one batch element's answer.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

// parseMessages splits a POST body into its JSON-RPC messages: one, or a
// batch (an array of them). The error is -32700 for a body that is not
// JSON, -32600 for JSON that is not JSON-RPC.
func parseMessages(body []byte) (raws []json.RawMessage, batch bool, _ *jsonrpc.Error) {
	if !json.Valid(body) {
		return nil, false, &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: "the body is not JSON"}
	}
	raws = []json.RawMessage{body}
	if b := bytes.TrimLeft(body, " \t\r\n"); len(b) > 0 && b[0] == '[' {
		batch = true
		if json.Unmarshal(b, &raws) != nil || len(raws) == 0 {
			return nil, true, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "a batch must be a non-empty array of JSON-RPC messages"}
		}
	}
	for i, raw := range raws {
		if _, err := jsonrpc.DecodeMessage(raw); err != nil {
			where := "the body"
			if batch {
				where = fmt.Sprintf("element %d of the batch", i)
			}
			return nil, batch, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
				Message: where + ` is not a JSON-RPC 2.0 message ({"jsonrpc":"2.0","id":…,"method":…,"params":…})`}
		}
	}
	return raws, batch, nil
}

// writeRPC writes one JSON-RPC response.
func writeRPC(w http.ResponseWriter, status int, resp *jsonrpc.Response) {
	b, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		http.Error(w, "the error could not be encoded", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// legacyInitialize is the client's name when the message is an initialize
// request of a revision before 2026-07-28 (which has sessions).
func legacyInitialize(msg jsonrpc.Message) (string, bool) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.Method != "initialize" {
		return "", false
	}
	var params struct {
		ProtocolVersion string `json:"protocolVersion"`
		ClientInfo      struct {
			Name string `json:"name"`
		} `json:"clientInfo"`
	}
	if json.Unmarshal(req.Params, &params) != nil || params.ProtocolVersion >= "2026-07-28" {
		return "", false
	}
	return params.ClientInfo.Name, true
}
