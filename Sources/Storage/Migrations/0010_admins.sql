-- Issue 14: admins are Latchkey users with the admin role; the admin console signs them in with
-- passkeys. (0008 and 0009 are taken by branches not merged here yet.)
CREATE TABLE admins (
    user_id     text PRIMARY KEY REFERENCES users(id),
    created_at  timestamptz NOT NULL DEFAULT now(),
    created_by  text NOT NULL                        -- who granted the role ("cli", an admin's user id)
);

-- The audit log's filters (GET /admin/v1/audit?user=&action=), newest first.
CREATE INDEX audit_log_actor ON audit_log(actor, id DESC);
CREATE INDEX audit_log_subject ON audit_log(subject, id DESC);
CREATE INDEX audit_log_action ON audit_log(action, id DESC);
