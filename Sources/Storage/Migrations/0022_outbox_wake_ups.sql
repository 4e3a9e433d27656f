-- Issue 34: deliveries wake every instance's workers. A statement that writes outbox deliveries
-- NOTIFYs channel `latchkey_outbox` once per outbox channel it wrote to (the payload: `webhook`,
-- `mail`), delivered at commit to every instance that LISTENs (on the config feed's connection).
-- A rolled-back change notifies nobody; PostgreSQL folds identical notifications of one transaction
-- into one. The workers' periodic poll stays as the safety net (no LISTEN behind a pooler without a
-- direct URL, a notification lost while a LISTEN connection was down).
CREATE FUNCTION latchkey_outbox_written() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('latchkey_outbox', w.channel) FROM (SELECT DISTINCT channel FROM written) AS w;
    RETURN NULL;
END $$;
CREATE TRIGGER outbox_deliveries_written AFTER INSERT ON outbox_deliveries
    REFERENCING NEW TABLE AS written
    FOR EACH STATEMENT EXECUTE FUNCTION latchkey_outbox_written();
