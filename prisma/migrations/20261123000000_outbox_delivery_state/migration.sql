-- "Accepted means delivered" (CONTRACT.md section 5): what a request accepts is committed in one
-- transaction together with an outbox row; relays in the dispatchers move outbox rows into
-- BullMQ. Every unit of delivery work (destination, replay, test delivery) is a row with a
-- status and the QUEUE_PREFIX of the deployment that owns it, so that a deployment's relay and
-- sweeper never take another deployment's rows.

-- A destination whose webhook was disabled or deleted before delivery (section 5). Not used in
-- this migration: a new enum value cannot be used in the transaction that adds it.
ALTER TYPE "DeliveryStatus" ADD VALUE 'cancelled';

-- CreateTable
CREATE TABLE "outbox" (
    "id" BIGSERIAL NOT NULL,
    "queue_prefix" TEXT NOT NULL,
    "job_name" TEXT NOT NULL,
    "job_id" TEXT NOT NULL,
    "data" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "outbox_pkey" PRIMARY KEY ("id")
);
CREATE INDEX "outbox_queue_prefix_id_idx" ON "outbox"("queue_prefix", "id");
CREATE INDEX "outbox_job_id_idx" ON "outbox"("job_id");

-- Destinations: owned by one deployment; the old sweeper's index is replaced by the keyset one.
ALTER TABLE "destinations" ADD COLUMN "queue_prefix" TEXT NOT NULL DEFAULT 'whk';
ALTER TABLE "destinations" ALTER COLUMN "queue_prefix" DROP DEFAULT;
DROP INDEX "destinations_status_created_at_idx";
CREATE INDEX "destinations_queue_prefix_status_id_idx" ON "destinations"("queue_prefix", "status", "id");
CREATE INDEX "destinations_webhook_id_status_idx" ON "destinations"("webhook_id", "status");

-- Replays: a status of their own (pending until their one attempt is recorded).
ALTER TABLE "replays" ADD COLUMN "queue_prefix" TEXT NOT NULL DEFAULT 'whk',
ADD COLUMN "status" "DeliveryStatus" NOT NULL DEFAULT 'pending',
ADD COLUMN "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP;
ALTER TABLE "replays" ALTER COLUMN "queue_prefix" DROP DEFAULT;
UPDATE "replays" r SET "status" = (CASE WHEN d."response_status" BETWEEN 200 AND 299 THEN 'delivered' ELSE 'failed' END)::"DeliveryStatus"
  FROM "deliveries" d WHERE d."replay_id" = r."id";
CREATE INDEX "replays_queue_prefix_status_id_idx" ON "replays"("queue_prefix", "status", "id");

-- Test deliveries: the test event of a new webhook (or one asked for again) is a row too.
CREATE TABLE "test_deliveries" (
    "id" TEXT NOT NULL,
    "account_id" TEXT NOT NULL,
    "webhook_id" TEXT NOT NULL,
    "queue_prefix" TEXT NOT NULL,
    "status" "DeliveryStatus" NOT NULL DEFAULT 'pending',
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "test_deliveries_pkey" PRIMARY KEY ("id")
);
CREATE INDEX "test_deliveries_queue_prefix_status_id_idx" ON "test_deliveries"("queue_prefix", "status", "id");
CREATE INDEX "test_deliveries_webhook_id_created_at_idx" ON "test_deliveries"("webhook_id", "created_at" DESC);

-- Deliveries: the receiver's answer (at most 4096 bytes, CONTRACT.md section 8), the test
-- delivery a row belongs to, and one row per (destination, attempt) for initial and retry rows.
ALTER TABLE "deliveries" ADD COLUMN "response_body" TEXT,
ADD COLUMN "test_delivery_id" TEXT;
CREATE UNIQUE INDEX "deliveries_test_delivery_id_key" ON "deliveries"("test_delivery_id");
-- Earlier versions could write an attempt twice after a crash: keep the first row of each.
DELETE FROM "deliveries" d USING "deliveries" e
 WHERE d."trigger" IN ('initial', 'retry') AND e."trigger" IN ('initial', 'retry')
   AND d."destination_id" = e."destination_id" AND d."attempt" = e."attempt" AND d."id" > e."id";
-- Partial, so that the replays of a destination (attempt 0, trigger replay) are not limited;
-- Prisma's schema language cannot express it (see schema-drift.test.ts, SQL_ONLY_INDEXES).
CREATE UNIQUE INDEX "deliveries_destination_attempt_key" ON "deliveries"("destination_id", "attempt")
 WHERE "trigger" IN ('initial', 'retry');

-- Every statement that adds outbox rows wakes the relays of the deployments concerned (payload:
-- the QUEUE_PREFIX), whatever wrote them. NOTIFY is delivered at commit, and repeated payloads in
-- one transaction are delivered once.
CREATE FUNCTION "outbox_notify"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('webhooks_outbox', p.queue_prefix) FROM (SELECT DISTINCT queue_prefix FROM inserted) AS p;
    RETURN NULL;
END;
$$;

CREATE TRIGGER "outbox_notify"
    AFTER INSERT ON "outbox" REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION "outbox_notify"();
