-- Issue 22: the language an account last used (the web app's, from Accept-Language when a session
-- starts or the address is set), so that the mail it gets later — a recovery started by someone
-- else, a code asked for from a signed-out page — speaks it. NULL: never said; mail in English.
-- (Versions 16–18 are other branches'.)
ALTER TABLE users ADD COLUMN language text CHECK (language IS NULL OR language ~ '^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$');
