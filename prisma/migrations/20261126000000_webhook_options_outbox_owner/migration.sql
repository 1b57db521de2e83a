-- Webhook options of CONTRACT.md section 4 (issues "No endpoint waits for another" and "Webhooks
-- configured the way email platforms configure them"):
-- - rate_limit: the most requests per second sent to the webhook (null: no limit);
-- - inbox_ids: the inboxes whose events it receives (null: every inbox of the account);
-- - headers: its extra request headers, a JSON object encrypted with the webhook secrets'
--   keyring (null: none); never stored in clear.
ALTER TABLE "webhooks" ADD COLUMN "rate_limit" INTEGER,
                       ADD COLUMN "inbox_ids" TEXT[],
                       ADD COLUMN "headers" TEXT,
                       ADD CONSTRAINT "webhooks_rate_limit_check" CHECK ("rate_limit" BETWEEN 1 AND 1000);

-- The kind of a test request (POST /v1/webhooks/{id}/test {event_type}); null: webhook.test.
ALTER TABLE "test_deliveries" ADD COLUMN "event_type" TEXT;

-- Every outbox row names the webhook and the account its work is for, so that the relay can
-- share the dispatchers among webhooks and accounts (CONTRACT.md section 6, fairness). Rows from
-- before have neither and are relayed as before.
ALTER TABLE "outbox" ADD COLUMN "webhook_id" TEXT,
                     ADD COLUMN "account_id" TEXT;
CREATE INDEX "outbox_queue_prefix_webhook_id_id_idx" ON "outbox"("queue_prefix", "webhook_id", "id");
