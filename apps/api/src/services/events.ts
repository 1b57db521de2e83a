import { createHash } from "node:crypto";
import { newId, type PrismaClient } from "@mailhooks/db";
import { buildEnvelope, type EventType } from "@mailhooks/events";
import { getLogger } from "@mailhooks/logger";
import { requireQueue, type ApiDeps } from "../deps.js";
import { AppError, notFound } from "../errors.js";
import { afterCursor, newestFirst, toPage, withinWindow, type Cursor, type Page } from "../http/pagination.js";

/**
 * Event ingest and reads (CONTRACT.md section 5). An event is stored with its exact envelope
 * bytes and one destination per enabled webhook subscribed to its kind, in one statement; then
 * one delivery job per destination is queued.
 */

const logger = getLogger("events");

export interface NewEvent {
  eventType: EventType;
  /** Valid `data` for `eventType` (threadId included). */
  data: Record<string, unknown> & { messageId: string; inboxId: string; threadId: string };
  occurredAt: Date;
}

export interface IdempotencyInput {
  key: string;
  /** sha256 of the request body bytes: the same key with another body is a conflict. */
  requestHash: string;
}

export interface EventSummary {
  event_id: string;
  event_type: string;
  inbox_id: string;
  status: string;
  occurred_at: string;
  created_at: string;
}

interface EventRow {
  id: string;
  eventType: string;
  inboxId: string;
  messageId: string;
  status: string;
  occurredAt: Date;
  createdAt: Date;
  payload: string | null;
}

const IDEMPOTENCY_WINDOW_HOURS = 24;

export const hashBody = (body: Buffer | string) => createHash("sha256").update(body).digest("hex");

function toSummary(row: EventRow): EventSummary {
  return {
    event_id: row.id,
    event_type: row.eventType,
    inbox_id: row.inboxId,
    status: row.status,
    occurred_at: row.occurredAt.toISOString(),
    created_at: row.createdAt.toISOString(),
  };
}

type Tx = Pick<PrismaClient, "$queryRaw" | "$executeRaw">;

/** Inserts the event and its destinations in one statement; returns the destination ids. */
async function insertEvent(tx: Tx, accountId: string, eventId: string, event: NewEvent, now: Date): Promise<{ row: EventRow; destinationIds: string[] }> {
  const payload = buildEnvelope(event.eventType, event.occurredAt, event.data);
  const rows = await tx.$queryRaw<{ destination_id: string | null; status: string }[]>`
    WITH targets AS (
      SELECT id FROM webhooks
       WHERE account_id = ${accountId} AND status = 'enabled' AND deleted_at IS NULL AND ${event.eventType} = ANY(events)
    ), ev AS (
      INSERT INTO events (id, account_id, event_type, inbox_id, message_id, thread_id, status, pending_destinations,
                          payload, occurred_at, created_at)
      VALUES (${eventId}, ${accountId}, ${event.eventType}, ${event.data.inboxId}, ${event.data.messageId}, ${event.data.threadId},
              (CASE WHEN EXISTS (SELECT 1 FROM targets) THEN 'pending' ELSE 'delivered' END)::"DeliveryStatus",
              (SELECT count(*) FROM targets), ${payload}, ${event.occurredAt}, ${now})
      RETURNING id, status::text AS status
    ), dst AS (
      INSERT INTO destinations (id, account_id, event_id, webhook_id, created_at, updated_at)
      SELECT 'dst_' || replace(gen_random_uuid()::text, '-', ''), ${accountId}, ev.id, targets.id, ${now}, ${now}
        FROM targets, ev
      RETURNING id
    )
    SELECT dst.id AS destination_id, ev.status FROM ev LEFT JOIN dst ON true`;
  const status = rows[0]?.status ?? "delivered";
  return {
    row: {
      id: eventId,
      eventType: event.eventType,
      inboxId: event.data.inboxId,
      messageId: event.data.messageId,
      status,
      occurredAt: event.occurredAt,
      createdAt: now,
      payload,
    },
    destinationIds: rows.flatMap((r) => (r.destination_id ? [r.destination_id] : [])),
  };
}

