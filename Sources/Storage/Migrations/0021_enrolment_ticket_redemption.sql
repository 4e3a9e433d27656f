-- Issue 33: an enrolment ticket is used up by the registration verify that stores its passkey, not
-- by the options request: a ceremony that fails keeps the ticket (SPEC "Assurance"). The ceremony's
-- challenge carries the ticket (by its hash) from the options to the verify.
ALTER TABLE challenges ADD COLUMN ticket_hash bytea;

-- A ticket an admin issues by Latchkey's account id (the way back for an account that lost every way
-- in): the passkey it registers is held even when the account has no passkey (SPEC "Admin console").
ALTER TABLE enrolment_tickets ADD COLUMN holds boolean NOT NULL DEFAULT false;
