-- Receipts a third party verifies, and the queue of the transparency log.
--
-- A step-up's receipt is a JSON document in RFC 8785 canonical form, stored byte for byte as it was
-- written with the step-up: a verifier hashes exactly these bytes, so they are never rebuilt from
-- the columns. Its commitment, SHA-256 of those bytes, is the leaf the transparency log appends;
-- the receipt itself never enters the log. Receipts stored before this migration have no document
-- and are not logged.
ALTER TABLE step_up_receipts ADD COLUMN document bytea;
ALTER TABLE step_up_receipts ADD COLUMN commitment bytea
    CHECK (commitment IS NULL OR octet_length(commitment) = 32);
ALTER TABLE step_up_receipts ADD CONSTRAINT step_up_receipts_document_committed
    CHECK ((document IS NULL) = (commitment IS NULL));
-- The receipt's index in the log once the integrating writer appended its commitment.
ALTER TABLE step_up_receipts ADD COLUMN log_index bigint UNIQUE;

-- What the integrating writer still has to append, oldest first.
CREATE INDEX step_up_receipts_unlogged ON step_up_receipts (created_at, id)
    WHERE commitment IS NOT NULL AND log_index IS NULL;
