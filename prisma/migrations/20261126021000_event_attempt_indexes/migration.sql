-- Reads of one event stay bounded however many delivery rows it has (issue 17: about 100k
-- replays of one event happen). The event page shows its newest attempts only: an index in
-- that order (it also serves GET /v1/deliveries?event_id=, newest first) reads just those rows,
-- where the index on event_id alone read every row of the event and sorted them. It replaces
-- that index, which it starts with. (A pending destination's latest initial or retry attempt is
-- found on deliveries_destination_attempt_key, whatever the number of its replays.)

-- DropIndex
DROP INDEX "deliveries_event_id_idx";

-- CreateIndex
CREATE INDEX "deliveries_event_id_created_at_id_idx" ON "deliveries"("event_id", "created_at" DESC, "id" DESC);
