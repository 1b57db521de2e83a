import type pg from "pg";
import sql from "sql-template-tag";
import { newId } from "@mailhooks/db";
import { run, runStatement, type Queryable } from "./db.js";
import { isOperationalEventType } from "@mailhooks/events";
import { endWorkCte, WORK_CHANNEL, type LeasedWork } from "./work-queue.js";
import { FAILING_AFTER, isoUtc } from "./notices.js";
import { QUICK_ANSWER_MS } from "@mailhooks/scheduler";
import { eventStatusSql, moveDestinationCte, type DestinationStatus } from "./status.js";
import { ATTEMPT_WEBHOOK_COLUMNS, PAYLOAD_COLUMNS, PAYLOAD_JOIN, secretsOf } from "./attempt-common.js";
import type { AttemptRecord, AttemptWebhook, PayloadRef } from "./attempt-common.js";

/**
 * The attempts of destinations (event x webhook): what an attempt needs, read for many attempts
 * in one query, and what they leave, written in one statement. Rows are unique per (destination,
 * attempt), so an attempt recorded twice (its lease expired and another dispatcher made it
 * again) never writes a second row, and its consequences apply once.
 */

export interface LoadedDestination extends PayloadRef, AttemptWebhook {
  destinationId: string;
  accountId: string;
  webhookId: string;
  status: DestinationStatus;
  /** Null for a listen webhook (its attempts are pulled). */
  url: string | null;
  /** The attempt the lease is for: 0 for the initial one, n for retry n. */
  attempt: number;
  /** The event's kind (an operational event's deliveries make no notices). */
  eventType: string;
  /** The deployment whose work it is (its notices are made there). */
  queuePrefix: string;
}

/**
 * Everything the attempts of the leased destinations `items` need, in one statement, prepared:
 * on a pool made with createPool's `genericPlans` (the dispatcher's loads) it keeps its generic
 * plan, whose making costs less than a plan made for one call's values; null where the lease is not the
 * destination's current, live one (it expired and was claimed again, or the work ended). Results
 * are in the order of `items`. Payloads over INLINE_PAYLOAD_BYTES are left out (`payload` null,
 * `payloadBytes` set): a batch never carries them.
 */
export async function loadDestinations(pool: pg.Pool, items: LeasedWork[]): Promise<(LoadedDestination | null)[]> {
  const { rows } = await run<Omit<LoadedDestination, "secrets"> & { ord: string; secrets: never }>(
    pool,
    sql`SELECT i.ord, d.id AS "destinationId", d.account_id AS "accountId", d.event_id AS "eventId", d.webhook_id AS "webhookId",
               d.status::text AS status, w.url, q.attempt, e.event_type AS "eventType", d.queue_prefix AS "queuePrefix",
               ${ATTEMPT_WEBHOOK_COLUMNS},
               ${PAYLOAD_COLUMNS}, e.created_at AS "eventCreatedAt"
          FROM unnest(${items.map((i) => i.workId)}::text[], ${items.map((i) => i.lease)}::int[]) WITH ORDINALITY AS i(id, lease, ord)
          JOIN work_items q ON q.work_id = i.id AND q.lease = i.lease AND q.leased_until > now()
          JOIN destinations d ON d.id = i.id
          JOIN webhooks w ON w.id = d.webhook_id
          JOIN events e ON e.id = d.event_id
          ${PAYLOAD_JOIN}`,
    // Prepared (see PAYLOAD_JOIN).
    "delivery_state_load_destinations_v4",
  );
  const byOrdinal = new Map(rows.map((row) => [Number(row.ord), row]));
  return items.map((_, index) => {
    const row = byOrdinal.get(index + 1);
    if (!row) return null;
    const { secrets, ord: _ord, ...destination } = row;
    return { ...destination, secrets: secretsOf(secrets) };
  });
}

/** Where a webhook stands on the way to auto-disable, after a failed attempt. */
export interface FailingStreak {
  /** Since when every attempt has failed. */
  since: Date;
  /** Events whose initial attempt failed since then. */
  events: number;
}

