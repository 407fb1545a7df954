package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/studio/operator/internal/policy"
	"github.com/studio/operator/internal/protocol"
)

// Authorization: every authenticated route asks the policy
// (internal/policy) one question — may this principal do the route's
// action on what it acts on — and decides nothing itself. RouteActions is
// the one table from a route to its action; a route missing here is
// refused to everyone, and a test walks the router so none is.

// On says what a route's action acts on.
type On string

// What routes act on.
const (
	// OnStudio: the daemon (policy.Studio).
	OnStudio On = "studio"
	// OnConversation: the conversation of the path's {id}. One the
	// principal may not read is not_found, as if it did not exist.
	OnConversation On = "conversation"
	// OnProposal: the proposal of the path's {pid} (of {id} when the path
	// has one); one the principal may not read is not_found.
	OnProposal On = "proposal"
	// OnCommand: the application command the request asks for, decided
	// once it is decoded (execute): run_command.
	OnCommand On = "command"
	// OnTicket: the conversation the body names (a stream ticket).
	OnTicket On = "ticket"
	// OnThread: the AG-UI thread the body names, and what the run does
	// there (create it, converse, confirm or deny its interrupts,
	// acknowledge effects): the door asks each (internal/agui).
	OnThread On = "thread"
)

// Route is how a route is decided: its action, on what.
type Route struct {
	Action policy.Action
	On     On
}

