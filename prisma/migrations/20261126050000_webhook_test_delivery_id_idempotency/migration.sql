-- POST /v1/webhooks/{id}/test answers 202 {delivery_id} before the attempt is made (CONTRACT.md
-- section 4): the id of the delivery row is chosen up front and kept here, and the dispatcher
-- writes its one delivery row with this id. Null for test deliveries from before.
ALTER TABLE "test_deliveries" ADD COLUMN "delivery_id" TEXT;
CREATE UNIQUE INDEX "test_deliveries_delivery_id_key" ON "test_deliveries"("delivery_id");

-- Idempotency-Key of POST /v1/webhooks (CONTRACT.md section 4): the webhook a key made, and the
-- hash of the request body it came with; a key is honoured for 24 hours. Apart from
-- idempotency_keys, whose rows name events.
CREATE TABLE "webhook_idempotency_keys" (
    "account_id" TEXT NOT NULL,
    "key" TEXT NOT NULL,
    "request_hash" TEXT NOT NULL,
    "webhook_id" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "webhook_idempotency_keys_pkey" PRIMARY KEY ("account_id","key")
);
