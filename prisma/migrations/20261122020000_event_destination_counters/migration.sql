-- AlterTable
ALTER TABLE "events" ADD COLUMN "pending_destinations" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN "failed_destinations" INTEGER NOT NULL DEFAULT 0;

-- Backfill the counters of existing events from their destinations.
UPDATE "events" e SET
    "pending_destinations" = c.pending,
    "failed_destinations" = c.failed
FROM (
    SELECT "event_id",
           count(*) FILTER (WHERE "status" = 'pending') AS pending,
           count(*) FILTER (WHERE "status" = 'failed') AS failed
      FROM "destinations" GROUP BY "event_id"
) c
WHERE c."event_id" = e."id";
