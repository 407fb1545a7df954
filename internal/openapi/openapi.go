// Package openapi describes the daemon's HTTP API as an OpenAPI 3.1 document
// and its wire types as TypeScript declarations, both generated from one
// source: the Go types of packages protocol, studio and spaces, reflected into
// JSON Schema (hand-written where a type writes its own JSON: frames,
// effects, versions), and the table of operations in this package. The
// repository keeps both outputs (docs/openapi.json, web/types/wire.d.ts);
// a test fails when they are stale (go test ./internal/openapi -update
// rewrites them).
package openapi

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v, json.Deterministic(true)) }

// JSON is the OpenAPI document, indented.
var JSON = sync.OnceValues(func() ([]byte, error) {
	m := build()
	var b strings.Builder
	w := func(s string) { b.WriteString(s) }
	quote := func(v any) string {
		out, err := jsonMarshal(v)
		if err != nil {
			panic(err)
		}
		return string(out)
	}
	w(`{"openapi":"3.1.0","info":{"title":"Studio operator API","version":"1",`)
	w(`"description":` + quote("The Studio daemon's HTTP API: the operator protocol (docs/protocol.md) under /api/operator and the cockpit's application API under /api/app. "+
		"Every /api call needs Authorization: Bearer <token> (a principal's personal token) unless an operation says otherwise; "+
		"a principal whose role is below the route's least role (docs/protocol.md, Roles) gets 403 denied with details {reason: role, needed}. Errors are {error: ProtocolError} with one HTTP status per code. "+
		"Times are Unix seconds (numbers). See docs/protocol.md.") + `},`)
	w(`"servers":[{"url":"http://127.0.0.1:8765"}],"security":[{"bearer":[]}],`)
	w(`"tags":[{"name":"daemon","description":"health, metrics and this document"},{"name":"operator","description":"the operator protocol (docs/protocol.md)"},{"name":"app","description":"the cockpit's application API"},{"name":"admin","description":"principals, their roles and personal tokens"}],`)
	var opsJSON strings.Builder // the paths, written below once the used components are known
	var paths []string
	byPath := map[string][]Operation{}
	for _, op := range m.ops {
		if _, ok := byPath[op.Path]; !ok {
			paths = append(paths, op.Path)
		}
		byPath[op.Path] = append(byPath[op.Path], op)
	}
	for i, p := range paths {
		if i > 0 {
			opsJSON.WriteString(",")
		}
		opsJSON.WriteString(quote(p) + ":{")
		for j, op := range byPath[p] {
			if j > 0 {
				opsJSON.WriteString(",")
			}
			js, err := operationJSON(op, m.components)
			if err != nil {
				return nil, err
			}
			opsJSON.WriteString(quote(strings.ToLower(op.Method)) + ":" + js)
		}
		opsJSON.WriteString("}")
	}
	// The schemas the operations use, directly or through other schemas:
	// the TypeScript declarations keep every wire type, the document only
	// those an operation answers or takes.
	componentJSON := map[string]string{}
	for name, c := range m.components {
		js, err := c.json()
		if err != nil {
			return nil, err
		}
		componentJSON[name] = string(js)
	}
	used := usedComponents(opsJSON.String()+errorResponsesJSON, componentJSON)
	w(`"paths":{` + opsJSON.String())
	w(`},"components":{"securitySchemes":{"bearer":{"type":"http","scheme":"bearer","description":"the daemon's token (studio token)"},`)
	w(`"ticket":{"type":"apiKey","in":"query","name":"ticket","description":"a one-use stream ticket (POST /api/operator/stream-tickets); only on the stream"}},`)
	w(`"responses":` + errorResponsesJSON + `,"schemas":{`)
	first := true
	for _, name := range sortedNames(m.components) {
		if !used[name] {
			continue
		}
		if !first {
			w(",")
		}
		first = false
		w(quote(name) + ":" + componentJSON[name])
	}
	w("}}}")
	v := jsontext.Value(b.String())
	if err := v.Indent(jsontext.WithIndent("  ")); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	return append([]byte(v), '\n'), nil
})

var pathParam = regexp.MustCompile(`\{([a-z]+)\}`)

// usedComponents follows the schema references from root through the
// components' own.
func usedComponents(root string, components map[string]string) map[string]bool {
	used := map[string]bool{}
	todo := []string{root}
	for len(todo) > 0 {
		js := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for _, m := range refPattern.FindAllStringSubmatch(js, -1) {
			if name := m[1]; !used[name] {
				used[name] = true
				todo = append(todo, components[name])
			}
		}
	}
	return used
}

// errorResponse is one documented error status: the codes it carries
// (protocol.ErrorCode.HTTPStatus) and when an operation can answer it.
type errorResponse struct {
	status, name, desc string
	applies            func(op Operation) bool
}

// isAPI: under /api, where StateDB answers and the request checks apply.
func isAPI(op Operation) bool { return strings.HasPrefix(op.Path, "/api/") && op.Auth != "none" }

