package protocol

import "github.com/go-json-experiment/json/jsontext"

// The wire types of a conversation's history and choices: forks, models, live view reports and amended
// proposals.

// ForkOrigin is where a fork's history came from: the source conversation
// and the sequence of the done frame its copy ends with; the fork's frames
// 1..CopiedThrough are that copy.
type ForkOrigin struct {
	ConversationID string `json:"conversationId"`
	Sequence       int64  `json:"sequence"`
	CopiedThrough  int64  `json:"copiedThrough"`
}

// ForkRequest is the body of POST .../conversations/{id}/fork.
type ForkRequest struct {
	// UpToSequence must be the sequence of a done frame (or 0: an empty
	// fork); omitted forks after the newest complete turn.
	UpToSequence *int64  `json:"upToSequence,omitempty"`
	Title        *string `json:"title,omitempty"`
}

// ModelInfo is one configured model (GET /operator/models).
type ModelInfo struct {
	Name      string `json:"name"`     // what a conversation's model names
	Provider  string `json:"provider"` // offline, openai, anthropic, script
	Model     string `json:"model,omitempty"`
	Default   bool   `json:"default"`
	Reachable bool   `json:"reachable"`
	// Problem says why a model is not reachable (no secrets).
	Problem       string        `json:"problem,omitempty"`
	ContextLimits ContextLimits `json:"contextLimits"`
}

// ContextLimits are what a turn's model context may hold: the earlier
// turns the compiler includes (frames and bytes) and, when configured,
// the model's own context window in tokens.
type ContextLimits struct {
	HistoryFrames int `json:"historyFrames"`
	HistoryBytes  int `json:"historyBytes"`
	ContextTokens int `json:"contextTokens,omitempty"`
}

// ModelList is GET /operator/models.
type ModelList struct {
	Models  []ModelInfo `json:"models"`
	Default string      `json:"default"`
}

// ViewReport is the body of POST .../conversations/{id}/view: what the
// operator looks at now, observed by the cockpit at ObservedAt (Unix
// seconds).
type ViewReport struct {
	ContextSnapshot
	ObservedAt float64 `json:"observedAt"`
}

// Validate checks the report's shape.
func (v ViewReport) Validate() error {
	if v.ObservedAt <= 0 {
		return Errorf(Validation, "observedAt is required (Unix seconds)").With("field", "observedAt")
	}
	return v.ContextSnapshot.Validate()
}

// ViewAccepted answers a view report: whether it is now the freshest.
type ViewAccepted struct {
	Accepted   bool    `json:"accepted"`
	ObservedAt float64 `json:"observedAt"` // of the freshest report kept
}

// AmendProposalRequest is the body of POST .../proposals/{id}/amend: the
// operator's edited command, of the proposal's command type, and the hash
// of the proposal as shown.
type AmendProposalRequest struct {
	ExpectedCommandHash string         `json:"expectedCommandHash"`
	Command             jsontext.Value `json:"command"`
}
