// Package coordinator owns the operator's turns (docs/design.md §6, §9,
// §10, §13): submission with one active turn per conversation and a bounded
// queue, the model loop with deadlines and retries, tool calls and
// effects, the proposal lifecycle (propose, confirm, deny, expire,
// execute, reconcile), cancellation, restart recovery and shutdown. Every
// frame goes through the store before any stream sees it. Conversations
// themselves, their pages, streams and tickets, and the live views are the
// conversation service's (internal/conversations), whose visibility rules
// the engine applies.
//
// # One owner per turn
//
// Each active turn of this process has exactly one owner: a goroutine
// (owner, owner.go) started when the turn is accepted, or when recovery or
// a decision finds a turn waiting for a human, that lives until the turn's
// done frame is durable. Every event that can change the turn reaches it
// through the owner: model output arrives on a channel only the owner
// reads; cancel, confirm, deny and expiry are requests in its mailbox;
// store failures are its own return values; shutdown is its context. The
// owner handles one event at a time, so two transitions of one turn never
// interleave: a cancel that arrives while a confirmed command executes is
// answered at once and applied after the command's result is recorded; a
// deny that arrives after a confirm sees the confirm's outcome. The owner
// also runs the proposal's execution, so the turn cannot end under it.
//
// A goroutine per turn, rather than a per-conversation lock held across
// each transition, because the owner must wait on several things at once —
// a model stream, a worker slot, a human, a command's execution, the next
// retry of a failed write — and react to a cancel during any of them; a
// lock held across a model stream would make a cancel wait for the model.
//
// Terminal transitions happen in one place: owner.finish (ending.go), which
// closes the turn's open proposals and writes the error and done frames
// with store.FinishTurn, retrying with capped backoff until it is durable.
// A store outage therefore delays a turn's end but never loses it.
//
// The owner parked on a human holds no worker. Workers (pool.go) bound the
// turns that talk to the model at once; a bounded queue in front of them
// refuses new turns with rate_limited instead of accepting work it cannot
// start. Model attempts have deadlines (first event, idle, total), so a hung
// provider ends its attempt with a retryable model_failure and frees the
// worker.
//
// # Several daemons on one database
//
// Several daemons may share one PostgreSQL database (Config.Shared): the
// store's compare-and-set transitions still decide between them, and each
// unfinished turn names its owner instance in the store (claims.go,
// reaper.go). A daemon with a free worker claims queued turns that wait in
// another daemon, so a busy daemon holds no work hostage; cancels recorded
// by another daemon reach the owner through the store's control
// notifications, interrupting its model stream at once; a decision about a
// turn that has no owner here adopts one from the stored state — a turn
// parked on a human belongs to no process — and a parked owner steps aside
// when its conversation's frames show that another process moved its turn
// on. When a daemon dies (or hangs), its lease expires and a reaper on any
// other daemon takes its work over (ReapOrphans): exactly once, because
// each turn is taken over by one compare-and-set on its owner. A proposal
// it was executing moves to the new owner with its turn, and is recorded
// from its execution marker — executed, its result read back, or not
// executed — before the turn goes on there.
//
// A daemon that was paused or cut off may resume after its work was taken
// over: every write of its owners carries its instance as a fence
// (store.Fence), checked inside the write's transaction, and the write of
// a confirmed command is fenced by its proposal's owner and epoch and marks
// the proposal executed in the same transaction. So a stale owner can
// neither append nor execute: its write fails, and it stops (durable.go's
// lost, confirm.go's executionLost). Before that, a daemon that cannot
// prove its lease fences itself (selffence.go): no decision, claim,
// takeover or execution starts until it renews, and a decision waiting on
// it is answered at once. Every database call on a turn's paths has a
// deadline (Config.CallTimeout); writes that fail because the database is
// away for a moment are retried for Config.OutageBudget (durable.go), and
// the turn's progress says database_unavailable.
//
// # The turn's states
//
// Each name is a step of the owner (a method that returns the next step;
// owner.run calls them in turn); the stored status is in brackets.
//
//	SubmitTurn
//	    |
//	    v
//	queued [queued]
//	    |
//	    v
//	waiting for a worker <----------- resuming <-------------------+
//	    |  (StartTurn: running)                                    |
//	    v                                                          |
//	conversing [running] ---------------------------------+        |
//	    |  the model, tools                               |        |
//	    |  a command tool proposes                        |        |
//	    v                                                 |        |
//	parked on a decision ---- deny, expire, stale target -|------->+
//	[awaiting_confirmation] <-- adopted: a decision or    |        |
//	    |          |            Recover finds it parked   |        |
//	    | confirm  | cancel,                              |        |
//	    v          | reaped                               |        |
//	executing -----|------------ result recorded ---------|------->+
//	    |          |                                      |
//	    | cancelled meanwhile, or the result not recorded |  answer, error, cancel,
//	    v          v                                      v  shutdown, reaped
//	ending: finish, then endTurn in one transaction, retried until durable
//	    |
//	    v
//	done [completed | failed | cancelled]
//
// waiting ends the turn too (cancel; at shutdown a queued turn is handed
// to another daemon or fails, a resumed one fails). executing ends it when
// the turn was cancelled meanwhile (after the command's result is
// recorded) or when the result could not be recorded. A parked owner that
// sees the daemon stop leaves the turn parked in the store: the next
// decision or start adopts it.
//
// # The proposal's states
//
//	propose (createProposal)
//	   |
//	   v
//	pending --- deny, or its turn ends first ----> cancelled
//	   |   \--- expire ----------------------------> expired
//	   |    \-- the target changed (refuseStale) --> conflict
//	   |     \- amend ----> cancelled (amended), and a new pending one
//	   | confirm (confirmProposal)
//	   v
//	executing --- finishProposal ---> succeeded | failed
//	   |
//	   +-- its daemon died (shared database): the daemon that takes it
//	   |   over records it from its marker (settleTakenOver): succeeded,
//	   |   its result read back, or failed, not_executed
//	   +-- alone (SQLite), the result cannot be recorded, or the daemon
//	       died: it stays executing, audited indeterminate
//	       (markIndeterminate, recovery), until reconcile_proposal
//	       settles it (SettleProposal)
//
// Each arrow out of pending or executing is one function in
// transitions.go taking its params struct (the reaper's, in reaper.go,
// for a dead daemon's): one store transaction with the proposal's audit
// row and frames, a compare-and-set from the state it leaves.
//
// # Where to read
//
//	coordinator.go  Config, its defaults, New: what the engine is wired with
//	turns.go        SubmitTurn, CancelTurn: the public face of turns
//	decisions.go    Confirm, Deny, SettleProposal: decisions from outside
//	proposals.go    propose, and reading proposals (Get, Find, List)
//	effects.go      AckEffect, EffectState: a client's acknowledgements
//	progress.go     what an active turn is doing now (ActiveTurn)
//	models.go       the configured models and a conversation's choice
//	agents.go       outside agents' (MCP) conversations and commands as turns
//	observer.go     Observer: what metrics and logs are told
//	mailbox.go      the requests an owner takes, one at a time
//	owner.go        the owner: its start, run loop, retirement (late requests)
//	cancels.go      cancels taken in: from the mailbox, from other daemons
//	steps.go        queued, waiting, resuming, conversing
//	talk.go         the model loop: its rounds (an agent's one), the context
//	context.go      the history within the context budget, as messages
//	prompt.go       the system prompt from the client's context snapshot
//	attempts.go     one round's attempts: deadlines, retries; their outcome
//	appender.go     a turn's pipelined frames: emit, settle; durable after them
//	tools.go        tool calls and effects; proposals.go's propose
//	denials.go      a command a human denied is not proposed again at once
//	waiting.go      turns sent while another runs: enqueue, interrupt, the line
//	parked.go       parked on a decision; applyDecision; adopted, taken over
//	confirm.go      confirm and execute on the owner's side
//	answers.go      decisions answered from the store, not applied
//	amend.go        an amended proposal
//	ending.go       the turn's one end (finish)
//	transitions.go  the store transitions, each with its params struct
//	durable.go      riding out the database; a fenced (lost) turn
//	selffence.go    no decision, claim or takeover on an unproven lease
//	pool.go         the workers and the bounded queue in front of them
//	claims.go, reaper.go, lifecycle.go: other daemons, recovery, shutdown
//	conversations.go  the engine's side of internal/conversations
//
// Dependencies point one way: the public API (turns.go, decisions.go)
// puts requests in an owner's mailbox; the owner's steps call the
// transitions; the transitions call the store. No transition reads an
// owner, and no step calls the public API (layers_test.go checks both).
// Lower files do not call back up: few pairs of files call each other
// both ways (twoway_test.go), the steps' own (steps.go and parked.go) —
// a step names the next, and a decision resumes the turn.
//
// # Where a confirm goes
//
// HTTP (httpapi) → Coordinator.Confirm checks the command hash and target
// version → deliverDecision → sendDecision finds the turn's owner
// (ownerFor, adopting a parked turn) and puts a decisionRequest in its
// mailbox → the parked step takes it → applyDecision: an expired proposal
// is expired (expireProposal); else confirm re-reads the target
// (refuseStale when it changed), confirmProposal (pending → executing, its
// audit row and frame), execute, finishProposal (its outcome, audit row
// and frames) → the answer goes back on the request's reply channel →
// the turn resumes (resuming → waiting → conversing).
//
// # Where a frame goes
//
// The provider's stream runs on a goroutine of its own (pump, attempts.go)
// and reaches the owner's attempt, which coalesces text deltas → emit
// queues the payload on the turn's appender (appender.go) and the model
// goes on → the appender's one AppendFrames in flight takes every payload
// queued → the store runs it in its group-commit loop, merged with the
// other appends of the batch (internal/store/sqlstore: group.go,
// mergedappends.go; lockedappends.go on PostgreSQL), gives the frames
// their sequences under the conversation's lock and commits → only then
// does it hand them to store.Feed.Publish, and on PostgreSQL a
// notification carries them to the other daemons' Feeds → every stream
// subscribed to the conversation (conversations.Service.Subscribe,
// httpapi's stream.go) writes them to its client. So no client sees a
// frame that is not durable; the owner waits for its frames (settle)
// before any other write of the turn and before a tool runs.
//
// # Why a confirm cannot race a cancel
//
// Both are requests in the same mailbox, and the one owner takes one at a
// time. A cancel taken first ends the turn, whose end closes the pending
// proposal (cancelWithTurn), so the confirm after it answers cancelled. A
// confirm taken first moves the proposal to executing; a cancel arriving
// while the command runs is answered at once (running, cancelRequestedAt)
// and applied after the result is recorded: the command ran exactly once
// and the turn ends cancelled. Between daemons the store decides: each
// transition is a compare-and-set from pending, so one wins and the other
// answers the stored outcome (answerFailed).
package coordinator
