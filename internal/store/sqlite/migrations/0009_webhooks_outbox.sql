-- Webhooks and their durable outbox of deliveries.
--
-- studio_webhooks: a receiver's URL, the events it subscribes to (events
--   holds them comma-separated with a comma at each end, ",turn.failed,",
--   so one LIKE finds the subscribers of an event), the body's format
--   (standard or slack) and the signing secret. The secret is stored
--   as given (whsec_...): the daemon needs it to sign every delivery, so
--   it cannot be kept only as a hash. A removed webhook is disabled, not
--   deleted: its deliveries stay listable.
-- studio_webhook_deliveries: the outbox. One row per event and subscribed
--   webhook, inserted in the transaction of the state change that causes
--   the event, so a crash loses none. id is the message id (the
--   webhook-id header), unique per delivery and the same on every retry;
--   payload is the standard body, stored as text so that the bytes
--   signed are the bytes stored. A dispatcher claims a due row
--   (claimed_by, claim_expires_at, claim_epoch: like a run's owner and
--   epoch), posts it, and records the attempt: delivered, pending again
--   at next_attempt_at, or failed after about a day of attempts.

CREATE TABLE studio_webhooks (
    id          TEXT PRIMARY KEY,
    url         TEXT NOT NULL,
    events      TEXT NOT NULL,
    format      TEXT NOT NULL CHECK (format IN ('standard', 'slack')),
    secret      TEXT NOT NULL,
    created_at  REAL NOT NULL,
    created_by  TEXT NOT NULL,
    disabled_at REAL
);

CREATE TABLE studio_webhook_deliveries (
    id               TEXT PRIMARY KEY,
    webhook_id       TEXT NOT NULL REFERENCES studio_webhooks (id),
    event_type       TEXT NOT NULL,
    payload          TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  REAL NOT NULL,
    last_status      INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT,
    claimed_by       TEXT,
    claim_expires_at REAL,
    claim_epoch      BIGINT NOT NULL DEFAULT 0,
    created_at       REAL NOT NULL,
    delivered_at     REAL
);

-- The dispatcher's claim: the due pending rows, oldest first.
CREATE INDEX studio_webhook_deliveries_due ON studio_webhook_deliveries (status, next_attempt_at);
-- A webhook's deliveries, newest first.
CREATE INDEX studio_webhook_deliveries_webhook ON studio_webhook_deliveries (webhook_id, created_at);
