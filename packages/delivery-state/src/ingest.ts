import type pg from "pg";
import sql from "sql-template-tag";
import { newId } from "@mailhooks/db";
import { buildEnvelope, type EventType } from "@mailhooks/events";
import { JOB_NAMES, WORK_JOBS } from "@mailhooks/queue";
import { createBatcher } from "./batcher.js";
import { inTransaction, run, type Queryable } from "./db.js";
import { enqueueCte } from "./outbox.js";
import { ensurePayloadPartitions, isMissingPartition } from "./retention.js";
import { eventStatusSql, type EventStatus } from "./status.js";

/**
 * Accepting events (CONTRACT.md section 5, "Accepted means delivered"): each event is stored with
 * its exact envelope bytes, one destination per enabled webhook of the account subscribed to its
 * kind and, when the webhook is scoped (`inbox_ids`, section 4), to its inbox, and one outbox row
 * per destination, in one statement (one transaction when idempotency keys must be checked).
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

/** How long an idempotency key is honoured, in hours (CONTRACT.md section 5). */
export const IDEMPOTENCY_WINDOW_HOURS = 24;

/** The events of one request with their ids, given once before the first try. */
interface Request {
  accountId: string;
  events: EventInput[];
  ids: string[];
}

interface Prepared {
  id: string;
  accountId: string;
  input: EventInput;
  payload: string;
  destinations: { id: string; webhookId: string }[];
}

/** `events` of `accountId` with a new event id each. */
function request(accountId: string, events: EventInput[]): Request {
  return { accountId, events, ids: events.map(() => newId("evt")) };
}

/**
 * The events of one or more requests with their envelope bytes and destinations: one per enabled
 * webhook of their account subscribed to their kind and, when scoped, to their inbox. One query
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
         WHERE account_id = ANY(${accounts}::text[]) AND inbox_ids IS NULL AND status = 'enabled' AND deleted_at IS NULL
           AND events && ${kinds}::text[]
        UNION ALL
        SELECT id, account_id, events, inbox_ids FROM webhooks
         WHERE inbox_ids && ${inboxes}::text[] AND account_id = ANY(${accounts}::text[]) AND status = 'enabled' AND deleted_at IS NULL
           AND events && ${kinds}::text[]
        ORDER BY id`,
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
      payload: buildEnvelope(input.eventType, input.occurredAt, input.data),
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

/** What the statement wrote (or a later read found) of one event. */
interface StoredRow {
  status: EventStatus;
  created_at: Date;
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

/**
 * The one statement: idempotency claims, events, their payloads, destinations, outbox rows, for
 * events of any number of accounts. An event id already stored is skipped with all that would
 * come with it. Every time is the statement's `now()` (payload rows keep exactly their event's
 * created_at: payloads are partitioned by day and joined on it).
 * @returns the events stored by this statement, by id
 */
async function insert(db: Queryable, queuePrefix: string, prepared: Prepared[]): Promise<Map<string, StoredRow>> {
  const column = <T>(pick: (p: Prepared) => T) => prepared.map(pick);
  const destinations = prepared.flatMap((p) => p.destinations.map((d) => ({ ...d, eventId: p.id, accountId: p.accountId })));
  const { rows } = await run<StoredRow & { id: string }>(
    db,
    sql`
    WITH input AS (
      SELECT * FROM unnest(
        ${column((p) => p.id)}::text[], ${column((p) => p.accountId)}::text[], ${column((p) => p.input.eventType)}::text[], ${column((p) => p.input.data.inboxId)}::text[],
        ${column((p) => p.input.data.messageId)}::text[], ${column((p) => p.input.data.threadId)}::text[], ${column((p) => p.payload)}::text[],
        ${column((p) => p.input.occurredAt)}::timestamptz[], ${column((p) => p.destinations.length)}::int[],
        ${column((p) => p.input.idempotency?.key ?? null)}::text[], ${column((p) => p.input.idempotency?.requestHash ?? null)}::text[]
      ) AS t(id, account_id, event_type, inbox_id, message_id, thread_id, payload, occurred_at, destinations, idem_key, idem_hash)
    ), claimed AS (
      -- Concurrent claims of one key serialize on its primary key; an expired claim is taken over.
      INSERT INTO idempotency_keys (account_id, key, request_hash, event_id, created_at)
      SELECT account_id, idem_key, idem_hash, id, now() FROM input WHERE idem_key IS NOT NULL
      ON CONFLICT (account_id, key) DO UPDATE
        SET request_hash = EXCLUDED.request_hash, event_id = EXCLUDED.event_id, created_at = EXCLUDED.created_at
        WHERE idempotency_keys.created_at < now() - make_interval(hours => ${IDEMPOTENCY_WINDOW_HOURS})
      RETURNING event_id
    ), accepted AS (
      SELECT * FROM input WHERE idem_key IS NULL OR id IN (SELECT event_id FROM claimed)
    ), ev AS (
      -- An id already stored: an earlier try of this statement committed and its answer was lost.
      INSERT INTO events (id, account_id, event_type, inbox_id, message_id, thread_id, status, pending_destinations,
                          occurred_at, created_at)
      SELECT id, account_id, event_type, inbox_id, message_id, thread_id,
             ${eventStatusSql({ pending: sql`destinations`, failed: sql`0` })}, destinations,
             occurred_at, now()
        FROM accepted
      ON CONFLICT (id) DO NOTHING
      RETURNING id, status::text AS status, created_at
    ), body AS (
      INSERT INTO event_payloads (event_id, created_at, payload)
      SELECT ev.id, ev.created_at, a.payload FROM ev JOIN accepted a ON a.id = ev.id
    ), dst AS (
      INSERT INTO destinations (id, account_id, event_id, webhook_id, queue_prefix, created_at, updated_at)
      SELECT d.id, d.account_id, d.event_id, d.webhook_id, ${queuePrefix}, ev.created_at, ev.created_at
        FROM unnest(${destinations.map((d) => d.id)}::text[], ${destinations.map((d) => d.eventId)}::text[],
                    ${destinations.map((d) => d.webhookId)}::text[], ${destinations.map((d) => d.accountId)}::text[]) AS d(id, event_id, webhook_id, account_id)
        JOIN ev ON ev.id = d.event_id
      RETURNING id, webhook_id, account_id
    ), ${enqueueCte(queuePrefix, sql`SELECT ${JOB_NAMES.delivery}::text, id, jsonb_build_object(${WORK_JOBS[JOB_NAMES.delivery].workIdField}::text, id), webhook_id, account_id FROM dst`)}
    SELECT id, status, created_at FROM ev`,
    // Prepared under a name (its text never changes: every value is a parameter): planning this
    // statement of six CTEs cost some 0.6 ms a time, as much as the rest of its execution.
    "delivery_state_accept_events",
  );
  return new Map(rows.map(({ id, ...row }) => [id, row]));
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
