-- An imported address that nobody has verified here (SPEC "Portability" → Import: "an imported
-- address is unverified"). It lives beside `account_emails`, never in it: `account_emails` holds
-- verified addresses only, and every reader of it — email sign-in, recovery by address, the
-- notices, the last-way-in count, the approvals' subject mail — keeps relying on that without a
-- filter of its own. An unverified address signs nobody in, receives no code and no notice, and
-- counts as no way in; it is kept so that the account's owner can verify it again, and an export
-- carries it with `verifiedAt` null. It does not hold the address against a verified owner: the
-- unique index is among unverified addresses only, and an import checks both tables.
CREATE TABLE unverified_addresses (
    user_id     text PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    email       text NOT NULL,
    imported_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX unverified_addresses_email ON unverified_addresses(email);

-- Once the account has a verified address (its owner verified one, this or another), the
-- unverified claim is gone: an account has one address.
CREATE FUNCTION account_emails_supersede_unverified() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM unverified_addresses WHERE user_id = NEW.user_id;
    RETURN NULL;
END $$;
CREATE TRIGGER account_emails_supersede_unverified AFTER INSERT OR UPDATE OF email ON account_emails
    FOR EACH ROW EXECUTE FUNCTION account_emails_supersede_unverified();
