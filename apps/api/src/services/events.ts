import { createHash } from "node:crypto";
import { IdempotencyConflictError, payloadHorizon, type AcceptedEvent, type EventInput } from "@mailhooks/delivery-state";
import type { PrismaClient } from "@mailhooks/db";
import type { ApiDeps } from "../deps.js";
import { AppError, notFound } from "../errors.js";
import { keysetPage, withinWindow, type Cursor, type Page } from "../http/pagination.js";
import type { DestinationView, EventDetail, EventListItem, EventSummary } from "../schemas/events.js";

/**
 * Event ingest and reads (docs/api.md, "Events"). Accepting is @mailhooks/delivery-state's
 * `acceptEvents`: the event with its exact envelope bytes, its destinations and their work queue rows
 * in one PostgreSQL statement; the answer follows that commit, whatever Redis is doing.
 */

export type NewEvent = Omit<EventInput, "idempotency">;

export interface IdempotencyInput {
  key: string;
  /** sha256 of the request body bytes: the same key with another body is a conflict. */
  requestHash: string;
}

export type { DestinationView, EventDetail, EventListItem, EventSummary };

interface EventRow {
  id: string;
  eventType: string;
  /** Null for an operational event. */
  inboxId: string | null;
  messageId: string;
  status: string;
  occurredAt: Date;
  createdAt: Date;
}

export const hashBody = (body: Buffer | string) => createHash("sha256").update(body).digest("hex");

// The columns hold only these values (ingest validates the kind; an event is never cancelled).
const kindOf = (eventType: string) => eventType as EventSummary["event_type"];
const statusOf = (status: string) => status as EventSummary["status"];

function toSummary(row: Pick<EventRow, "id" | "eventType" | "inboxId" | "status" | "occurredAt" | "createdAt">): EventSummary {
  return {
    event_id: row.id,
    event_type: kindOf(row.eventType),
    inbox_id: row.inboxId,
    status: statusOf(row.status),
    occurred_at: row.occurredAt.toISOString(),
    created_at: row.createdAt.toISOString(),
  };
}

/**
 * Accepts events of one account (one for POST /v1/events and raw messages, up to 500 for the
 * batch), all or nothing, in request order. An item with an idempotency key used within 24 h
 * returns the first event (`created: false`) and delivers nothing again.
 * @throws AppError conflict when a key was used with another body (nothing is stored)
 */
export async function acceptEvents(
  deps: ApiDeps,
  accountId: string,
  events: EventInput[],
): Promise<{ event: EventSummary; created: boolean }[]> {
  let accepted: AcceptedEvent[];
  try {
    accepted = await deps.acceptor.accept(accountId, events);
  } catch (error) {
    if (error instanceof IdempotencyConflictError) throw new AppError("conflict", "idempotency_key_reused", error.message);
    throw error;
  }
  return accepted.map((a) => ({ event: toSummary(a), created: a.created }));
}

/** One event; see acceptEvents. */
export async function acceptEvent(
  deps: ApiDeps,
  accountId: string,
  event: NewEvent,
  idem?: IdempotencyInput,
): Promise<{ event: EventSummary; created: boolean }> {
  const [result] = await acceptEvents(deps, accountId, [{ ...event, ...(idem ? { idempotency: idem } : {}) }]);
  return result;
}

async function readEvent(prisma: PrismaClient, accountId: string, eventId: string): Promise<EventRow | null> {
  return prisma.event.findFirst({
    where: { id: eventId, accountId },
    select: { id: true, eventType: true, inboxId: true, messageId: true, status: true, occurredAt: true, createdAt: true },
  });
}

/**
 * The envelope of an event (the exact bytes sent), or null once retention took it: past the
 * horizon, or its partition gone. One index lookup in the event's own day partition.
 */
export async function readPayload(deps: ApiDeps, event: { id: string; createdAt: Date }): Promise<string | null> {
  const rows = await deps.prisma.$queryRaw<{ payload: string }[]>`
    SELECT p.payload FROM event_payloads p
     WHERE p.event_id = ${event.id} AND p.created_at = ${event.createdAt}
       AND p.created_at >= (SELECT payloads_purged_before FROM retention_state WHERE id = 1)`;
  return rows[0]?.payload ?? null;
}

