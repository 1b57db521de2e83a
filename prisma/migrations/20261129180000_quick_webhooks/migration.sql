-- A webhook is quick while its attempts are answered 2xx within QUICK_ANSWER_MS
-- (packages/scheduler): only then may a job wait ready behind each of its attempts
-- (docs/scheduler.md, "Ready jobs"). Whether it had ever answered 2xx (answered) said nothing of
-- how long a job waits behind it: every webhook starts slow and is quick from its next quick 2xx.
-- `answered` stays, unread, for the dispatchers of the version before, which write and read it
-- until they are stopped (docs/operations.md); a later migration drops it.
ALTER TABLE "webhook_queues" ADD COLUMN "quick" BOOLEAN NOT NULL DEFAULT false;
