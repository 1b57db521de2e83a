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

function insertDelivery(prisma: PrismaClient, row: DeliveryRow) {
  return prisma.$executeRaw`
    INSERT INTO deliveries (id, account_id, event_id, webhook_id, destination_id, url, trigger, attempt,
                            response_status, error, duration_ms)
    VALUES (${newId("dlv")}, ${row.accountId}, ${row.eventId}, ${row.webhookId}, ${row.destinationId}, ${row.url},
            ${row.trigger}::"DeliveryTrigger", ${row.attempt}, ${row.result.responseStatus}, ${row.result.error},
            ${row.result.durationMs})`;
}

/** Records an attempt that leaves its destination pending (a failure with a retry left, a test). */
export async function recordAttempt(prisma: PrismaClient, row: DeliveryRow): Promise<void> {
  await insertDelivery(prisma, row);
}

/**
 * Sets a destination's final status, with the attempt's row when there was one, and recomputes
 * its event's status (CONTRACT.md section 5). The event row is locked first so that two
 * destinations of one event finishing at once cannot both read the other as pending.
 */
export async function finishDestination(
  prisma: PrismaClient,
  target: { destinationId: string; eventId: string },
  status: "delivered" | "failed",
  row: DeliveryRow | null,
): Promise<void> {
  const statements: Prisma.PrismaPromise<unknown>[] = [
    prisma.$queryRaw`SELECT id FROM events WHERE id = ${target.eventId} FOR UPDATE`,
  ];
  if (row) statements.push(insertDelivery(prisma, row));
  statements.push(
    prisma.$executeRaw`
      UPDATE destinations SET status = ${status}::"DeliveryStatus", updated_at = now()
       WHERE id = ${target.destinationId}`,
    recomputeEventStatus(prisma, target.eventId),
  );
  await prisma.$transaction(statements);
}

/** pending while any destination is pending, else failed if any failed, else delivered. */
export function recomputeEventStatus(prisma: PrismaClient, eventId: string) {
  return prisma.$executeRaw`
    UPDATE events SET status = (
      CASE
        WHEN EXISTS (SELECT 1 FROM destinations WHERE event_id = ${eventId} AND status = 'pending') THEN 'pending'
        WHEN EXISTS (SELECT 1 FROM destinations WHERE event_id = ${eventId} AND status = 'failed') THEN 'failed'
        ELSE 'delivered'
      END)::"DeliveryStatus"
     WHERE id = ${eventId}`;
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