/** An event's counters once its destinations of `per_event` (ended, failed) moved. */
const EVENT_PENDING = sql`e.pending_destinations - p.ended`;
const EVENT_FAILED = sql`e.failed_destinations + p.failed`;

/** One attempt of a destination to record. */
export interface DestinationAttempt {
  destination: Pick<LoadedDestination, "destinationId" | "accountId" | "eventId" | "webhookId" | "url" | "eventType" | "queuePrefix">;
  /** 0 for the initial attempt, n for retry n. */
  attempt: number;
  result: AttemptRecord;
  /** `retry` leaves the destination pending (a retry is scheduled); `delivered` and `failed` end it. */
  outcome: "retry" | "delivered" | "failed";
  /** For a retry: its delay after this attempt's end, in ms (decideAfterAttempt). */
  retryDelayMs?: number;
  /** The id of its delivery row: a pull's (listen.ts); absent, a new one. */
  deliveryId?: string;
}

/**
 * Records attempts of destinations and their consequences, in one statement however many there
 * are (the dispatcher batches the attempts that end at the same time): one delivery row each (a
 * row that exists already is kept: the attempt was made twice; `created_at` is PostgreSQL's
 * now()), the destinations that end move from `pending` with their events' counters and status
 * (docs/api.md, "Statuses"), and each webhook's failing streaks move without reading the
 * deliveries table: a success clears them (a write only when there is something to clear, so a
 * healthy webhook's row is never locked), a failure starts or extends them. The counters move
 * only for the rows actually written, so an attempt recorded again is not counted twice. The
 * operational events they cause are written as notices in the same statement, each once:
 * `webhook.failing` when a webhook's email deliveries failed FAILING_AFTER times in a row,
 * `webhook.recovered` at its first 2xx after that, `destination.failed` when a destination of an
 * email event ends failed (notices.ts).
 *
 * The work queue follows in the same statement, for the attempt its row is at: an attempt that
 * ends its destination (`delivered`, `failed`) deletes the row; a retry gives it back, at the next
 * attempt, due `retryDelayMs` after now, and puts its webhook back in the round by then. So no
 * crash falls between the end of an attempt and the end of its lease.
 *
 * A success wins over a concurrent disable or delete: a destination cancelled while its attempt
 * was in flight, whose attempt then got a 2xx, moves from `cancelled` to `delivered` (the
 * receiver did get it), and its event's counters follow.
 *
 * LOCK ORDER: it locks webhooks' rows (the streaks), then work_items', then destinations', then
 * events', as disabling a webhook does (cancelPendingOfWebhook, after its webhook's row), so that
 * the two never wait for each other in a cycle (a deadlock, stalling both a second). PostgreSQL
 * runs a statement's parts in the order their results are needed: `(SELECT count(*) FROM x) >= 0`
 * makes a part need x first. The round's rows (webhook_queues) are never waited for (SKIP LOCKED).
 * @returns per attempt, in order, the webhook's failing streak after a failure whose webhook's
 *   counters moved in this call, else null
 */
