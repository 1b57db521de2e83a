-- Whether a 2xx was ever recorded for the webhook in this deployment: with failing_since null, its
-- last attempt was answered, and the claim lets a job wait ready behind each of its attempts
-- (docs/scheduler.md, "Ready jobs"). Set once, by the statement that records the first 2xx.
ALTER TABLE "webhook_queues" ADD COLUMN "answered" BOOLEAN NOT NULL DEFAULT false;
