-- Running unattended (docs/api.md, "Webhooks"; docs/receivers.md): pausing a webhook, Standard
-- Webhooks signatures, and operational events.

-- A paused webhook keeps receiving destinations, which wait until it is resumed; `paused_at` says
-- since when (the time paused does not count toward auto-disable).
ALTER TYPE "WebhookStatus" ADD VALUE IF NOT EXISTS 'paused';
ALTER TABLE "webhooks" ADD COLUMN "paused_at" TIMESTAMPTZ(3);

-- `service` (X-Service-* headers) or `standard` (webhook-id, webhook-timestamp, webhook-signature).
ALTER TABLE "webhooks" ADD COLUMN "signature_scheme" TEXT NOT NULL DEFAULT 'service',
  ADD CONSTRAINT "webhooks_signature_scheme_check" CHECK ("signature_scheme" IN ('service', 'standard'));

-- The failing streak of operational events: attempts failed in a row (a success ends it), and
-- since when webhook.failing was made for it (null: not made, or recovered since), so that each is
-- made once, however many dispatchers record attempts.
ALTER TABLE "webhooks" ADD COLUMN "consecutive_failures" INTEGER NOT NULL DEFAULT 0,
  ADD COLUMN "failing_noticed_at" TIMESTAMPTZ(3);

-- Operational events belong to the account, not to an inbox.
ALTER TABLE "events" ALTER COLUMN "inbox_id" DROP NOT NULL;

-- Operational events to make: written in the transaction of what causes them (an attempt's record,
-- a disable), turned into events of the account by a dispatcher (publishNotices), which deletes
-- them in the same transaction. `id` is the event id it becomes, so that making it twice is a no-op.
CREATE TABLE "notices" (
    "id" TEXT NOT NULL,
    "queue_prefix" TEXT NOT NULL,
    "account_id" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "webhook_id" TEXT NOT NULL,
    "data" JSONB NOT NULL,
    "occurred_at" TIMESTAMPTZ(3) NOT NULL DEFAULT now(),

    CONSTRAINT "notices_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "notices_kind_check" CHECK ("kind" IN ('webhook.failing', 'webhook.recovered', 'webhook.disabled', 'destination.failed'))
);
CREATE INDEX "notices_queue_prefix_occurred_at_idx" ON "notices"("queue_prefix", "occurred_at");

-- A notice wakes the relays, which make its event: payload `<queue_prefix> !notices`.
CREATE FUNCTION "notices_notify"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('webhooks_work', p.queue_prefix || ' !notices') FROM (SELECT DISTINCT queue_prefix FROM inserted) AS p;
    RETURN NULL;
END;
$$;
CREATE TRIGGER "notices_notify"
    AFTER INSERT ON "notices" REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION "notices_notify"();
