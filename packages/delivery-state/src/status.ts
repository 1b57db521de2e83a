import sql, { join, raw, type Sql } from "sql-template-tag";

/**
 * The status rules (docs/api.md, "Statuses"). A destination goes `pending` -> `delivered` |
 * `failed` | `cancelled`; a successful replay to its own URL makes it `delivered` from any state.
 * An event is `pending` while any destination is pending, else `failed` if any failed or was
 * cancelled, else `delivered` (also with no destination). Events keep two counters,
 * `pending_destinations` and `failed_destinations` (failed or cancelled), so that the event's
 * status follows in the same single-row update that moves a destination.
 */
export type DestinationStatus = "pending" | "delivered" | "failed" | "cancelled";
export type EventStatus = "pending" | "delivered" | "failed";

/**
 * The event-status rule, written once: the first of these counters above 0 names the event's
 * status; with none, it is `delivered`. `eventStatus` applies it in TypeScript, `eventStatusSql`
 * writes it into every statement that moves an event's counters.
 */
const EVENT_STATUS_RULE: readonly { counter: keyof EventCounters; status: EventStatus }[] = [
  { counter: "pending", status: "pending" },
  { counter: "failed", status: "failed" },
];
const EVENT_STATUS_OTHERWISE: EventStatus = "delivered";

/** An event's destinations that are pending, and that failed or were cancelled. */
interface EventCounters<T = number> {
  pending: T;
  failed: T;
}

/** An event's status from its counters. */
export function eventStatus(pendingDestinations: number, failedDestinations: number): EventStatus {
  const counters: EventCounters = { pending: pendingDestinations, failed: failedDestinations };
  return EVENT_STATUS_RULE.find((rule) => counters[rule.counter] > 0)?.status ?? EVENT_STATUS_OTHERWISE;
}

/**
 * The same rule as a SQL expression of type "DeliveryStatus", over the SQL expressions of the
 * counters (the values they will have once the statement ran). The statuses are constants of
 * this file, written as literals.
 */
export function eventStatusSql(counters: EventCounters<Sql>): Sql {
  const literal = (status: EventStatus) => raw(`'${status}'`);
  const whens = EVENT_STATUS_RULE.map((rule) => sql`WHEN ${counters[rule.counter]} > 0 THEN ${literal(rule.status)}`);
  return sql`(CASE ${join(whens, " ")} ELSE ${literal(EVENT_STATUS_OTHERWISE)} END)::"DeliveryStatus"`;
}

const isFailure = (status: string) => status === "failed" || status === "cancelled";

/**
 * CTE bodies moving one destination from one of `from` to `to` and keeping its event right:
 * `prev AS (...), moved AS (...), event_moved AS (...)`. `prev` locks the destination row (a
 * concurrent move waits, then re-checks its status); the event row is updated in place, so two
 * destinations of one event ending at once serialize on it and each sees the other's effect.
 */
export function moveDestinationCte(
  destinationId: string,
  to: Exclude<DestinationStatus, "pending">,
  from: readonly DestinationStatus[],
): Sql {
  const addFailed = isFailure(to) ? 1 : 0;
  const pending = sql`e.pending_destinations - (moved.was = 'pending')::int`;
  const failed = sql`e.failed_destinations - (moved.was IN ('failed', 'cancelled'))::int + ${addFailed}`;
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
        pending_destinations = ${pending},
        failed_destinations = ${failed},
        status = ${eventStatusSql({ pending, failed })}
        FROM moved WHERE e.id = moved.event_id
      RETURNING e.id
    )`;
}

/**
 * A statement cancelling every pending destination of `webhookId` (disabled or deleted, by a
 * person or by auto-disable), moving their events' counters and status, and taking their rows
 * out of the work queue (an attempt in flight then records its outcome against no row). Its
 * caller has locked the webhook's row first; it then locks work_items', destinations' and events'
 * rows in that order, the order of an attempt's record (recordDestinationAttempts, LOCK ORDER).
 */
export function cancelPendingOfWebhook(webhookId: string): Sql {
  const pending = sql`e.pending_destinations - p.n`;
  const failed = sql`e.failed_destinations + p.n`;
  return sql`
    WITH dropped AS (
      DELETE FROM work_items WHERE webhook_id = ${webhookId} AND kind = 'delivery' RETURNING 1
    ), moved AS (
      -- After the work's rows (the count below): see LOCK ORDER.
      UPDATE destinations SET status = 'cancelled', updated_at = now()
       WHERE webhook_id = ${webhookId} AND status = 'pending' AND (SELECT count(*) FROM dropped) >= 0
      RETURNING event_id
    ), per_event AS (
      SELECT event_id, count(*)::int AS n FROM moved GROUP BY event_id
    )
    UPDATE events e SET
      pending_destinations = ${pending},
      failed_destinations = ${failed},
      status = ${eventStatusSql({ pending, failed })}
      FROM per_event p WHERE e.id = p.event_id`;
}
