import type pg from "pg";
import sql from "sql-template-tag";
import { newId } from "@mailhooks/db";
import { buildEnvelope, type EventType } from "@mailhooks/events";
import { createBatcher } from "./batcher.js";
import { inTransaction, run, type Queryable } from "./db.js";
import { insert, type Prepared, type StoredRow } from "./ingest-statement.js";

import { ensurePayloadPartitions, isMissingPartition } from "./retention.js";
import type { EventStatus } from "./status.js";

/**
 * Accepting events (docs/api.md, "Accepted means delivered"): each event is stored with
 * its exact envelope bytes, one destination per enabled or paused webhook of the account
 * subscribed to its kind and, when the webhook is scoped (`inbox_ids`), to its inbox, and one unit
 * of work per destination, in one statement (one transaction when idempotency keys must be checked).
 * Every time written (created_at of events, payloads, destinations, idempotency keys) is
 * PostgreSQL's `now()`: one clock, whatever the API replicas' clocks say. An event's id is given
 * once, before the first try, and the statement skips ids already stored: a statement tried
 * again after its answer was lost stores nothing twice. Nothing here talks to Redis; the answer
 * may follow the commit.
 */

export interface EventInput {
  eventType: EventType;
  /** Valid `data` for `eventType` (threadId included). */
  data: Record<string, unknown> & { messageId: string; inboxId: string; threadId: string };
  occurredAt: Date;
  /** Idempotency-Key (header or batch item) and the hash of the request it came with. */
  idempotency?: { key: string; requestHash: string };
}

export interface AcceptedEvent {
  id: string;
  eventType: string;
  inboxId: string;
  messageId: string;
  status: EventStatus;
  occurredAt: Date;
  createdAt: Date;
  /** false when an idempotency key returned an event accepted before. */
  created: boolean;
}

/** An Idempotency-Key used within 24 h with another request body (409). */
export class IdempotencyConflictError extends Error {
  override name = "IdempotencyConflictError";
  constructor(readonly key: string) {
    super(`Idempotency-Key ${JSON.stringify(key)} was already used with a different request body`);
  }
}

/** How long an idempotency key is honoured, in hours (docs/api.md, "Events"). */
export const IDEMPOTENCY_WINDOW_HOURS = 24;

/** The events of one request with their ids, given once before the first try. */
interface Request {
  accountId: string;
  events: EventInput[];
  ids: string[];
}

/** `events` of `accountId` with a new event id each. */
function request(accountId: string, events: EventInput[]): Request {
  return { accountId, events, ids: events.map(() => newId("evt")) };
}

/**
 * The events of one or more requests with their envelope bytes and destinations: one per enabled
 * or paused webhook of their account subscribed to their kind and, when scoped, to their inbox. One query
 * for all their accounts, narrowed in SQL to the webhooks that can match one of them by index
 * (docs/indexes.md), matched exactly here.
 */
async function prepare(db: Queryable, requests: Request[]): Promise<Prepared[][]> {
  const accounts = [...new Set(requests.map((r) => r.accountId))];
  const kinds = [...new Set(requests.flatMap((r) => r.events.map((e) => e.eventType)))];
  const inboxes = [...new Set(requests.flatMap((r) => r.events.map((e) => e.data.inboxId)))];
  // Two index lookups (migration 20261126030000): webhooks of every inbox, and those scoped to one
  // of the statement's inboxes (an OR of the two would read every webhook of the account).
  const { rows: hooks } = await run<{ id: string; account_id: string; events: string[]; inbox_ids: string[] | null }>(
    db,
    sql`SELECT id, account_id, events, inbox_ids FROM webhooks
         WHERE account_id = ANY(${accounts}::text[]) AND inbox_ids IS NULL AND status IN ('enabled', 'paused') AND deleted_at IS NULL
           AND events && ${kinds}::text[]
        UNION ALL
        SELECT id, account_id, events, inbox_ids FROM webhooks
         WHERE inbox_ids && ${inboxes}::text[] AND account_id = ANY(${accounts}::text[]) AND status IN ('enabled', 'paused') AND deleted_at IS NULL
           AND events && ${kinds}::text[]
        ORDER BY id`,
    // Prepared under a name: planning its two branches costs several times their execution, and
    // its generic plan reads the same two indexes as a plan made for one call's values.
    "delivery_state_subscribed_webhooks",
  );
  const subscribed = (hook: (typeof hooks)[number], accountId: string, input: EventInput) =>
    hook.account_id === accountId &&
    hook.events.includes(input.eventType) &&
    (hook.inbox_ids === null || hook.inbox_ids.includes(input.data.inboxId));
  return requests.map(({ accountId, events, ids }) =>
    events.map((input, i) => ({
      id: ids[i],
      accountId,
      input,
      payload: Buffer.from(buildEnvelope(input.eventType, input.occurredAt, input.data), "utf8"),
      destinations: hooks.filter((h) => subscribed(h, accountId, input)).map((h) => ({ id: newId("dst"), webhookId: h.id })),
    })),
  );
}

/** Runs `store` again once, after making the payload partitions, if a row found none. */
async function withPartitions<T>(pool: pg.Pool, store: () => Promise<T>): Promise<T> {
  try {
    return await store();
  } catch (error) {
    // The maintenance job makes partitions two weeks ahead; if it has not run, make them now, for
    // the day of the clock that stamps created_at: the database's.
    if (!isMissingPartition(error)) throw error;
    const { rows } = await run<{ now: Date }>(pool, sql`SELECT now() AS now`);
    await ensurePayloadPartitions(pool, rows[0].now);
    return store();
  }
}

