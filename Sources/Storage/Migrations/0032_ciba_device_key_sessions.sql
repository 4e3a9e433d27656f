-- CIBA (SPEC "CIBA approval", CIBA Core §10.2):
-- 1. The session (refresh family) that enrolled each device key: a session that is not a not-held
--    passkey session approves a CIBA request only with the step-up of a device key it enrolled
--    itself (a "device-key session"). Keys enrolled before this column stay NULL: they approve
--    from not-held passkey sessions only.
ALTER TABLE device_keys ADD COLUMN enrolled_session text;
CREATE INDEX device_keys_enrolled_session ON device_keys(enrolled_session) WHERE enrolled_session IS NOT NULL;

-- 2. A ping-mode request's one notification: the outbox event written with the request, its
--    delivery first due when the request expires, and moved to now by the write that decides the
--    request or expires it early (a fourth pending request).
ALTER TABLE ciba_requests ADD COLUMN ping_event text;
