-- The Studio application's resources (docs/design.md §14): playbooks, workflows
-- with ordered steps, runs, schedules, and the claim rows that make each due
-- schedule slot launch (or be skipped) exactly once.
--
-- Every resource has a UUID id, a project, an integer version (1 on
-- creation, bumped by each change) and created/updated times as Unix seconds.
-- The PostgreSQL twin of the SQLite backend's 0002, statement for statement:
-- booleans stay 0/1 integers and JSON stays TEXT so both backends read the
-- same values; REAL times are DOUBLE PRECISION and 64-bit counters BIGINT.

CREATE TABLE studio_playbooks (
  id           TEXT PRIMARY KEY,
  project      TEXT NOT NULL,
  name         TEXT NOT NULL UNIQUE,
  description  TEXT NOT NULL DEFAULT '',
  prompt       TEXT NOT NULL,
  args_json    TEXT NOT NULL DEFAULT '[]',
  version      BIGINT NOT NULL DEFAULT 1 CHECK (version >= 1),
  created_at   DOUBLE PRECISION NOT NULL,
  updated_at   DOUBLE PRECISION NOT NULL
);

CREATE INDEX idx_playbooks_project ON studio_playbooks(project, name);

CREATE TABLE studio_workflows (
  id           TEXT PRIMARY KEY,
  project      TEXT NOT NULL,
  name         TEXT NOT NULL UNIQUE,
  description  TEXT NOT NULL DEFAULT '',
  version      BIGINT NOT NULL DEFAULT 1 CHECK (version >= 1),
  created_at   DOUBLE PRECISION NOT NULL,
  updated_at   DOUBLE PRECISION NOT NULL
);

CREATE INDEX idx_workflows_project ON studio_workflows(project, name);

-- A playbook used by a step cannot be deleted (the store says conflict
-- first; the foreign key is the backstop).
CREATE TABLE studio_workflow_steps (
  workflow_id  TEXT NOT NULL REFERENCES studio_workflows(id) ON DELETE CASCADE,
  step_index   INTEGER NOT NULL CHECK (step_index >= 0),
  playbook_id  TEXT NOT NULL REFERENCES studio_playbooks(id),
  input        TEXT NOT NULL DEFAULT '',
  args_json    TEXT NOT NULL DEFAULT '{}',
  PRIMARY KEY (workflow_id, step_index)
);

CREATE INDEX idx_workflow_steps_playbook ON studio_workflow_steps(playbook_id);

-- Runs copy the playbook's name, version and prompt at launch and have no
-- foreign key to it: run history outlives edits and deletion.
CREATE TABLE studio_runs (
  id                  TEXT PRIMARY KEY,
  project             TEXT NOT NULL,
  playbook_id         TEXT NOT NULL,
  playbook_name       TEXT NOT NULL,
  playbook_version    BIGINT NOT NULL,
  prompt              TEXT NOT NULL,
  input               TEXT NOT NULL DEFAULT '',
  args_json           TEXT NOT NULL DEFAULT '{}',
  status              TEXT NOT NULL
                      CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
  run_trigger         TEXT NOT NULL CHECK (run_trigger IN ('manual', 'schedule', 'operator')),
  schedule_id         TEXT,
  retry_of            TEXT,
  output              TEXT NOT NULL DEFAULT '',
  output_truncated    INTEGER NOT NULL DEFAULT 0 CHECK (output_truncated IN (0, 1)),
  error_code          TEXT,
  error_message       TEXT,
  version             BIGINT NOT NULL DEFAULT 1 CHECK (version >= 1),
  created_at          DOUBLE PRECISION NOT NULL,
  updated_at          DOUBLE PRECISION NOT NULL,
  started_at          DOUBLE PRECISION,
  ended_at            DOUBLE PRECISION,
  cancel_requested_at DOUBLE PRECISION
);

CREATE INDEX idx_runs_created ON studio_runs(created_at, id);
CREATE INDEX idx_runs_status ON studio_runs(status, created_at, id);
CREATE INDEX idx_runs_playbook ON studio_runs(playbook_id, created_at, id);
CREATE INDEX idx_runs_schedule ON studio_runs(schedule_id, created_at);

-- next_run_at is NULL while a schedule is disabled. The scheduler's
-- bookkeeping (next/last run, skips) does not bump version.
CREATE TABLE studio_schedules (
  id               TEXT PRIMARY KEY,
  project          TEXT NOT NULL,
  name             TEXT NOT NULL UNIQUE,
  cron             TEXT NOT NULL,
  playbook_id      TEXT NOT NULL REFERENCES studio_playbooks(id),
  input            TEXT NOT NULL DEFAULT '',
  args_json        TEXT NOT NULL DEFAULT '{}',
  enabled          INTEGER NOT NULL CHECK (enabled IN (0, 1)),
  next_run_at      DOUBLE PRECISION,
  last_run_at      DOUBLE PRECISION,
  last_run_id      TEXT,
  skipped_runs     BIGINT NOT NULL DEFAULT 0,
  last_skipped_at  DOUBLE PRECISION,
  version          BIGINT NOT NULL DEFAULT 1 CHECK (version >= 1),
  created_at       DOUBLE PRECISION NOT NULL,
  updated_at       DOUBLE PRECISION NOT NULL
);

CREATE INDEX idx_schedules_due ON studio_schedules(enabled, next_run_at);
CREATE INDEX idx_schedules_playbook ON studio_schedules(playbook_id);

-- One row per handled slot: the primary key makes a slot launch or be
-- skipped once, whatever number of schedulers race for it. A skip row
-- stands for skipped_count missed slots starting at scheduled_for.
CREATE TABLE studio_schedule_slots (
  schedule_id    TEXT NOT NULL,
  scheduled_for  DOUBLE PRECISION NOT NULL,
  outcome        TEXT NOT NULL CHECK (outcome IN ('launched', 'skipped')),
  run_id         TEXT,
  skipped_count  BIGINT NOT NULL DEFAULT 0,
  created_at     DOUBLE PRECISION NOT NULL,
  PRIMARY KEY (schedule_id, scheduled_for)
);

CREATE INDEX idx_operator_proposals_status ON studio_operator_proposals(status, created_at);
