import sql from "sql-template-tag";
import { JOB_NAMES } from "@mailhooks/queue";
import { run, type Queryable } from "./db.js";
import { IDEMPOTENCY_WINDOW_HOURS, type EventInput } from "./ingest.js";
import { enqueueCte } from "./work-queue.js";
import { eventStatusSql, type EventStatus } from "./status.js";

/**
 * The statement that stores accepted events (ingest.ts; docs/api.md, "Events"): what one event
 * brings to it, and what it answers.
 */

/** An event ready for the statement: its id, its account, its envelope bytes, its destinations. */
export interface Prepared {
  id: string;
  accountId: string;
  input: EventInput;
  payload: Buffer;
  destinations: { id: string; webhookId: string }[];
}

export /** What the statement wrote (or a later read found) of one event. */
interface StoredRow {
  status: EventStatus;
  created_at: Date;
}

export /**
 * The one statement: idempotency claims, events, their payloads, destinations, their rows of the work queue, for
 * events of any number of accounts. An event id already stored is skipped with all that would
 * come with it. Every time is the statement's `now()` (payload rows keep exactly their event's
 * created_at: payloads are partitioned by day and joined on it).
 * @returns the events stored by this statement, by id
 */
async function insert(db: Queryable, queuePrefix: string, prepared: Prepared[]): Promise<Map<string, StoredRow>> {
  const column = <T>(pick: (p: Prepared) => T) => prepared.map(pick);
  // Every envelope in one bytea parameter, sent as it is (pg sends a Buffer in binary): no escaping.
  const payloads = Buffer.concat(prepared.map((p) => p.payload));
  const offsets: number[] = [];
  prepared.reduce((at, p) => (offsets.push(at), at + p.payload.length), 0);
  const destinations = prepared.flatMap((p) => p.destinations.map((d) => ({ ...d, eventId: p.id, accountId: p.accountId })));
  const { rows } = await run<StoredRow & { id: string }>(
    db,
    sql`
    WITH input AS (
      SELECT * FROM unnest(
        ${column((p) => p.id)}::text[], ${column((p) => p.accountId)}::text[], ${column((p) => p.input.eventType)}::text[], ${column((p) => p.input.data.inboxId)}::text[],
        ${column((p) => p.input.data.messageId)}::text[], ${column((p) => p.input.data.threadId)}::text[], ${offsets}::int[], ${column((p) => p.payload.length)}::int[],
        ${column((p) => p.input.occurredAt)}::timestamptz[], ${column((p) => p.destinations.length)}::int[],
        ${column((p) => p.input.idempotency?.key ?? null)}::text[], ${column((p) => p.input.idempotency?.requestHash ?? null)}::text[]
      ) AS t(id, account_id, event_type, inbox_id, message_id, thread_id, payload_at, payload_length, occurred_at, destinations, idem_key, idem_hash)
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
      SELECT ev.id, ev.created_at, convert_from(substring(${payloads}::bytea FROM a.payload_at + 1 FOR a.payload_length), 'UTF8')
        FROM ev JOIN accepted a ON a.id = ev.id
    ), dst AS (
      INSERT INTO destinations (id, account_id, event_id, webhook_id, queue_prefix, created_at, updated_at)
      SELECT d.id, d.account_id, d.event_id, d.webhook_id, ${queuePrefix}, ev.created_at, ev.created_at
        FROM unnest(${destinations.map((d) => d.id)}::text[], ${destinations.map((d) => d.eventId)}::text[],
                    ${destinations.map((d) => d.webhookId)}::text[], ${destinations.map((d) => d.accountId)}::text[]) AS d(id, event_id, webhook_id, account_id)
        JOIN ev ON ev.id = d.event_id
      RETURNING id, webhook_id, account_id
    ), ${enqueueCte(queuePrefix, sql`SELECT ${JOB_NAMES.delivery}::text, id, webhook_id, account_id, false FROM dst`)}
    SELECT id, status, created_at FROM ev`,
    // Prepared under a name (its text never changes: every value is a parameter): planning this
    // statement of six CTEs cost some 0.6 ms a time, as much as the rest of its execution.
    "delivery_state_accept_events_v3",
  );
  return new Map(rows.map(({ id, ...row }) => [id, row]));
}
