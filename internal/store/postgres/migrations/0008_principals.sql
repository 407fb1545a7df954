-- Principals and personal tokens: who acts through the API.
--
-- studio_principals: a named identity with one role (viewer, agent,
--   operator, approver, admin). Names are unique for ever: a disabled
--   principal keeps its name, so the audit's actor (the name) never
--   comes to mean someone else.
-- studio_principal_tokens: a principal's bearer tokens, stored only as
--   the SHA-256 of the token (hex); prefix is the token's visible start,
--   to recognise it in a list. A token may expire and be revoked.
-- studio_operator_turns.submitted_by: the principal (name) that submitted
--   the turn; NULL for turns submitted before principals existed.
-- studio_operator_proposals.submitted_by, decided_by: who submitted the
--   turn that produced the proposal, and who confirmed or denied it.

CREATE TABLE studio_principals (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    role        TEXT NOT NULL CHECK (role IN ('viewer', 'agent', 'operator', 'approver', 'admin')),
    created_at  DOUBLE PRECISION NOT NULL,
    disabled_at DOUBLE PRECISION
);

CREATE TABLE studio_principal_tokens (
    id           TEXT PRIMARY KEY,
    principal_id TEXT NOT NULL REFERENCES studio_principals (id),
    token_hash   TEXT NOT NULL UNIQUE,
    prefix       TEXT NOT NULL,
    created_at   DOUBLE PRECISION NOT NULL,
    expires_at   DOUBLE PRECISION,
    revoked_at   DOUBLE PRECISION,
    last_used_at DOUBLE PRECISION
);

CREATE INDEX studio_principal_tokens_principal ON studio_principal_tokens (principal_id);

ALTER TABLE studio_operator_turns ADD COLUMN submitted_by TEXT;
ALTER TABLE studio_operator_proposals ADD COLUMN submitted_by TEXT;
ALTER TABLE studio_operator_proposals ADD COLUMN decided_by TEXT;