/**
 * Claims `key` for `eventId` unless a claim younger than 24 h exists; returns the existing
 * claim otherwise. Concurrent claims of one key serialize on its primary key.
 */
async function claimIdempotencyKey(tx: Tx, accountId: string, idem: IdempotencyInput, eventId: string, now: Date) {
  const claimed = await tx.$queryRaw<{ event_id: string }[]>`
    INSERT INTO idempotency_keys (account_id, key, request_hash, event_id, created_at)
    VALUES (${accountId}, ${idem.key}, ${idem.requestHash}, ${eventId}, ${now})
    ON CONFLICT (account_id, key) DO UPDATE
      SET request_hash = EXCLUDED.request_hash, event_id = EXCLUDED.event_id, created_at = EXCLUDED.created_at
      WHERE idempotency_keys.created_at < ${now}::timestamptz - make_interval(hours => ${IDEMPOTENCY_WINDOW_HOURS})
    RETURNING event_id`;
  if (claimed.length > 0) return null;
  const existing = await tx.$queryRaw<{ event_id: string; request_hash: string }[]>`
    SELECT event_id, request_hash FROM idempotency_keys WHERE account_id = ${accountId} AND key = ${idem.key}`;
  return existing[0] ?? null;
}

/**
 * Stores an event and queues its deliveries. With an idempotency key, a repeat within 24 h
 * returns the first event (`created: false`) and queues nothing.
 * @throws AppError conflict when the key was used with another body; unavailable when the jobs
 *   could not be queued (the event is then removed again, so nothing is half-written).
 */
export async function ingestEvent(deps: ApiDeps, accountId: string, event: NewEvent, idem?: IdempotencyInput): Promise<{ event: EventSummary; created: boolean }> {
  requireQueue(deps);
  const eventId = newId("evt");
  const now = new Date();
  let inserted: { row: EventRow; destinationIds: string[] };
  if (!idem) {
    inserted = await insertEvent(deps.prisma, accountId, eventId, event, now);
  } else {
    const outcome = await deps.prisma.$transaction(async (tx) => {
      const existing = await claimIdempotencyKey(tx, accountId, idem, eventId, now);
      if (existing) return { existing };
      return { inserted: await insertEvent(tx, accountId, eventId, event, now) };
    });
    if (outcome.existing) {
      if (outcome.existing.request_hash !== idem.requestHash) {
        throw new AppError("conflict", "Idempotency-Key was already used with a different request body");
      }
      const row = await readEvent(deps.prisma, accountId, outcome.existing.event_id);
      if (!row) throw notFound("event");
      return { event: toSummary(row), created: false };
    }
    inserted = outcome.inserted!;
  }
  try {
    await deps.queue.addDeliveries(inserted.destinationIds.map((destinationId) => ({ destinationId })));
  } catch (error) {
    await removeEvent(deps.prisma, eventId).catch((cleanup) =>
      logger.error("could not remove an event whose deliveries were not queued", { eventId, error: (cleanup as Error).message }),
    );
    throw error;
  }
  return { event: toSummary(inserted.row), created: true };
}

/** Undoes an ingest whose jobs could not be queued. */
async function removeEvent(prisma: PrismaClient, eventId: string): Promise<void> {
  await prisma.$transaction([
    prisma.$executeRaw`DELETE FROM idempotency_keys WHERE event_id = ${eventId}`,
    prisma.$executeRaw`DELETE FROM destinations WHERE event_id = ${eventId}`,
    prisma.$executeRaw`DELETE FROM events WHERE id = ${eventId}`,
  ]);
}

async function readEvent(prisma: PrismaClient, accountId: string, eventId: string): Promise<EventRow | null> {
  return prisma.event.findFirst({
    where: { id: eventId, accountId },
    select: { id: true, eventType: true, inboxId: true, messageId: true, status: true, occurredAt: true, createdAt: true, payload: true },
  });
}

