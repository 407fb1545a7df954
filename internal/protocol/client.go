package protocol

import "slices"

// ClientKind is what kind of client submitted a turn, and so what it can
// do with the answer (docs/protocol.md §4): the cockpit applies UI effects
// (navigation, selection, theme, form prefill) and shows proposals as
// cards; the others only show text and proposals, so a turn of theirs
// answers with the data itself, never by moving a screen they do not have.
type ClientKind string

// The client kinds. A turn that names none is the cockpit's.
const (
	ClientCockpit ClientKind = "cockpit" // the web cockpit: applies effects
	ClientCLI     ClientKind = "cli"     // studio operator send: a terminal; proposals are confirmed with studio operator confirm
	ClientMCP     ClientKind = "mcp"     // an MCP client (an agent or an editor): text and proposals
	ClientText    ClientKind = "text"    // any text-only client: a chat bridge, a script
)

// ClientKinds lists the kinds, in the protocol's order.
var ClientKinds = []ClientKind{ClientCockpit, ClientCLI, ClientMCP, ClientText}

// Valid reports whether k is a kind ("" included: the cockpit).
func (k ClientKind) Valid() bool { return k == "" || slices.Contains(ClientKinds, k) }

// AppliesEffects reports whether the client applies UI effects: the
// cockpit, and a client that does not say what it is.
func (k ClientKind) AppliesEffects() bool { return k == "" || k == ClientCockpit }
