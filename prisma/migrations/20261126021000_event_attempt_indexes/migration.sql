-- Reads of one event stay bounded however many delivery rows it has (issue 17: about 100k
-- replays of one event happen). The event page shows its newest attempts only: an index in
-- that order (it also serves GET /v1/deliveries?event_id=, newest first) reads just those rows,
-- where the index on event_id alone read every row of the event and sorted them. The pending
-- retry of a destination is its initial or retry row with the highest attempt: an index that
-- leads with the trigger finds those few rows without reading the destination's replays.
-- Both replace the single-column indexes they start with.

-- DropIndex
DROP INDEX "deliveries_event_id_idx";

-- DropIndex
DROP INDEX "deliveries_destination_id_idx";

-- CreateIndex
CREATE INDEX "deliveries_event_id_created_at_id_idx" ON "deliveries"("event_id", "created_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "deliveries_destination_id_trigger_attempt_idx" ON "deliveries"("destination_id", "trigger", "attempt");
