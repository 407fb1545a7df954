package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/studio/operator/internal/protocol"
)

// Handler is the stateless Streamable HTTP endpoint (POST; the edge
// answers other methods 405). The edge in front of it (httpapi)
// authenticated the principal and checked Host and Origin. Here a body
// that is not JSON-RPC is answered as JSON-RPC says (-32700, -32600), a
// method Studio does not serve is -32601, and an initialize of a client
// before 2026-07-28 gets an Mcp-Session-Id that carries its name (see
// clientName); role and rate are decided per call (decided). refuse
// writes a typed error with its status.
func (s *Server) Handler(refuse func(http.ResponseWriter, *http.Request, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		msgs, batch, rpcErr := parseMessages(body)
		if rpcErr == nil && batch && version >= "2025-06-18" {
			rpcErr = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
				Message: fmt.Sprintf("JSON-RPC batches are not part of MCP %s: send one message per request", version)}
		}
		if rpcErr != nil {
			writeRPC(w, http.StatusBadRequest, &jsonrpc.Response{Error: rpcErr})
			return
		}
		if unserved(w, msgs, batch, version) {
			return
		}
		if name, ok := legacyInitialize(msgs); ok {
			w.Header().Set(sessionHeader, newSessionID(name))
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		s.handler.ServeHTTP(w, r.WithContext(WithBase(r.Context(), scheme+"://"+r.Host)))
	})
}

// parseMessages reads a POST body: one JSON-RPC message or a batch
// (an array of them). The error is -32700 for a body that is not JSON,
// -32600 for JSON that is not a JSON-RPC message.
func parseMessages(body []byte) (msgs []jsonrpc.Message, batch bool, _ *jsonrpc.Error) {
	if !json.Valid(body) {
		return nil, false, &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: "the body is not JSON"}
	}
	raws := []json.RawMessage{body}
	if b := bytes.TrimLeft(body, " \t\r\n"); len(b) > 0 && b[0] == '[' {
		batch = true
		if json.Unmarshal(b, &raws) != nil || len(raws) == 0 {
			return nil, true, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "a batch must be a non-empty array of JSON-RPC messages"}
		}
	}
	for i, raw := range raws {
		m, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			where := "the body"
			if batch {
				where = fmt.Sprintf("element %d of the batch", i)
			}
			return nil, batch, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
				Message: where + ` is not a JSON-RPC 2.0 message ({"jsonrpc":"2.0","id":…,"method":…,"params":…})`}
		}
		msgs = append(msgs, m)
	}
	return msgs, batch, nil
}

// unserved answers a body with a request of a method Studio does not
// serve: -32601 for each such request (HTTP 404 at 2026-07-28, as its
// transport asks; 200 before, the error in the body; 400 for a batch,
// which is then refused whole). A lone unknown notification is accepted
// and ignored (202). It reports whether it answered.
func unserved(w http.ResponseWriter, msgs []jsonrpc.Message, batch bool, version string) bool {
	var errs []*jsonrpc.Response
	for _, m := range msgs {
		if req, ok := m.(*jsonrpc.Request); ok && !served[req.Method] && req.IsCall() {
			errs = append(errs, &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
				Message: fmt.Sprintf("method %q is not served: Studio offers tools only (tools/list, tools/call)", req.Method)}})
		}
	}
	switch {
	case batch && len(errs) > 0:
		writeRPC(w, http.StatusBadRequest, errs...)
	case len(errs) == 1:
		status := http.StatusOK
		if version >= "2026-07-28" {
			status = http.StatusNotFound
		}
		writeRPC(w, status, errs[0])
	case !batch && len(msgs) == 1:
		if req, ok := msgs[0].(*jsonrpc.Request); ok && !served[req.Method] {
			w.WriteHeader(http.StatusAccepted)
			return true
		}
		return false
	default:
		return false
	}
	return true
}

// writeRPC writes JSON-RPC responses: one object, or an array for more.
func writeRPC(w http.ResponseWriter, status int, resps ...*jsonrpc.Response) {
	var out []byte
	for i, r := range resps {
		b, err := jsonrpc.EncodeMessage(r)
		if err != nil {
			http.Error(w, "the error could not be encoded", http.StatusInternalServerError)
			return
		}
		if len(resps) == 1 {
			out = b
			break
		}
		if i == 0 {
			out = append(out, '[')
		} else {
			out = append(out, ',')
		}
		out = append(out, b...)
		if i == len(resps)-1 {
			out = append(out, ']')
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// legacyInitialize is the client's name when the body is one initialize
// request of a revision before 2026-07-28 (which has sessions).
func legacyInitialize(msgs []jsonrpc.Message) (string, bool) {
	if len(msgs) != 1 {
		return "", false
	}
	req, ok := msgs[0].(*jsonrpc.Request)
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
