-- The protocol's five operator tables (docs/design.md §3), exactly as its
-- contract writes them,
-- plus the append-only admin_events table and one-use stream tickets.
-- Added columns (docs/design.md §3 allows them, listed here):
--   studio_operator_conversations.retained_from_sequence: the lowest sequence
--     still stored; a replay from an older cursor is a replay_gap.
--   studio_operator_effects.expires_at: when the effect stops being valid.
--   studio_operator_effects.client_route: the route an applied ack reported,
--     kept so a repeated acknowledgement can be compared with the first.
--   studio_operator_proposals.command_hash: the RFC 8785 SHA-256 the human
--     confirms against.
--   studio_operator_proposals.target_kind, target_id: the rest of the target
--     {kind, id, version} (target_version is the contract's).
--   studio_operator_proposals.call_id: the model tool call the proposal answers.

CREATE TABLE studio_operator_conversations (
  id                 TEXT PRIMARY KEY,
  project            TEXT,
  title              TEXT,
  status             TEXT NOT NULL DEFAULT 'active'
                     CHECK(status IN ('active', 'archived', 'deleted')),
  next_sequence      INTEGER NOT NULL DEFAULT 1,
  active_request_id  TEXT,
  created_at         REAL NOT NULL,
  updated_at         REAL NOT NULL,
  archived_at        REAL,
  deleted_at         REAL,
  retained_from_sequence INTEGER NOT NULL DEFAULT 1
);

CREATE INDEX idx_operator_conversations_created
  ON studio_operator_conversations(created_at, id);

CREATE TABLE studio_operator_turns (
  request_id         TEXT PRIMARY KEY,
  conversation_id   TEXT NOT NULL REFERENCES studio_operator_conversations(id),
  instruction        TEXT NOT NULL,
  context_json       JSON NOT NULL,
  context_hash       TEXT NOT NULL,
  status             TEXT NOT NULL
                     CHECK(status IN ('queued', 'running', 'awaiting_confirmation',
                                      'completed', 'failed', 'cancelled')),
  error_code         TEXT,
  created_at         REAL NOT NULL,
  started_at         REAL,
  ended_at           REAL,
  cancel_requested_at REAL
);

CREATE INDEX idx_operator_turns_status ON studio_operator_turns(status);
CREATE INDEX idx_operator_turns_conversation ON studio_operator_turns(conversation_id, created_at);

CREATE TABLE studio_operator_frames (
  conversation_id   TEXT NOT NULL REFERENCES studio_operator_conversations(id),
  sequence           INTEGER NOT NULL,
  request_id         TEXT NOT NULL REFERENCES studio_operator_turns(request_id),
  frame_type         TEXT NOT NULL,
  payload_json       JSON NOT NULL,
  created_at         REAL NOT NULL,
  PRIMARY KEY(conversation_id, sequence)
);

CREATE INDEX idx_operator_frames_request
  ON studio_operator_frames(request_id, sequence);

CREATE TABLE studio_operator_proposals (
  id                 TEXT PRIMARY KEY,
  conversation_id   TEXT NOT NULL REFERENCES studio_operator_conversations(id),
  request_id         TEXT NOT NULL REFERENCES studio_operator_turns(request_id),
  command_type       TEXT NOT NULL,
  command_json       JSON NOT NULL,
  target_version     TEXT,
  risk               TEXT NOT NULL CHECK(risk IN ('mutate', 'execute', 'admin')),
  summary            TEXT NOT NULL,
  idempotency_key    TEXT NOT NULL UNIQUE,
  status             TEXT NOT NULL
                     CHECK(status IN ('pending', 'confirmed', 'executing', 'succeeded',
                                      'failed', 'expired', 'cancelled', 'conflict')),
  expires_at         REAL NOT NULL,
  confirmed_at       REAL,
  completed_at       REAL,
  result_json        JSON,
  error_code         TEXT,
  created_at         REAL NOT NULL,
  command_hash       TEXT NOT NULL,
  target_kind        TEXT,
  target_id          TEXT,
  call_id            TEXT NOT NULL
);

CREATE INDEX idx_operator_proposals_request ON studio_operator_proposals(request_id);

CREATE TABLE studio_operator_effects (
  id                 TEXT PRIMARY KEY,
  conversation_id   TEXT NOT NULL REFERENCES studio_operator_conversations(id),
  request_id         TEXT NOT NULL REFERENCES studio_operator_turns(request_id),
  effect_type        TEXT NOT NULL,
  effect_json        JSON NOT NULL,
  status             TEXT NOT NULL DEFAULT 'pending'
                     CHECK(status IN ('pending', 'applied', 'rejected', 'expired')),
  emitted_at         REAL NOT NULL,
  acknowledged_at    REAL,
  rejection_code     TEXT,
  expires_at         REAL NOT NULL,
  client_route       TEXT
);

CREATE INDEX idx_operator_effects_conversation
  ON studio_operator_effects(conversation_id, status);

CREATE TABLE admin_events (
  id                 INTEGER PRIMARY KEY AUTOINCREMENT,
  created_at         REAL NOT NULL,
  actor              TEXT NOT NULL,
  action             TEXT NOT NULL,
  target_id          TEXT,
  details            JSON NOT NULL
);

CREATE INDEX idx_admin_events_target ON admin_events(target_id, id);
CREATE INDEX idx_admin_events_action ON admin_events(action, id);

-- The database itself keeps the audit trail append-only.
CREATE TRIGGER admin_events_no_update BEFORE UPDATE ON admin_events
BEGIN
  SELECT RAISE(ABORT, 'admin_events is append-only');
END;

CREATE TRIGGER admin_events_no_delete BEFORE DELETE ON admin_events
BEGIN
  SELECT RAISE(ABORT, 'admin_events is append-only');
END;

CREATE TABLE studio_operator_stream_tickets (
  ticket_hash        TEXT PRIMARY KEY,
  conversation_id   TEXT NOT NULL REFERENCES studio_operator_conversations(id),
  after_sequence     INTEGER NOT NULL,
  expires_at         REAL NOT NULL,
  created_at         REAL NOT NULL,
  used_at            REAL
);
