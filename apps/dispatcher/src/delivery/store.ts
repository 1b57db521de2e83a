import { newId, Prisma, type PrismaClient } from "@mailhooks/db";
import type { AttemptResult } from "./send.js";

/**
 * PostgreSQL reads and writes of the delivery path. Writes that end a destination are one
 * transaction: the delivery row, the destination's final status and the event's status.
 */

export interface DestinationTarget {
  destinationId: string;
  accountId: string;
  eventId: string;
  webhookId: string;
  destinationStatus: "pending" | "delivered" | "failed";
  url: string;
  secret: string;
  webhookEnabled: boolean;
  payload: string | null;
  eventCreatedAt: Date;
}

/** Everything one delivery attempt needs, in one query; null for an unknown destination. */
export async function loadDestination(prisma: PrismaClient, destinationId: string): Promise<DestinationTarget | null> {
  const rows = await prisma.$queryRaw<DestinationTarget[]>`
    SELECT d.id AS "destinationId", d.account_id AS "accountId", d.event_id AS "eventId",
           d.webhook_id AS "webhookId", d.status::text AS "destinationStatus",
           w.url, w.secret, (w.status = 'enabled' AND w.deleted_at IS NULL) AS "webhookEnabled",
           e.payload, e.created_at AS "eventCreatedAt"
      FROM destinations d
      JOIN webhooks w ON w.id = d.webhook_id
      JOIN events e ON e.id = d.event_id
     WHERE d.id = ${destinationId}`;
  return rows[0] ?? null;
}

export interface DeliveryRow {
  accountId: string;
  eventId: string | null;
  webhookId: string;
  destinationId: string | null;
  url: string;
  trigger: "initial" | "retry" | "replay" | "test";
  attempt: number;
  result: AttemptResult;
}

/** The INSERT of one delivery row, as a SQL fragment for the statements below. */
function deliveryValues(row: DeliveryRow) {
  return Prisma.sql`
    INSERT INTO deliveries (id, account_id, event_id, webhook_id, destination_id, url, trigger, attempt,
                            response_status, error, duration_ms)
    VALUES (${newId("dlv")}, ${row.accountId}, ${row.eventId}, ${row.webhookId}, ${row.destinationId}, ${row.url},
            ${row.trigger}::"DeliveryTrigger", ${row.attempt}, ${row.result.responseStatus}, ${row.result.error},
            ${row.result.durationMs})`;
}

/** Records an attempt that leaves its destination pending (a failure with a retry left, a test). */
export async function recordAttempt(prisma: PrismaClient, row: DeliveryRow): Promise<void> {
  await prisma.$executeRaw(deliveryValues(row));
}

/**
 * The part of a statement that moves one destination from its current status to `status` and
 * keeps its event's counters and status right (CONTRACT.md section 5: pending while any
 * destination is pending, else failed if any failed, else delivered). `prev` locks the
 * destination row; the events row is updated in place, so two destinations of one event ending
 * at once serialize on it and each sees the other's effect.
 */
export function moveDestination(destinationId: string, status: "delivered" | "failed", fromStatuses: readonly string[]) {
  return Prisma.sql`
    prev AS (
      SELECT id, event_id, status AS was FROM destinations
       WHERE id = ${destinationId} AND status::text IN (${Prisma.join(fromStatuses)}) AND status <> ${status}::"DeliveryStatus"
       FOR UPDATE
    ), moved AS (
      UPDATE destinations d SET status = ${status}::"DeliveryStatus", updated_at = now()
        FROM prev WHERE d.id = prev.id
      RETURNING prev.event_id, prev.was
    )
    UPDATE events e SET
      pending_destinations = e.pending_destinations - (moved.was = 'pending')::int,
      failed_destinations = e.failed_destinations - (moved.was = 'failed')::int + ${status === "failed" ? 1 : 0},
      status = (CASE
        WHEN e.pending_destinations - (moved.was = 'pending')::int > 0 THEN 'pending'
        WHEN e.failed_destinations - (moved.was = 'failed')::int + ${status === "failed" ? 1 : 0} > 0 THEN 'failed'
        ELSE 'delivered' END)::"DeliveryStatus"
      FROM moved WHERE e.id = moved.event_id`;
}

/**
 * Ends a pending destination with `status`, with the attempt's row when there was one: one
 * statement, one round trip, atomic.
 */
export async function finishDestination(
  prisma: PrismaClient,
  target: { destinationId: string; eventId: string },
  status: "delivered" | "failed",
  row: DeliveryRow | null,
): Promise<void> {
  const insert = row ? Prisma.sql`inserted AS (${deliveryValues(row)}),` : Prisma.empty;
  await prisma.$executeRaw`WITH ${insert} ${moveDestination(target.destinationId, status, ["pending"])}`;
}

export interface TestTarget {
  url: string;
  secret: string;
}

/** The webhook a test event goes to, if it still exists and is enabled. */
export async function loadTestTarget(prisma: PrismaClient, webhookId: string, accountId: string): Promise<TestTarget | null> {
  const rows = await prisma.$queryRaw<TestTarget[]>`
    SELECT url, secret FROM webhooks
     WHERE id = ${webhookId} AND account_id = ${accountId} AND status = 'enabled' AND deleted_at IS NULL`;
  return rows[0] ?? null;
}
