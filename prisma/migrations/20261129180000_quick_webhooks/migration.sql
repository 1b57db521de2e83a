-- A webhook is quick while its attempts are answered 2xx within QUICK_ANSWER_MS
-- (packages/scheduler): only then may a job wait ready behind each of its attempts
-- (docs/scheduler.md, "Ready jobs"). Whether it had ever answered 2xx said nothing of how long a job
-- waits behind it, so every webhook starts slow again and is quick from its next quick 2xx.
ALTER TABLE "webhook_queues" RENAME COLUMN "answered" TO "quick";
UPDATE "webhook_queues" SET "quick" = false WHERE "quick";
