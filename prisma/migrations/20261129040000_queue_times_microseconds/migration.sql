-- The work queue's times keep microseconds, as now() gives them: rounded to milliseconds, a row
-- inserted just before a claim could be due up to 0.5 ms after that claim's now(), and wait for
-- the next pass.
ALTER TABLE "work_items" ALTER COLUMN "due_at" TYPE TIMESTAMPTZ(6), ALTER COLUMN "leased_until" TYPE TIMESTAMPTZ(6);
ALTER TABLE "webhook_queues" ALTER COLUMN "ready_at" TYPE TIMESTAMPTZ(6), ALTER COLUMN "turn_at" TYPE TIMESTAMPTZ(6);
ALTER TABLE "dispatchers" ALTER COLUMN "seen_until" TYPE TIMESTAMPTZ(6);
