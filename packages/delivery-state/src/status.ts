import sql, { type Sql } from "sql-template-tag";

/**
 * The status rules of CONTRACT.md section 5. A destination goes `pending` -> `delivered` |
 * `failed` | `cancelled`; a successful replay to its own URL makes it `delivered` from any state.
 * An event is `pending` while any destination is pending, else `failed` if any failed or was
 * cancelled, else `delivered` (also with no destination). Events keep two counters,
 * `pending_destinations` and `failed_destinations` (failed or cancelled), so that the event's
 * status follows in the same single-row update that moves a destination.
 */
export type DestinationStatus = "pending" | "delivered" | "failed" | "cancelled";
export type EventStatus = "pending" | "delivered" | "failed";

/** An event's status from its counters (the same rule as the SQL below). */
export function eventStatus(pendingDestinations: number, failedDestinations: number): EventStatus {
  if (pendingDestinations > 0) return "pending";
  return failedDestinations > 0 ? "failed" : "delivered";
}

const isFailure = (status: string) => status === "failed" || status === "cancelled";

/**
 * CTE bodies moving one destination from one of `from` to `to` and keeping its event right:
 * `prev AS (...), moved AS (...), event_moved AS (...)`. `prev` locks the destination row (a
 * concurrent move waits, then re-checks its status); the event row is updated in place, so two
 * destinations of one event ending at once serialize on it and each sees the other's effect.
 */
export function moveDestinationCte(destinationId: string, to: Exclude<DestinationStatus, "pending">, from: readonly DestinationStatus[]): Sql {
  const addFailed = isFailure(to) ? 1 : 0;
  return sql`prev AS (
      SELECT id, event_id, status::text AS was FROM destinations
       WHERE id = ${destinationId} AND status::text = ANY(${[...from]}::text[]) AND status::text <> ${to}
       FOR UPDATE
    ), moved AS (
      UPDATE destinations d SET status = ${to}::"DeliveryStatus", updated_at = now()
        FROM prev WHERE d.id = prev.id
      RETURNING prev.event_id, prev.was
    ), event_moved AS (
      UPDATE events e SET
        pending_destinations = e.pending_destinations - (moved.was = 'pending')::int,
        failed_destinations = e.failed_destinations - (moved.was IN ('failed', 'cancelled'))::int + ${addFailed},
        status = (CASE
          WHEN e.pending_destinations - (moved.was = 'pending')::int > 0 THEN 'pending'
          WHEN e.failed_destinations - (moved.was IN ('failed', 'cancelled'))::int + ${addFailed} > 0 THEN 'failed'
          ELSE 'delivered' END)::"DeliveryStatus"
        FROM moved WHERE e.id = moved.event_id
      RETURNING e.id
    )`;
}

/**
 * A statement cancelling every pending destination of `webhookId` (disabled or deleted, by a
 * person or by auto-disable) and moving their events' counters and status.
 */
export function cancelPendingOfWebhook(webhookId: string): Sql {
  return sql`
    WITH moved AS (
      UPDATE destinations SET status = 'cancelled', updated_at = now()
       WHERE webhook_id = ${webhookId} AND status = 'pending'
      RETURNING event_id
    ), per_event AS (
      SELECT event_id, count(*)::int AS n FROM moved GROUP BY event_id
    )
    UPDATE events e SET
      pending_destinations = e.pending_destinations - p.n,
      failed_destinations = e.failed_destinations + p.n,
      status = (CASE WHEN e.pending_destinations - p.n > 0 THEN 'pending' ELSE 'failed' END)::"DeliveryStatus"
      FROM per_event p WHERE e.id = p.event_id`;
}