export interface DestinationView {
  webhook_id: string;
  url: string;
  status: string;
  attempts: number;
}

export interface EventDetail extends EventSummary {
  message_id: string;
  payload_retained: boolean;
  payload: unknown;
  destinations: DestinationView[];
}

/** One event of the account with its envelope and destinations. @throws AppError not_found */
export async function getEvent(deps: ApiDeps, accountId: string, eventId: string): Promise<EventDetail> {
  const row = await readEvent(deps.prisma, accountId, eventId);
  if (!row) throw notFound("event");
  const destinations = await deps.prisma.$queryRaw<DestinationView[]>`
    SELECT d.webhook_id, w.url, d.status::text AS status,
           (SELECT count(*)::int FROM deliveries x WHERE x.destination_id = d.id) AS attempts
      FROM destinations d JOIN webhooks w ON w.id = d.webhook_id
     WHERE d.event_id = ${eventId} AND d.account_id = ${accountId}
     ORDER BY d.id`;
  const summary = toSummary(row);
  return {
    event_id: summary.event_id,
    event_type: summary.event_type,
    inbox_id: summary.inbox_id,
    message_id: row.messageId,
    status: summary.status,
    occurred_at: summary.occurred_at,
    created_at: summary.created_at,
    payload_retained: row.payload !== null,
    payload: row.payload === null ? null : JSON.parse(row.payload),
    destinations,
  };
}

/**
 * The thread a received message belongs to: the thread of any earlier message of the inbox it
 * refers to, else `fallback` (derived from the thread's root Message-ID).
 */
export async function resolveThreadId(prisma: PrismaClient, accountId: string, inboxId: string, referencedIds: string[], fallback: string): Promise<string> {
  if (referencedIds.length === 0) return fallback;
  const rows = await prisma.$queryRaw<{ thread_id: string }[]>`
    SELECT thread_id FROM events
     WHERE account_id = ${accountId} AND inbox_id = ${inboxId} AND message_id = ANY(${referencedIds})
     ORDER BY id LIMIT 1`;
  return rows[0]?.thread_id ?? fallback;
}

export interface EventListItem extends EventSummary {
  message_id: string;
  payload_retained: boolean;
}

export interface EventFilter {
  inbox_id?: string;
  event_type?: string;
  status?: "pending" | "delivered" | "failed";
  since?: Date;
  until?: Date;
  limit: number;
  cursor?: Cursor;
}

/**
 * GET /v1/events: newest first by (created_at, id); `since` inclusive and `until` exclusive
 * bounds of created_at. Each filter has an index that starts with (account_id, filter,
 * created_at desc, id desc), so a page costs one index range scan (docs/indexes.md).
 */
export async function listEvents(deps: ApiDeps, accountId: string, filter: EventFilter): Promise<Page<EventListItem>> {
  const rows = await deps.prisma.event.findMany({
    where: {
      accountId,
      ...(filter.inbox_id !== undefined ? { inboxId: filter.inbox_id } : {}),
      ...(filter.event_type !== undefined ? { eventType: filter.event_type } : {}),
      ...(filter.status !== undefined ? { status: filter.status } : {}),
      ...withinWindow("createdAt", filter),
      ...afterCursor("createdAt", filter.cursor),
    },
    orderBy: newestFirst("createdAt"),
    take: filter.limit + 1,
    select: { id: true, eventType: true, inboxId: true, messageId: true, status: true, occurredAt: true, createdAt: true, payloadPurgedAt: true },
  });
  return toPage(rows, filter.limit, (r) => r.createdAt, (r) => ({
    event_id: r.id,
    event_type: r.eventType,
    inbox_id: r.inboxId,
    message_id: r.messageId,
    status: r.status,
    occurred_at: r.occurredAt.toISOString(),
    created_at: r.createdAt.toISOString(),
    payload_retained: r.payloadPurgedAt === null,
  }));
}
