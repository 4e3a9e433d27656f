-- Issue 12: a generic outbox. A row of outbox_events is one event, written in the same transaction
-- as the change it reports; it fans out, in that same transaction, to one outbox_deliveries row per
-- channel target (a webhook endpoint subscribed to its type at that moment; later also mail).
-- Workers in every instance claim due deliveries with FOR UPDATE SKIP LOCKED and a lease that
-- expires, send outside the transaction, and record the outcome (OutboxRepository).
-- (0007 belongs to another branch; the gap is deliberate.)
CREATE TABLE outbox_events (
    id          text PRIMARY KEY,                  -- the event id (webhook-id on the wire)
    seq         bigserial NOT NULL UNIQUE,         -- write order: per account, deliveries go out in it
    type        text NOT NULL,                     -- e.g. passkey.created
    account_id  text NOT NULL,                     -- the account the event is about ('' when none)
    data        jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL               -- created_at + the give-up age (LATCHKEY_WEBHOOK_MAX_AGE)
);

CREATE TABLE webhook_endpoints (
    id          text PRIMARY KEY,
    url         text NOT NULL,
    events      jsonb NOT NULL,                    -- the subscribed types, a JSON array of strings
    secret      bytea NOT NULL,                    -- sealed (AES-256-GCM) by the server, never stored plain
    created_at  timestamptz NOT NULL DEFAULT now(),
    deleted_at  timestamptz
);

CREATE TABLE outbox_deliveries (
    event_id         text NOT NULL REFERENCES outbox_events(id) ON DELETE CASCADE,
    channel          text NOT NULL,                -- 'webhook' (target = webhook_endpoints.id); 'mail' next
    target           text NOT NULL,
    seq              bigint NOT NULL,              -- the event's, copied for the ordering check
    account_id       text NOT NULL,                -- the event's, copied for the ordering check
    status           text NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'delivered', 'failed', 'cancelled')),
    attempts         integer NOT NULL DEFAULT 0,   -- sends started (a claim counts one)
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    expires_at       timestamptz NOT NULL,         -- give up once a retry would fall after this
    lease_id         text,                         -- the claim that may record an outcome
    leased_until     timestamptz,                  -- a claim nobody finished comes back after this
    last_status_code integer,
    last_error       text,
    finished_at      timestamptz,
    PRIMARY KEY (event_id, channel, target)
);
-- Workers: what is due on a channel.
CREATE INDEX outbox_deliveries_due ON outbox_deliveries(channel, next_attempt_at) WHERE status = 'pending';
-- The ordering check: an earlier pending delivery for the same target and account holds this one back.
CREATE INDEX outbox_deliveries_order ON outbox_deliveries(channel, target, account_id, seq) WHERE status = 'pending';
-- GET /admin/v1/webhooks/{id}/deliveries, newest first.
CREATE INDEX outbox_deliveries_target ON outbox_deliveries(channel, target, seq DESC);
