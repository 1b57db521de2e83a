-- The delivery core's queue (docs/scheduler.md). One row per unit of work that has not ended
-- (a destination, a replay, a test delivery): written with what a request accepted, in the same
-- transaction; kept while the work waits, runs or waits for a retry; deleted in the statement that
-- ends the work. A claim leases a row (`lease` counts the claims, `leased_until` is the
-- visibility timeout); a lease whose holder stops renewing it expires and the row is claimable
-- again. This replaces the outbox (rows deleted once relayed) and webhook_leases (one row per
-- job in Redis), whose pending work is moved here.
CREATE TABLE "work_items" (
    "id" BIGSERIAL NOT NULL,
    "queue_prefix" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "work_id" TEXT NOT NULL,
    "webhook_id" TEXT NOT NULL,
    "account_id" TEXT NOT NULL,
    "attempt" INTEGER NOT NULL DEFAULT 0,
    "due_at" TIMESTAMPTZ(3) NOT NULL DEFAULT now(),
    "lease" INTEGER NOT NULL DEFAULT 0,
    "leased_until" TIMESTAMPTZ(3),
    "reserved" BOOLEAN NOT NULL DEFAULT false,
    "expirations" INTEGER NOT NULL DEFAULT 0,
    "bypass_pause" BOOLEAN NOT NULL DEFAULT false,

    CONSTRAINT "work_items_pkey" PRIMARY KEY ("id"),
    -- Only the kinds a dispatcher carries out: a row no worker could run is refused when written.
    CONSTRAINT "work_items_kind_check" CHECK ("kind" IN ('delivery', 'replay', 'test-delivery'))
);
CREATE UNIQUE INDEX "work_items_work_id_key" ON "work_items"("work_id");
-- A webhook's waiting rows, the longest due first: what a claim takes.
CREATE INDEX "work_items_waiting_idx" ON "work_items"("webhook_id", "due_at", "id") WHERE "leased_until" IS NULL;
-- The leases of a deployment by expiry: the live ones are counted, the expired ones claimed again.
CREATE INDEX "work_items_leased_idx" ON "work_items"("queue_prefix", "leased_until") WHERE "leased_until" IS NOT NULL;
-- Replays to a target_url, which go while their webhook is paused.
CREATE INDEX "work_items_bypass_idx" ON "work_items"("webhook_id", "due_at") WHERE "bypass_pause" AND "leased_until" IS NULL;

-- One row per webhook with unended work: when it may next be served (its place in the round of
-- waiting webhooks: null while nothing of it waits), and its next rate_limit turn.
CREATE TABLE "webhook_queues" (
    "queue_prefix" TEXT NOT NULL,
    "webhook_id" TEXT NOT NULL,
    "account_id" TEXT NOT NULL,
    "ready_at" TIMESTAMPTZ(3),
    "turn_at" TIMESTAMPTZ(3),

    CONSTRAINT "webhook_queues_pkey" PRIMARY KEY ("queue_prefix", "webhook_id")
);
CREATE INDEX "webhook_queues_ready_idx" ON "webhook_queues"("queue_prefix", "ready_at") WHERE "ready_at" IS NOT NULL;

-- The dispatchers of a deployment and their slots, renewed by each one's heartbeat: the
-- capacity the claim shares out is that of the dispatchers seen within their visibility timeout.
CREATE TABLE "dispatchers" (
    "id" TEXT NOT NULL,
    "queue_prefix" TEXT NOT NULL,
    "slots" INTEGER NOT NULL,
    "reserve" INTEGER NOT NULL,
    "seen_until" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "dispatchers_pkey" PRIMARY KEY ("id")
);

-- Pending work moves here from the outbox and from Redis (jobs of the former design, which the
-- dispatchers now drop unread): every pending destination, replay and test delivery, at the
-- attempt that follows its recorded ones, due when the former schedule (10 s, 60 s, 300 s after
-- the last attempt) makes it due.
INSERT INTO "work_items" ("queue_prefix", "kind", "work_id", "webhook_id", "account_id", "attempt", "due_at")
SELECT d."queue_prefix", 'delivery', d."id", d."webhook_id", d."account_id", coalesce(a.n, 0),
       coalesce(a.last_at + (CASE a.n WHEN 1 THEN interval '10 seconds' WHEN 2 THEN interval '60 seconds'
                                      ELSE interval '300 seconds' END), now())
  FROM "destinations" d
  LEFT JOIN LATERAL (SELECT count(*)::int AS n, max(x."created_at") AS last_at FROM "deliveries" x
                      WHERE x."destination_id" = d."id" AND x."trigger" IN ('initial', 'retry')) a ON true
 WHERE d."status" = 'pending'
 ORDER BY d."id";
INSERT INTO "work_items" ("queue_prefix", "kind", "work_id", "webhook_id", "account_id", "bypass_pause")
SELECT "queue_prefix", 'replay', "id", "webhook_id", "account_id", "has_target_url" FROM "replays" WHERE "status" = 'pending' ORDER BY "id";
INSERT INTO "work_items" ("queue_prefix", "kind", "work_id", "webhook_id", "account_id")
SELECT "queue_prefix", 'test-delivery', "id", "webhook_id", "account_id" FROM "test_deliveries" WHERE "status" = 'pending' ORDER BY "id";

DROP TRIGGER "outbox_notify" ON "outbox";
DROP FUNCTION "outbox_notify"();
DROP TABLE "outbox";
DROP TABLE "webhook_leases";

-- New work wakes the relays at once: one notification per deployment and webhook a statement
-- gave work to (payload: `<queue_prefix> <webhook_id>`), delivered at commit; the relay that hears
-- it puts the webhook in the round (webhook_queues.ready_at). Repeated payloads of a transaction
-- are delivered once.
CREATE FUNCTION "work_items_notify"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('webhooks_work', p.queue_prefix || ' ' || p.webhook_id)
       FROM (SELECT DISTINCT queue_prefix, webhook_id FROM inserted) AS p;
    RETURN NULL;
END;
$$;
CREATE TRIGGER "work_items_notify"
    AFTER INSERT ON "work_items" REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION "work_items_notify"();

-- Every unit of work inserts a row here, updates it at least once (its claim) and deletes it:
-- the table's live rows are few (what waits and runs) and its dead ones many. With the default
-- thresholds (20 % of the table) autovacuum would wait for a multiple of the live rows; these
-- make it take the queue tables at each of its rounds once a thousand rows have died, without
-- its cost-based pauses (the tables are small: a round takes milliseconds).
ALTER TABLE "work_items" SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000,
                              autovacuum_vacuum_cost_delay = 0, autovacuum_analyze_scale_factor = 0,
                              autovacuum_analyze_threshold = 1000);
ALTER TABLE "webhook_queues" SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000,
                                  autovacuum_vacuum_cost_delay = 0);
