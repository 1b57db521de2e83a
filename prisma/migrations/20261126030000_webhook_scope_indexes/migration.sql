-- The webhooks an accepted event goes to (packages/delivery-state ingest.ts, CONTRACT.md section 4
-- `inbox_ids`), found by index whatever the number of webhooks of the account (docs/indexes.md):
-- - those of every inbox (inbox_ids null), enabled and not deleted, by account;
-- - those scoped to inboxes, by inbox id (GIN: `inbox_ids && <the statement's inbox ids>`).
CREATE INDEX "webhooks_account_id_id_unscoped_idx" ON "webhooks"("account_id", "id")
  WHERE "inbox_ids" IS NULL AND "status" = 'enabled' AND "deleted_at" IS NULL;
CREATE INDEX "webhooks_inbox_ids_idx" ON "webhooks" USING GIN ("inbox_ids");
