-- Quorum approvals: several people, one action, with a time lock the owner can stop.
-- A policy names who may open an approval and who may approve it; an approval collects distinct
-- accounts' step-ups on one action hash, waits out the policy's delay, and is used once.

-- Policies, by name; `document` is the policy's JSON as the admin API shows it (normalised).
CREATE TABLE approval_policies (
    name        text PRIMARY KEY,
    document    text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    updated_by  text NOT NULL                        -- an admin's user id, or "admin-key"
);

-- One approval. The policy is copied in as it was when the approval was opened (a later change
-- of the policy changes no open approval). `state` is what was last written: `collecting`,
-- `waiting` (needed reached; `usable_at` = then + delay), `used` or `vetoed`; `approved` (now ≥
-- usable_at) and `expired` (now ≥ expires_at, neither used nor vetoed) follow from time alone and
-- are computed when read. `counted` is the accounts counted so far: an update of this row decides
-- whether an account counts, so concurrent approvals of one account count once. `announced` is the
-- last state an event was written for, so each of `approval.approved` and `approval.expired` is
-- written once, by whichever request first observes it.
CREATE TABLE approvals (
    id              text PRIMARY KEY,
    policy          text NOT NULL,
    policy_document text NOT NULL,
    requester       text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    subject         text REFERENCES users(id) ON DELETE CASCADE,
    action          text NOT NULL,                  -- the action's RFC 8785 bytes
    action_hash     bytea NOT NULL,
    display         text,                           -- `{"lang","lines"}` as sent, or null
    needed          integer NOT NULL CHECK (needed >= 1),
    delay_seconds   integer NOT NULL CHECK (delay_seconds >= 0),
    break_glass     boolean NOT NULL DEFAULT false,
    counted         text[] NOT NULL DEFAULT '{}',
    state           text NOT NULL DEFAULT 'collecting' CHECK (state IN ('collecting', 'waiting', 'used', 'vetoed')),
    announced       text NOT NULL DEFAULT 'requested' CHECK (announced IN ('requested', 'approved', 'expired', 'vetoed', 'used')),
    created_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    usable_at       timestamptz,
    used_at         timestamptz,
    vetoed_at       timestamptz,
    vetoed_by       text
);
-- The requester's approvals of the last hour (at most 10 opened an hour).
CREATE INDEX approvals_requester_created ON approvals(requester, created_at);
CREATE INDEX approvals_subject ON approvals(subject) WHERE subject IS NOT NULL;

-- Who approved: one entry per account, with the receipt of the step-up that approved.
CREATE TABLE approval_entries (
    approval_id text NOT NULL REFERENCES approvals(id) ON DELETE CASCADE,
    user_id     text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    receipt_id  text NOT NULL REFERENCES step_up_receipts(id) ON DELETE CASCADE,
    approved_at timestamptz NOT NULL,
    break_glass boolean NOT NULL DEFAULT false,
    PRIMARY KEY (approval_id, user_id)
);

-- The subject's cancel link (stored as its SHA-256): vetoes its approval once, while it can
-- still be vetoed.
CREATE TABLE approval_cancel_tokens (
    hash        bytea PRIMARY KEY,
    approval_id text NOT NULL REFERENCES approvals(id) ON DELETE CASCADE,
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz
);
CREATE INDEX approval_cancel_tokens_approval ON approval_cancel_tokens(approval_id);