// RouteActions maps every authenticated route (its mux pattern) to its
// action.
var RouteActions = map[string]Route{
	"GET /metrics": {policy.ReadMetrics, OnStudio},
	"/api/":        {policy.ReadStudio, OnStudio}, // unknown endpoints: not_found
	"/":            {policy.ReadStudio, OnStudio}, // the degraded API (Unavailable): service_failure

	"POST /api/operator/conversations":                              {policy.CreateConversation, OnStudio},
	"GET /api/operator/conversations":                               {policy.ListConversations, OnStudio},
	"GET /api/operator/conversations/{id}":                          {policy.ReadConversation, OnConversation},
	"PATCH /api/operator/conversations/{id}":                        {policy.UpdateConversation, OnConversation},
	"DELETE /api/operator/conversations/{id}":                       {policy.DeleteConversation, OnConversation},
	"POST /api/operator/conversations/{id}/turns":                   {policy.Converse, OnConversation},
	"POST /api/operator/conversations/{id}/requests/{rid}/cancel":   {policy.CancelTurn, OnConversation},
	"GET /api/operator/conversations/{id}/stream":                   {policy.ReadConversation, OnConversation},
	"POST /api/operator/stream-tickets":                             {policy.MintTicket, OnTicket},
	"GET /api/operator/conversations/{id}/effects/{eid}":            {policy.ReadConversation, OnConversation},
	"POST /api/operator/conversations/{id}/effects/{eid}/ack":       {policy.AcknowledgeEffect, OnConversation},
	"POST /api/operator/conversations/{id}/proposals/{pid}/confirm": {policy.Confirm, OnProposal},
	"POST /api/operator/conversations/{id}/proposals/{pid}/deny":    {policy.Deny, OnProposal},
	"POST /api/operator/conversations/{id}/proposals/{pid}/amend":   {policy.Amend, OnProposal},
	"GET /api/operator/conversations/{id}/proposals":                {policy.ReadConversation, OnConversation},
	"GET /api/operator/conversations/{id}/proposals/{pid}":          {policy.ReadProposal, OnProposal},
	"GET /api/operator/proposals":                                   {policy.ListConversations, OnStudio},
	"GET /api/operator/proposals/{pid}":                             {policy.ReadProposal, OnProposal},
	"GET /api/operator/routes":                                      {policy.ReadStudio, OnStudio},
	"GET /api/operator/tools":                                       {policy.ReadStudio, OnStudio},
	"GET /api/operator/models":                                      {policy.ReadStudio, OnStudio},
	"POST /api/operator/conversations/{id}/fork":                    {policy.Converse, OnConversation},
	"POST /api/operator/conversations/{id}/restore":                 {policy.RestoreConversation, OnConversation},
	"POST /api/operator/conversations/{id}/view":                    {policy.Converse, OnConversation},

	"GET /api/app/events":                   {policy.ReadStudio, OnStudio},
	"GET /api/app/playbooks":                {policy.ReadStudio, OnStudio},
	"POST /api/app/playbooks":               {policy.RunCommand, OnCommand},
	"GET /api/app/playbooks/{ref}":          {policy.ReadStudio, OnStudio},
	"PATCH /api/app/playbooks/{ref}":        {policy.RunCommand, OnCommand},
	"DELETE /api/app/playbooks/{ref}":       {policy.RunCommand, OnCommand},
	"POST /api/app/playbooks/{ref}/launch":  {policy.RunCommand, OnCommand},
	"GET /api/app/workflows":                {policy.ReadStudio, OnStudio},
	"POST /api/app/workflows":               {policy.RunCommand, OnCommand},
	"GET /api/app/workflows/{ref}":          {policy.ReadStudio, OnStudio},
	"PATCH /api/app/workflows/{ref}":        {policy.RunCommand, OnCommand},
	"DELETE /api/app/workflows/{ref}":       {policy.RunCommand, OnCommand},
	"POST /api/app/workflows/{ref}/launch":  {policy.RunCommand, OnCommand},
	"GET /api/app/runs":                     {policy.ReadStudio, OnStudio},
	"POST /api/app/runs":                    {policy.RunCommand, OnCommand},
	"GET /api/app/runs/stats":               {policy.ReadStudio, OnStudio},
	"GET /api/app/runs/activity":            {policy.ReadStudio, OnStudio},
	"GET /api/app/runs/{id}":                {policy.ReadStudio, OnStudio},
	"POST /api/app/runs/{id}/cancel":        {policy.RunCommand, OnCommand},
	"POST /api/app/runs/{id}/retry":         {policy.RunCommand, OnCommand},
	"GET /api/app/schedules":                {policy.ReadStudio, OnStudio},
	"POST /api/app/schedules":               {policy.RunCommand, OnCommand},
	"GET /api/app/schedules/preview":        {policy.ReadStudio, OnStudio},
	"GET /api/app/schedules/{ref}":          {policy.ReadStudio, OnStudio},
	"PATCH /api/app/schedules/{ref}":        {policy.RunCommand, OnCommand},
	"DELETE /api/app/schedules/{ref}":       {policy.RunCommand, OnCommand},
	"POST /api/app/schedules/{ref}/enable":  {policy.RunCommand, OnCommand},
	"POST /api/app/schedules/{ref}/disable": {policy.RunCommand, OnCommand},
	"GET /api/app/system/health":            {policy.ReadHealth, OnStudio},
	"GET /api/app/system/operator":          {policy.ReadHealth, OnStudio},
	"POST /api/app/system/maintenance":      {policy.RunCommand, OnCommand},
	"GET /api/app/audit":                    {policy.ReadAudit, OnStudio},
	"GET /api/app/audit/actors":             {policy.ReadAudit, OnStudio},
	"POST /api/app/commands/{type}":         {policy.RunCommand, OnCommand},

	"POST /mcp": {policy.UseMCP, OnStudio}, // and each tool call (mcpserver)

	"POST /api/agui": {policy.Converse, OnThread}, // and each step of the run (agui)

	"GET /api/auth/whoami":                    {policy.Whoami, OnStudio},
	"GET /api/admin/principals":               {policy.ManagePrincipals, OnStudio},
	"POST /api/admin/principals":              {policy.ManagePrincipals, OnStudio},
	"PATCH /api/admin/principals/{ref}":       {policy.ManagePrincipals, OnStudio},
	"DELETE /api/admin/principals/{ref}":      {policy.ManagePrincipals, OnStudio},
	"PUT /api/admin/principals/{ref}/link":    {policy.ManagePrincipals, OnStudio},
	"DELETE /api/admin/principals/{ref}/link": {policy.ManagePrincipals, OnStudio},
	"POST /api/admin/principals/{ref}/tokens": {policy.ManagePrincipals, OnStudio},
	"GET /api/admin/tokens":                   {policy.ManagePrincipals, OnStudio},
	"DELETE /api/admin/tokens/{id}":           {policy.ManagePrincipals, OnStudio},
	"GET /api/admin/webhooks":                 {policy.ManageWebhooks, OnStudio},
	"POST /api/admin/webhooks":                {policy.ManageWebhooks, OnStudio},
	"DELETE /api/admin/webhooks/{id}":         {policy.ManageWebhooks, OnStudio},
	"GET /api/admin/webhooks/{id}/deliveries": {policy.ManageWebhooks, OnStudio},
	"POST /api/admin/policy/explain":          {policy.ExplainPolicy, OnStudio},
}

