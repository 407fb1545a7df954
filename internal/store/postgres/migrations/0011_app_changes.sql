-- The application change log: one row per committed change of a run,
-- schedule, playbook or workflow, written in the change's own transaction.
-- GET /api/app/events streams it; seq is the stream's cursor.
--
-- studio_app_change_counter: one row; a transaction that records changes
--   takes its next numbers from it (an UPDATE, so the row lock orders
--   concurrent writers' commits: a reader never sees seq N+1 committed
--   before seq N).
-- studio_app_changes: the newest changes (older ones are pruned).

CREATE TABLE studio_app_change_counter (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    last BIGINT NOT NULL
);
INSERT INTO studio_app_change_counter (id, last) VALUES (1, 0);

CREATE TABLE studio_app_changes (
    seq         BIGINT PRIMARY KEY,
    type        TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    created_at  DOUBLE PRECISION NOT NULL
);
