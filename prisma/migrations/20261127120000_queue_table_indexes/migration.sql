-- The scheduler's queue tables keep only the indexes their statements use. Every delivery inserts
-- and deletes one row in each table, so each index costs a write per delivery and is scanned whole
-- by every VACUUM of the dispatchers' maintenance (vacuumQueueTables): of 1,590 index pages on
-- `outbox` after a bench run, 367 were this index's.
-- - outbox (queue_prefix, id): every statement that reads outbox by queue_prefix also names the
--   webhook (the fair claim), or counts rows, which (queue_prefix, webhook_id, id) serves alike;
--   rows without a webhook are found there too (webhook_id IS NULL, in id order).
-- - webhook_leases (queue_prefix, created_at): the lease keeper walks leases in work_id order
--   (leasesAfter), by the primary key.
DROP INDEX "outbox_queue_prefix_id_idx";
DROP INDEX "webhook_leases_queue_prefix_created_at_idx";
