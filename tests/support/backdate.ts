import type pg from "pg";
import { ensurePayloadPartitions } from "@mailhooks/delivery-state";

/**
 * Moves an event to `at` as if it had been accepted then: its `created_at` and its payload's
 * row (the payload table is partitioned by the event's day and joined on `created_at`), in one
 * statement, so that a dispatcher reading the event at the same time sees it whole, before or
 * after. The service never changes `created_at`; a test that moved only the event left a
 * destination in flight without a payload, which the dispatcher rightly ends `payload_expired`.
 * The day's partition is made first when `at` is outside the ones kept ahead.
 * @param accountId when given, the event must belong to it
 * @throws when no such event exists
 */
export async function backdateEvent(pool: pg.Pool, eventId: string, at: Date, accountId?: string): Promise<void> {
  await ensurePayloadPartitions(pool, new Date(), 14, at);
  const { rows } = await pool.query<{ n: number }>(
    `WITH payload AS (
       UPDATE event_payloads p SET created_at = $2 FROM events e
        WHERE p.event_id = e.id AND p.created_at = e.created_at AND e.id = $1 AND ($3::text IS NULL OR e.account_id = $3)
     ), event AS (
       UPDATE events SET created_at = $2 WHERE id = $1 AND ($3::text IS NULL OR account_id = $3) RETURNING id
     )
     SELECT count(*)::int AS n FROM event`,
    [eventId, at, accountId ?? null],
  );
  if (rows[0].n !== 1) throw new Error(`backdateEvent: no event ${eventId}${accountId ? ` in account ${accountId}` : ""}`);
}