/**
 * One event of the account as GET /v1/events/{event_id} shows it, except that its envelope is
 * the stored text, never parsed (up to 10 MiB): `eventDetailJson` splices it into the answer.
 */
export interface StoredEventDetail {
  event: Omit<EventDetail, "payload">;
  /** The envelope exactly as stored (compact JSON, the bytes sent), or null once purged (or not read). */
  payload: string | null;
}

/**
 * One event of the account with its destinations, each with the count of its delivery rows (a
 * count, whatever their number), and its stored envelope. With `payload: false` the envelope is
 * not read (`payload` is null) and `payload_retained` comes from the retention horizon, as in
 * the list. @throws AppError not_found
 */
export async function readEventDetail(
  deps: ApiDeps,
  accountId: string,
  eventId: string,
  options: { payload?: boolean } = {},
): Promise<StoredEventDetail> {
  const row = await readEvent(deps.prisma, accountId, eventId);
  if (!row) throw notFound("event");
  const withPayload = options.payload ?? true;
  const payload = withPayload ? await readPayload(deps, row) : null;
  const retained = withPayload ? payload !== null : row.createdAt >= (await payloadHorizon(deps.pool));
  const destinations = await deps.prisma.$queryRaw<DestinationView[]>`
    SELECT d.webhook_id, w.url, d.status::text AS status,
           (SELECT count(*)::int FROM deliveries x WHERE x.destination_id = d.id) AS attempts
      FROM destinations d JOIN webhooks w ON w.id = d.webhook_id
     WHERE d.event_id = ${eventId} AND d.account_id = ${accountId}
     ORDER BY d.id`;
  const summary = toSummary(row);
  return {
    event: {
      event_id: summary.event_id,
      event_type: summary.event_type,
      inbox_id: summary.inbox_id,
      message_id: row.messageId,
      status: summary.status,
      occurred_at: summary.occurred_at,
      created_at: summary.created_at,
      payload_retained: retained,
      destinations,
    },
    payload,
  };
}

/**
 * The JSON text of GET /v1/events/{event_id} (EventDetail, fields in its order): the stored
 * envelope is spliced in as the `payload` value, byte for byte. It is compact valid JSON (ingest
 * wrote it with JSON.stringify), so the answer is valid JSON without a parse and a new
 * serialization of up to 10 MiB, and it carries the very bytes that were signed and sent.
 */
export function eventDetailJson({ event, payload }: StoredEventDetail): string {
  const { destinations, ...head } = event;
  return `${JSON.stringify(head).slice(0, -1)},"payload":${payload ?? "null"},"destinations":${JSON.stringify(destinations)}}`;
}

/**
 * The thread a received message belongs to: the thread of any earlier message of the inbox it
 * refers to, else `fallback` (derived from the thread's root Message-ID).
 */
export async function resolveThreadId(
  prisma: PrismaClient,
  accountId: string,
  inboxId: string,
  referencedIds: string[],
  fallback: string,
): Promise<string> {
  if (referencedIds.length === 0) return fallback;
  const rows = await prisma.$queryRaw<{ thread_id: string }[]>`
    SELECT thread_id FROM events
     WHERE account_id = ${accountId} AND inbox_id = ${inboxId} AND message_id = ANY(${referencedIds})
     ORDER BY id LIMIT 1`;
  return rows[0]?.thread_id ?? fallback;
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
  const horizon = await payloadHorizon(deps.pool);
  const where = {
    accountId,
    ...(filter.inbox_id !== undefined ? { inboxId: filter.inbox_id } : {}),
    ...(filter.event_type !== undefined ? { eventType: filter.event_type } : {}),
    ...(filter.status !== undefined ? { status: filter.status } : {}),
    ...withinWindow("createdAt", filter),
  };
  const select = { id: true, eventType: true, inboxId: true, messageId: true, status: true, occurredAt: true, createdAt: true } as const;
  return keysetPage(
    "createdAt",
    filter,
    where,
    (query) => deps.prisma.event.findMany({ ...query, select }),
    (r): EventListItem => ({
      event_id: r.id,
      event_type: kindOf(r.eventType),
      inbox_id: r.inboxId,
      message_id: r.messageId,
      status: statusOf(r.status),
      occurred_at: r.occurredAt.toISOString(),
      created_at: r.createdAt.toISOString(),
      payload_retained: r.createdAt >= horizon,
    }),
  );
}
