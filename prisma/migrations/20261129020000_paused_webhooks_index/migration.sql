-- Accepted events go to paused webhooks too (their destinations wait for the resume): the partial
-- index that finds an account's webhooks of every inbox includes them. A migration of its own: the
-- value 'paused' cannot be used in the transaction that added it.
DROP INDEX "webhooks_account_id_id_unscoped_idx";
CREATE INDEX "webhooks_account_id_id_unscoped_idx" ON "webhooks"("account_id", "id")
  WHERE "inbox_ids" IS NULL AND "status" IN ('enabled', 'paused') AND "deleted_at" IS NULL;
