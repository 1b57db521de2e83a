-- Listen webhooks (docs/develop-locally.md): a webhook with no URL whose work waits in the queue
-- until its developer pulls it (GET /v1/webhooks/{id}/pending); the dispatchers never push it.
ALTER TYPE "DisabledReason" ADD VALUE IF NOT EXISTS 'idle';
ALTER TABLE "webhooks" ALTER COLUMN "url" DROP NOT NULL,
  ADD COLUMN "mode" TEXT NOT NULL DEFAULT 'push',
  ADD COLUMN "last_pulled_at" TIMESTAMPTZ(3),
  ADD CONSTRAINT "webhooks_mode_check" CHECK ("mode" IN ('push', 'listen')),
  ADD CONSTRAINT "webhooks_url_mode_check" CHECK (("url" IS NULL) = ("mode" = 'listen'));
-- The listen webhooks a dispatcher looks at for idleness (LISTEN_IDLE_HOURS).
CREATE INDEX "webhooks_listen_idx" ON "webhooks"("last_pulled_at") WHERE "mode" = 'listen' AND "status" <> 'disabled';
-- A pulled attempt: the id its delivery row gets when its answer is recorded (POST
-- /v1/webhooks/{id}/pending/{delivery_id}); the next pull of the same work gives another.
ALTER TABLE "work_items" ADD COLUMN "pull_id" TEXT;
CREATE UNIQUE INDEX "work_items_pull_id_key" ON "work_items"("pull_id");
-- What a listen webhook's developer holds, by expiry: counted and taken back by the next pull.
CREATE INDEX "work_items_pulled_idx" ON "work_items"("webhook_id", "leased_until") WHERE "pull_id" IS NOT NULL;
-- A pulled attempt went to no URL: its delivery row, and a replay of a listen webhook to its own
-- destination (with its audit entry), have none.
ALTER TABLE "deliveries" ALTER COLUMN "url" DROP NOT NULL;
ALTER TABLE "replays" ALTER COLUMN "destination_url" DROP NOT NULL;
ALTER TABLE "audit_entries" ALTER COLUMN "destination_url" DROP NOT NULL;
