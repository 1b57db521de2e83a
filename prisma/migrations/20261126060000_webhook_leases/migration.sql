-- The fair scheduler (issue "No endpoint waits for another", CONTRACT.md section 6): Redis holds
-- runnable work, not backlog. A relay hands a webhook's work to the queue only while the webhook
-- holds fewer than DISPATCHER_WEBHOOK_JOB_LIMIT jobs there; each job it hands out is leased here
-- (one row per unit of work: destination, replay or test delivery) until its work ends. A lease
-- whose job Redis no longer has (a flush, a failover) is dropped by the dispatchers' lease keeper.
CREATE TABLE "webhook_leases" (
    "work_id" TEXT NOT NULL,
    "queue_prefix" TEXT NOT NULL,
    "webhook_id" TEXT NOT NULL,
    "account_id" TEXT NOT NULL,
    "job_name" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT now(),

    CONSTRAINT "webhook_leases_pkey" PRIMARY KEY ("work_id")
);
CREATE INDEX "webhook_leases_queue_prefix_webhook_id_idx" ON "webhook_leases"("queue_prefix", "webhook_id");
CREATE INDEX "webhook_leases_queue_prefix_created_at_idx" ON "webhook_leases"("queue_prefix", "created_at");