// withPolicy is ctx carrying the request's principal and the gate every
// decision below it asks.
func (s *Server) withPolicy(ctx context.Context, p protocol.Principal) context.Context {
	return policy.WithGate(protocol.WithPrincipal(ctx, p), s.gate)
}

// authorize decides the route of r for the principal r's context
// carries. A route's resource that does not exist is left to its handler
// (not_found).
func (s *Server) authorize(r *http.Request) error {
	pattern := r.Pattern
	if pattern == "" {
		pattern = "/api/" // the edge answers /api itself, before the mux: not_found
	}
	route, ok := RouteActions[pattern]
	if !ok {
		return protocol.Errorf(protocol.Denied, "no policy action is defined for this route").With("reason", policy.ReasonPolicy)
	}
	ctx := r.Context()
	switch route.On {
	case OnStudio:
		return policy.Ask(ctx, route.Action, policy.Studio{})
	case OnConversation:
		return s.askConversation(ctx, route.Action, r.PathValue("id"))
	case OnProposal:
		// A conversation in the path is decided first: hidden, it answers
		// as a missing one does.
		if id := r.PathValue("id"); id != "" {
			if err := s.askConversation(ctx, policy.ReadConversation, id); err != nil {
				return err
			}
		}
		// One call's deadline: on a daemon whose database connections
		// hang the request is answered, not left waiting.
		rctx, cancel := context.WithTimeout(ctx, s.callTimeout())
		res, err := s.cfg.Proposals.ProposalResource(rctx, r.PathValue("id"), r.PathValue("pid"))
		cancel()
		if protocol.IsCode(err, protocol.NotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return askProposal(ctx, route.Action, res)
	}
	return nil // OnCommand, OnTicket, OnThread: the handler decides once it has the body
}

// askConversation decides a on conversation id: one the principal may not
// read is not_found, with the answer of one that does not exist.
func (s *Server) askConversation(ctx context.Context, a policy.Action, id string) error {
	res, err := s.cfg.Conversations.PolicyResource(ctx, id)
	if protocol.IsCode(err, protocol.NotFound) {
		return nil // the handler answers not_found
	}
	if err != nil {
		return err
	}
	return policy.AskConversation(ctx, a, res)
}

// askProposal decides a on a proposal: one the principal may not read is
// not_found.
func askProposal(ctx context.Context, a policy.Action, res policy.Proposal) error {
	return policy.AskProposal(ctx, a, res)
}

// RouteTable is RouteActions as a Markdown table, sorted by path then
// method, with each action's least roles under the built-in policies:
// what docs/protocol.md prints.
func RouteTable() string {
	type row struct{ method, path string }
	rows := make([]row, 0, len(RouteActions))
	for pattern := range RouteActions {
		method, path, ok := strings.Cut(pattern, " ")
		if !ok {
			method, path = "any", pattern
		}
		rows = append(rows, row{method, path})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].path != rows[j].path {
			return rows[i].path < rows[j].path
		}
		return rows[i].method < rows[j].method
	})
	e := policy.Default()
	var b strings.Builder
	b.WriteString("| Method | Path | Action | Least role (built-in policies) |\n|---|---|---|---|\n")
	for _, r := range rows {
		pattern := r.method + " " + r.path
		if r.method == "any" {
			pattern = r.path
		}
		route := RouteActions[pattern]
		fmt.Fprintf(&b, "| %s | `%s` | `%s` | %s |\n", r.method, r.path, route.Action, policy.LeastRole(e, route.Action))
	}
	return b.String()
}