export async function recordDestinationAttempts(db: Queryable, attempts: DestinationAttempt[]): Promise<(FailingStreak | null)[]> {
  const col = <T>(pick: (a: DestinationAttempt) => T) => attempts.map(pick);
  const { rows } = await runStatement<{ webhook_id: string | null; since: Date | null; events: number }>(
    db,
    sql`
    WITH input AS (
      SELECT * FROM unnest(
        ${col((a) => a.deliveryId ?? newId("dlv"))}::text[], ${col((a) => a.destination.accountId)}::text[], ${col((a) => a.destination.eventId)}::text[],
        ${col((a) => a.destination.webhookId)}::text[], ${col((a) => a.destination.destinationId)}::text[], ${col((a) => a.destination.url)}::text[],
        ${col((a) => (a.attempt === 0 ? "initial" : "retry"))}::text[], ${col((a) => a.attempt)}::int[],
        ${col((a) => a.result.responseStatus)}::int[], ${col((a) => a.result.error)}::text[], ${col((a) => a.result.responseBody ?? null)}::text[],
        ${col((a) => a.result.durationMs)}::int[], ${col((a) => a.outcome)}::text[], ${col((a) => a.result.ok)}::boolean[],
        ${col((a) => a.retryDelayMs ?? 0)}::int[], ${col((a) => isOperationalEventType(a.destination.eventType))}::boolean[],
        ${col((a) => a.destination.eventType)}::text[], ${col((a) => a.destination.queuePrefix)}::text[],
        ${col(() => newId("evt"))}::text[], ${col(() => newId("evt"))}::text[]
      ) WITH ORDINALITY AS t(id, account_id, event_id, webhook_id, destination_id, url, trigger, attempt, response_status, error, response_body,
             duration_ms, outcome, ok, retry_delay_ms, operational, event_type, queue_prefix, failed_notice_id, webhook_notice_id, ord)
    ), inserted AS (
      INSERT INTO deliveries (id, account_id, event_id, webhook_id, destination_id, url, trigger, attempt, response_status, error,
                              response_body, duration_ms, created_at)
      SELECT id, account_id, event_id, webhook_id, destination_id, url, trigger::"DeliveryTrigger", attempt, response_status, error,
             response_body, duration_ms, now() FROM input
      ON CONFLICT (destination_id, attempt) WHERE trigger IN ('initial', 'retry') DO NOTHING
      RETURNING id
    ), per_webhook AS (
      -- A webhook that answered 2xx to any of these attempts is not failing; else its streaks grow:
      -- the auto-disable one by the events whose initial attempt failed, the operational one by the
      -- failed attempts of email events. Only rows written now count: an attempt whose row exists
      -- already was counted when that row was written.
      SELECT i.webhook_id, bool_or(i.ok) AS any_ok, (count(*) FILTER (WHERE NOT i.ok AND i.attempt = 0))::int AS initial_failures,
             (count(*) FILTER (WHERE NOT i.ok AND NOT i.operational))::int AS failures,
             (array_agg(i.response_status ORDER BY i.ord DESC) FILTER (WHERE NOT i.ok))[1] AS last_status,
             (array_agg(i.error ORDER BY i.ord DESC) FILTER (WHERE NOT i.ok))[1] AS last_error,
             min(i.queue_prefix) AS queue_prefix, min(i.webhook_notice_id) AS notice_id
        FROM input i JOIN inserted n ON n.id = i.id GROUP BY i.webhook_id
    ), hooks AS (
      -- Locked only when something moves: a healthy webhook's row is never written.
      SELECT w.id, w.account_id, w.url, w.failing_since, w.failing_events, w.consecutive_failures, w.failing_noticed_at,
             p.any_ok, p.initial_failures, p.failures, p.last_status, p.last_error, p.queue_prefix, p.notice_id,
             (NOT p.any_ok AND w.failing_noticed_at IS NULL AND w.consecutive_failures + p.failures >= ${FAILING_AFTER}) AS becomes_failing
        FROM webhooks w JOIN per_webhook p ON p.webhook_id = w.id
       WHERE NOT p.any_ok OR w.failing_since IS NOT NULL OR w.failing_events <> 0 OR w.consecutive_failures <> 0 OR w.failing_noticed_at IS NOT NULL
       ORDER BY w.id
       FOR UPDATE OF w
    ), work_ended AS (
      -- The work's rows after the webhooks' (the count below): see LOCK ORDER.
      DELETE FROM work_items q USING input i
       WHERE q.work_id = i.destination_id AND q.attempt = i.attempt AND i.outcome <> 'retry' AND (SELECT count(*) FROM hooks) >= 0
      RETURNING 1
    ), retried AS (
      UPDATE work_items q SET attempt = i.attempt + 1, leased_until = NULL, reserved = false, pull_id = NULL,
             due_at = now() + make_interval(secs => i.retry_delay_ms / 1000.0)
        FROM input i WHERE q.work_id = i.destination_id AND q.attempt = i.attempt AND i.outcome = 'retry' AND (SELECT count(*) FROM hooks) >= 0
      RETURNING q.queue_prefix, q.webhook_id, q.due_at
    ), prev AS (
      -- Only an attempt whose row is written now moves its destination: one recorded already (made
      -- twice) moved it then, and a late record of a number the work moved past must not.
      -- Locked after the work's rows (the count below): see LOCK ORDER.
      SELECT d.id, d.event_id, i.outcome, d.status::text AS was
        FROM destinations d JOIN input i ON i.destination_id = d.id JOIN inserted n ON n.id = i.id
       WHERE ((i.outcome IN ('delivered', 'failed') AND d.status = 'pending') OR (i.outcome = 'delivered' AND d.status = 'cancelled'))
         AND (SELECT count(*) FROM retried) + (SELECT count(*) FROM work_ended) >= 0
       ORDER BY d.id
       FOR UPDATE OF d
    ), moved AS (
      UPDATE destinations d SET status = prev.outcome::"DeliveryStatus", updated_at = now()
        FROM prev WHERE d.id = prev.id
      RETURNING d.id AS destination_id, prev.event_id, prev.outcome, prev.was
    ), per_event AS (
      SELECT event_id, (count(*) FILTER (WHERE was = 'pending'))::int AS ended,
             ((count(*) FILTER (WHERE outcome = 'failed')) - (count(*) FILTER (WHERE was = 'cancelled')))::int AS failed
        FROM moved GROUP BY event_id
    ), event_moved AS (
      UPDATE events e SET
        pending_destinations = ${EVENT_PENDING},
        failed_destinations = ${EVENT_FAILED},
        status = ${eventStatusSql({ pending: EVENT_PENDING, failed: EVENT_FAILED })}
        FROM per_event p WHERE e.id = p.event_id
      RETURNING e.id
    ), streak AS (
      UPDATE webhooks w SET
        failing_since = (CASE WHEN h.any_ok THEN NULL ELSE coalesce(h.failing_since, now()) END),
        failing_events = (CASE WHEN h.any_ok THEN 0 ELSE h.failing_events + h.initial_failures END),
        consecutive_failures = (CASE WHEN h.any_ok THEN 0 ELSE h.consecutive_failures + h.failures END),
        failing_noticed_at = (CASE WHEN h.any_ok THEN NULL WHEN h.becomes_failing THEN now() ELSE h.failing_noticed_at END)
        FROM hooks h WHERE w.id = h.id
      RETURNING w.id AS webhook_id, w.failing_since AS since, w.failing_events AS events
    ), noticed AS (
      -- webhook.failing says how many had failed in a row at the failure that made it (FAILING_AFTER,
      -- the streak being shorter before), also when one batch of records passes that count.
      INSERT INTO notices (id, queue_prefix, account_id, kind, webhook_id, data)
      SELECT h.notice_id, h.queue_prefix, h.account_id, 'webhook.failing', h.id,
             jsonb_build_object('webhookId', h.id, 'url', h.url, 'failingSince', ${isoUtc(sql`coalesce(h.failing_since, now())`)},
                                'consecutiveFailures', greatest(h.consecutive_failures + 1, ${FAILING_AFTER}), 'lastStatus', h.last_status, 'lastError', h.last_error)
        FROM hooks h WHERE h.becomes_failing
      UNION ALL
      SELECT h.notice_id, h.queue_prefix, h.account_id, 'webhook.recovered', h.id,
             jsonb_build_object('webhookId', h.id, 'url', h.url, 'failingSince', ${isoUtc(sql`h.failing_since`)}, 'recoveredAt', ${isoUtc(sql`now()`)})
        FROM hooks h WHERE h.any_ok AND h.failing_noticed_at IS NOT NULL
      UNION ALL
      SELECT i.failed_notice_id, i.queue_prefix, i.account_id, 'destination.failed', i.webhook_id,
             jsonb_build_object('eventId', i.event_id, 'eventType', i.event_type, 'webhookId', i.webhook_id, 'url', i.url,
                                'attempts', i.attempt + 1, 'lastStatus', i.response_status, 'lastError', i.error)
        FROM moved m JOIN input i ON i.destination_id = m.destination_id
       WHERE m.outcome = 'failed' AND m.was = 'pending' AND NOT i.operational
      RETURNING 1
    ), due_again AS (
      SELECT queue_prefix, webhook_id, min(due_at) AS due_at FROM retried GROUP BY queue_prefix, webhook_id
    ), round_rows AS (
      -- The round's rows are never waited for: a claim in progress holds the rows of the webhooks
      -- it serves until it commits, and a wait here can close a cycle with it (a deadlock: both
      -- stalled for PostgreSQL's deadlock_timeout). A row held elsewhere is skipped: the next claim
      -- puts its webhook back in the round, named on WORK_CHANNEL (heard).
      SELECT r.queue_prefix, r.webhook_id FROM webhook_queues r
        JOIN due_again x ON r.queue_prefix = x.queue_prefix AND r.webhook_id = x.webhook_id
       FOR UPDATE OF r SKIP LOCKED
    ), back_in_round AS (
      UPDATE webhook_queues r SET ready_at = least(coalesce(r.ready_at, 'infinity'), x.due_at)
        FROM due_again x JOIN round_rows l ON l.queue_prefix = x.queue_prefix AND l.webhook_id = x.webhook_id
       WHERE r.queue_prefix = x.queue_prefix AND r.webhook_id = x.webhook_id
      RETURNING 1
    ), heard AS (
      -- Every webhook given a retry is named to the relays, whose next claim learns its due time
      -- (they pass again on an attempt's end only while work waits for room).
      SELECT pg_notify(${WORK_CHANNEL}, x.queue_prefix || ' ' || x.webhook_id) FROM due_again x
    ), quick AS (
      -- Whether jobs may wait ready behind its attempts from now on (docs/scheduler.md, "Ready
      -- jobs"): while its attempts are answered 2xx within QUICK_ANSWER_MS, all of this batch's.
      -- Written only when it changes; a row held elsewhere (see round_rows) is left to a later record.
      UPDATE webhook_queues r SET quick = x.quick
        FROM (SELECT q.queue_prefix, q.webhook_id, o.quick FROM webhook_queues q
                JOIN (SELECT queue_prefix, webhook_id, bool_and(coalesce(ok AND duration_ms <= ${QUICK_ANSWER_MS}, false)) AS quick
                        FROM input GROUP BY queue_prefix, webhook_id) o
                  ON q.queue_prefix = o.queue_prefix AND q.webhook_id = o.webhook_id
               WHERE q.quick <> o.quick
               FOR UPDATE OF q SKIP LOCKED) x
       WHERE r.queue_prefix = x.queue_prefix AND r.webhook_id = x.webhook_id
      RETURNING 1
    )
    SELECT s.webhook_id, s.since, s.events FROM (SELECT 1) one LEFT JOIN streak s ON true
     CROSS JOIN (SELECT count(*) FROM heard) h`,
    // Prepared under a name: planning this statement of many CTEs costs about as much as running
    // it; PostgreSQL keeps a generic plan after five runs, unless it costs more.
    "delivery_state_record_destination_attempts_v10",
  );
  // One row with nulls when no webhook's counters moved (the statement always answers one row).
  const streaks = new Map(
    rows.flatMap((r) => (r.webhook_id !== null && r.since !== null ? [[r.webhook_id, { since: r.since, events: r.events }]] : [])),
  );
  return attempts.map((a) => (a.result.ok ? null : (streaks.get(a.destination.webhookId) ?? null)));
}

/** One attempt; see recordDestinationAttempts. */
export async function recordDestinationAttempt(db: Queryable, attempt: DestinationAttempt): Promise<FailingStreak | null> {
  return (await recordDestinationAttempts(db, [attempt]))[0];
}

/**
 * Ends a pending destination whose webhook was disabled or deleted before it was delivered
 * (`cancelled`), and its row of the work queue.
 */
export async function cancelDestination(db: Queryable, destinationId: string): Promise<void> {
  await runStatement(
    db,
    sql`WITH ${moveDestinationCte(destinationId, "cancelled", ["pending"])}, ${endWorkCte(sql`${[destinationId]}::text[]`)}
        SELECT count(*) FROM moved`,
  );
}

/** Deletes the work queue rows of `workIds` whose work is over (no longer pending): nothing to attempt. */
export async function dropEndedWork(db: Queryable, workIds: string[]): Promise<void> {
  if (workIds.length > 0) await runStatement(db, sql`WITH ${endWorkCte(sql`${workIds}::text[]`)} SELECT count(*) FROM work_ended`);
}