/**
 * Stores `events` of one account, in request order, all or nothing.
 * @returns one AcceptedEvent per input, in order (a repeated idempotency key: the first event)
 * @throws IdempotencyConflictError when a key was used with another body (nothing is stored)
 */
export async function acceptEvents(pool: pg.Pool, accountId: string, queuePrefix: string, events: EventInput[]): Promise<AcceptedEvent[]> {
  const [prepared] = await prepare(pool, [request(accountId, events)]);
  return withPartitions(pool, async () => {
    if (!prepared.some((p) => p.input.idempotency)) return stored(pool, prepared, await insert(pool, queuePrefix, prepared));
    return inTransaction(pool, async (client) => {
      const created = await insert(client, queuePrefix, prepared);
      const repeats = prepared.filter((p) => !created.has(p.id));
      if (repeats.length === 0) return prepared.map((p) => accepted(p, created.get(p.id)!));
      const earlier = await earlierEvents(client, accountId, repeats);
      return prepared.map((p) => (created.has(p.id) ? accepted(p, created.get(p.id)!) : earlier.get(p.input.idempotency!.key)!));
    });
  });
}

/**
 * Group commit of ingest: concurrent requests without idempotency keys (single events, raw
 * messages, batches) are stored together, one webhook query and one INSERT statement (one
 * commit) for all of them, when they arrive while earlier ones are being stored (see
 * createBatcher: alone at once under light load). Each caller gets its own events back once
 * that statement committed. When the shared statement fails, each request is tried again alone
 * with the same event ids: if the statement had committed (only its answer was lost), nothing is
 * stored again and the answer is read back. Requests with idempotency keys take `acceptEvents`
 * on their own, because a conflict must refuse their request only.
 */
export function createEventAcceptor(pool: pg.Pool, queuePrefix: string, options: { maxEvents?: number; maxConcurrency?: number } = {}) {
  const batcher = createBatcher<Request, AcceptedEvent[]>(
    async (requests) => {
      const prepared = await prepare(pool, requests);
      const all = prepared.flat();
      const byId = await withPartitions(
        pool,
        async () => new Map((await stored(pool, all, await insert(pool, queuePrefix, all))).map((a) => [a.id, a])),
      );
      return prepared.map((events) => events.map((p) => byId.get(p.id)!));
    },
    // Requests, not events: a batch of 500 events is one request. A statement of some
    // thousands of rows is still one quick round trip.
    { maxBatch: options.maxEvents ?? 64, maxConcurrency: options.maxConcurrency ?? 2 },
  );
  return {
    /** Stores the events of one request; see acceptEvents for their meaning. */
    accept(accountId: string, events: EventInput[]): Promise<AcceptedEvent[]> {
      if (events.some((e) => e.idempotency)) return acceptEvents(pool, accountId, queuePrefix, events);
      // The ids are given here, once: a try after a lost answer finds them stored.
      return batcher.submit(request(accountId, events));
    },
  };
}

/**
 * The events of `prepared` (without idempotency keys) as stored: those `insert` just stored, and
 * the others read back (a try before stored them and its answer was lost).
 * @throws Error when an event is in neither (cannot happen: the statement is all or nothing)
 */
async function stored(db: Queryable, prepared: Prepared[], created: Map<string, StoredRow>): Promise<AcceptedEvent[]> {
  const missing = prepared.filter((p) => !created.has(p.id)).map((p) => p.id);
  if (missing.length > 0) {
    const { rows } = await run<StoredRow & { id: string }>(
      db,
      sql`SELECT id, status::text AS status, created_at FROM events WHERE id = ANY(${missing}::text[])`,
    );
    for (const row of rows) created.set(row.id, row);
  }
  return prepared.map((p) => {
    const row = created.get(p.id);
    if (!row) throw new Error(`event ${p.id} was neither stored nor found`);
    return accepted(p, row);
  });
}

function accepted(p: Prepared, row: StoredRow): AcceptedEvent {
  return {
    id: p.id,
    eventType: p.input.eventType,
    inboxId: p.input.data.inboxId,
    messageId: p.input.data.messageId,
    status: row.status,
    occurredAt: p.input.occurredAt,
    createdAt: row.created_at,
    created: true,
  };
}

/** The events that `repeats`' idempotency keys were first used for, by key. @throws IdempotencyConflictError */
async function earlierEvents(db: Queryable, accountId: string, repeats: Prepared[]): Promise<Map<string, AcceptedEvent>> {
  const keys = repeats.map((p) => p.input.idempotency!.key);
  const { rows } = await run<{
    key: string;
    request_hash: string;
    id: string;
    event_type: string;
    inbox_id: string;
    message_id: string;
    status: EventStatus;
    occurred_at: Date;
    created_at: Date;
  }>(
    db,
    sql`SELECT k.key, k.request_hash, e.id, e.event_type, e.inbox_id, e.message_id, e.status::text AS status, e.occurred_at, e.created_at
          FROM idempotency_keys k JOIN events e ON e.id = k.event_id
         WHERE k.account_id = ${accountId} AND k.key = ANY(${keys}::text[])`,
  );
  const byKey = new Map(rows.map((r) => [r.key, r]));
  const result = new Map<string, AcceptedEvent>();
  for (const p of repeats) {
    const { key, requestHash } = p.input.idempotency!;
    const row = byKey.get(key);
    if (!row || row.request_hash !== requestHash) throw new IdempotencyConflictError(key);
    result.set(key, {
      id: row.id,
      eventType: row.event_type,
      inboxId: row.inbox_id,
      messageId: row.message_id,
      status: row.status,
      occurredAt: row.occurred_at,
      createdAt: row.created_at,
      created: false,
    });
  }
  return result;
}