var errorResponses = []errorResponse{
	{"400", "BadRequest", "validation (a malformed or invalid request: body, query, path or headers) or protocol_version",
		func(Operation) bool { return true }},
	{"401", "Unauthorized", "auth_required: the token (or the stream ticket) is missing or wrong",
		func(op Operation) bool { return op.Auth != "none" }},
	{"403", "Forbidden", "denied: the Host header names neither loopback nor an --allowed-hosts name, or the action is not allowed here",
		func(Operation) bool { return true }},
	{"404", "NotFound", "not_found: what the path names does not exist",
		func(op Operation) bool { return strings.Contains(op.Path, "{") }},
	{"409", "Conflict", "conflict, stale_context, replay_gap or cancelled: the resource changed or is in a state that refuses the request; read it again",
		func(op Operation) bool { return isAPI(op) && (op.Method != "GET" || op.Content == "text/event-stream") }},
	{"429", "TooManyRequests", "rate_limited: too many connections from this client (--max-client-conns) or too many turns waiting; retry after retryAfterMs",
		func(op Operation) bool { return isAPI(op) }},
	{"503", "ServiceUnavailable", "service_failure, service_restarted or audit_unavailable: StateDB is unavailable, or the daemon is shutting down; retryable",
		func(op Operation) bool { return isAPI(op) }},
}

// errorResponsesJSON is components.responses: one per documented status,
// each the error envelope.
var errorResponsesJSON = func() string {
	var parts []string
	for _, e := range errorResponses {
		parts = append(parts, strconv.Quote(e.name)+`:{"description":`+strconv.Quote(e.desc)+
			`,"content":{"application/json":{"schema":{"$ref":"#/components/schemas/ErrorBody"}}}}`)
	}
	return "{" + strings.Join(parts, ",") + "}"
}()

// bodyRequired: the request body may be left out when an empty object
// (which an empty body decodes as) is valid, i.e. when no property is
// required.
func bodyRequired(body *schema, components map[string]*schema) bool {
	for body.Ref != "" {
		c, ok := components[body.Ref]
		if !ok {
			return true
		}
		body = c
	}
	for _, p := range body.Properties {
		if p.Required {
			return true
		}
	}
	return false
}

func operationJSON(op Operation, components map[string]*schema) (string, error) {
	var parts []string
	add := func(k, v string) { parts = append(parts, strconv.Quote(k)+":"+v) }
	quote := func(v any) string { b, _ := jsonMarshal(v); return string(b) }
	add("operationId", quote(op.ID))
	add("tags", quote([]string{op.Tag}))
	add("summary", quote(op.Summary))
	switch op.Auth {
	case "none":
		add("security", "[]")
	case "bearer-or-ticket":
		add("security", `[{"bearer":[]},{"ticket":[]}]`)
	}
	var params []string
	for _, m := range pathParam.FindAllStringSubmatch(op.Path, -1) {
		params = append(params, `{"name":`+quote(m[1])+`,"in":"path","required":true,"schema":{"type":"string"}}`)
	}
	for _, p := range op.Query {
		if op.Auth == "bearer-or-ticket" && p.name == "ticket" {
			continue // the ticket security scheme
		}
		js, err := p.s.json()
		if err != nil {
			return "", err
		}
		params = append(params, `{"name":`+quote(p.name)+`,"in":"query","description":`+quote(p.desc)+`,"schema":`+string(js)+`}`)
	}
	if len(params) > 0 {
		add("parameters", "["+strings.Join(params, ",")+"]")
	}
	if op.Body != nil {
		js, err := op.Body.json()
		if err != nil {
			return "", err
		}
		add("requestBody", `{"required":`+strconv.FormatBool(bodyRequired(op.Body, components))+`,"content":{"application/json":{"schema":`+string(js)+`}}}`)
	}
	var resp []string
	success := `{"description":"success"}`
	switch {
	case op.Content != "":
		success = `{"description":"success","content":{` + quote(op.Content) + `:{"schema":{"type":"string"}}}}`
	case op.Resp != nil:
		rs := op.Resp
		if op.Approval != nil && op.Status == 202 { // the command ran, or was sent for approval
			rs = &schema{OneOf: []*schema{op.Resp, op.Approval}}
		}
		js, err := rs.json()
		if err != nil {
			return "", err
		}
		success = `{"description":"success","content":{"application/json":{"schema":` + string(js) + `}}}`
	}
	status := strconv.Itoa(op.Status)
	for _, e := range errorResponses {
		if e.status == status { // an address that answers only an error (the OAuth discovery ones)
			success = `{"$ref":"#/components/responses/` + e.name + `"}`
		}
	}
	resp = append(resp, quote(status)+":"+success)
	if op.Approval != nil && op.Status != 202 {
		js, err := op.Approval.json()
		if err != nil {
			return "", err
		}
		resp = append(resp, `"202":{"description":"sent for approval: the command needs a second approver and became this pending proposal (Location: its URL); another principal confirms or denies it","content":{"application/json":{"schema":`+string(js)+`}}}`)
	}
	quiet := op.Path == "/healthz" || op.Path == "/readyz" // their 503 is their own body
	for _, e := range errorResponses {
		if e.applies(op) && !(quiet && e.status == "503") && e.status != status {
			resp = append(resp, quote(e.status)+`:{"$ref":"#/components/responses/`+e.name+`"}`)
		}
	}
	switch op.Path {
	case "/healthz":
		resp = append(resp, `"503":{"description":"StateDB is unavailable","content":{"application/json":{"schema":{"type":"object","properties":{"status":{"type":"string"},"reason":{"type":"string"}},"required":["status"]}}}}`)
	case "/readyz":
		resp = append(resp, `"503":{"description":"not ready: the reason says why","content":{"application/json":{"schema":{"type":"object","properties":{"status":{"type":"string"},"reason":{"type":"string"},"detail":{"type":"string"}},"required":["status","reason"]}}}}`)
	default:
		// The rest (502 model_failure, 413, 500 ...): the status follows
		// the code.
		resp = append(resp, `"default":{"description":"any other error: the status follows the code (docs/protocol.md)","content":{"application/json":{"schema":{"$ref":"#/components/schemas/ErrorBody"}}}}`)
	}
	add("responses", "{"+strings.Join(resp, ",")+"}")
	return "{" + strings.Join(parts, ",") + "}", nil
}

// TypeScript is the wire types as TypeScript declarations.
var TypeScript = sync.OnceValue(func() []byte {
	m := build()
	var b strings.Builder
	b.WriteString("// Code generated by go test ./internal/openapi -update; DO NOT EDIT.\n")
	b.WriteString("// The wire types of the Studio daemon's API (docs/openapi.json, docs/protocol.md),\n")
	b.WriteString("// generated from the same Go types as the OpenAPI document. Times are Unix seconds.\n")
	b.WriteString("// From JSDoc: /** @typedef {import('../../types/wire').Frame} Frame */\n\n")
	for _, name := range sortedNames(m.components) {
		s := m.components[name]
		if s.Description != "" {
			b.WriteString("/** " + strings.ReplaceAll(s.Description, "*/", "* /") + " */\n")
		}
		if len(s.Properties) > 0 && s.Ref == "" && !s.Nullable && len(s.OneOf) == 0 {
			b.WriteString("export interface " + name + " " + tsObject(s, "") + "\n\n")
			continue
		}
		b.WriteString("export type " + name + " = " + tsType(s, "") + ";\n\n")
	}
	return []byte(strings.TrimRight(b.String(), "\n") + "\n")
})

func tsType(s *schema, indent string) string {
	t := tsBase(s, indent)
	if s.Nullable && t != "unknown" {
		t += " | null"
	}
	return t
}

func tsBase(s *schema, indent string) string {
	switch {
	case s.Ref != "":
		return s.Ref
	case s.Any:
		return "unknown"
	case s.Const != nil:
		b, _ := jsonMarshal(s.Const)
		return string(b)
	case len(s.OneOf) > 0:
		var alts []string
		for _, o := range s.OneOf {
			alts = append(alts, tsType(o, indent))
		}
		return strings.Join(alts, " | ")
	case len(s.Enum) > 0:
		var alts []string
		for _, v := range s.Enum {
			alts = append(alts, strconv.Quote(v))
		}
		return strings.Join(alts, " | ")
	}
	var alts []string
	for _, t := range s.Type {
		switch t {
		case "string":
			alts = append(alts, "string")
		case "integer", "number":
			alts = append(alts, "number")
		case "boolean":
			alts = append(alts, "boolean")
		case "array":
			it := tsType(s.Items, indent)
			if strings.Contains(it, " ") {
				it = "(" + it + ")"
			}
			alts = append(alts, it+"[]")
		case "object":
			switch {
			case len(s.Properties) > 0:
				alts = append(alts, tsObject(s, indent))
			case s.Additional != nil:
				alts = append(alts, "Record<string, "+tsType(s.Additional, indent)+">")
			case s.Open:
				alts = append(alts, "Record<string, unknown>")
			default:
				alts = append(alts, "Record<string, never>")
			}
		}
	}
	if len(alts) == 0 {
		return "unknown"
	}
	return strings.Join(slices.Compact(alts), " | ")
}

func tsObject(s *schema, indent string) string {
	var b strings.Builder
	b.WriteString("{\n")
	for _, p := range s.Properties {
		if p.Schema.Description != "" && p.Schema.Ref == "" {
			b.WriteString(indent + "  /** " + strings.ReplaceAll(p.Schema.Description, "*/", "* /") + " */\n")
		}
		q := "?"
		if p.Required {
			q = ""
		}
		b.WriteString(indent + "  " + p.Name + q + ": " + tsType(p.Schema, indent+"  ") + ";\n")
	}
	b.WriteString(indent + "}")
	return b.String()
}

var refPattern = regexp.MustCompile(`"#/components/schemas/([A-Za-z0-9_]+)"`)
