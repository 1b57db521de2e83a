import type pg from "pg";
import sql from "sql-template-tag";
import { newId } from "@mailhooks/db";
import { runGeneric, runStatement, type Queryable } from "./db.js";
import { endLeasesCte } from "./leases.js";
import { eventStatusSql, moveDestinationCte, type DestinationStatus } from "./status.js";
import { ATTEMPT_WEBHOOK_COLUMNS, PAYLOAD_COLUMNS, PAYLOAD_JOIN, secretsOf } from "./attempt-common.js";
import type { AttemptRecord, AttemptWebhook, PayloadRef } from "./attempt-common.js";

/**
 * The attempts of destinations (event x webhook): what an attempt needs, read for many attempts
 * in one query, and what they leave, written in one statement. Rows are unique per (destination,
 * attempt), so a job that runs twice (its dispatcher died after writing) never writes a second row.
 */

export interface LoadedDestination extends PayloadRef, AttemptWebhook {
  destinationId: string;
  accountId: string;
  webhookId: string;
  status: DestinationStatus;
  url: string;
  /** The row this attempt number already has (its job ran before and died), else null. */
  recorded: { ok: boolean } | null;
}

/**
 * Everything the attempts `items` (destination, attempt number) need, in one query (a
 * transaction of its own on `pool`, for its generic plan: runGeneric); null for an
 * unknown destination. Results are in the order of `items`. Payloads over INLINE_PAYLOAD_BYTES
 * are left out (`payload` null, `payloadBytes` set): a batch never carries them.
 */
export async function loadDestinations(
  pool: pg.Pool,
  items: { destinationId: string; attempt: number }[],
): Promise<(LoadedDestination | null)[]> {
  const { rows } = await runGeneric<
    Omit<LoadedDestination, "secrets"> & { ord: string; secrets: never; recordedStatus: number | null; hasRecord: boolean }
  >(
    pool,
    sql`SELECT i.ord, d.id AS "destinationId", d.account_id AS "accountId", d.event_id AS "eventId", d.webhook_id AS "webhookId",
               d.status::text AS status, w.url, ${ATTEMPT_WEBHOOK_COLUMNS},
               ${PAYLOAD_COLUMNS}, e.created_at AS "eventCreatedAt", x.id IS NOT NULL AS "hasRecord", x.response_status AS "recordedStatus"
          FROM unnest(${items.map((i) => i.destinationId)}::text[], ${items.map((i) => i.attempt)}::int[]) WITH ORDINALITY AS i(id, attempt, ord)
          JOIN destinations d ON d.id = i.id
          JOIN webhooks w ON w.id = d.webhook_id
          JOIN events e ON e.id = d.event_id
          ${PAYLOAD_JOIN}
          LEFT JOIN deliveries x ON x.destination_id = d.id AND x.attempt = i.attempt AND x.trigger IN ('initial', 'retry')`,
    // Prepared: see PAYLOAD_JOIN. With its generic plan always (runGeneric): left to choose,
    // PostgreSQL went on making plans for one call's values in 20 % of the calls of a bench run
    // (1.8 ms of planning each, where the generic plan executes in 0.5 ms), and those plans read
    // twice the pages (pg_stat_statements, 2026-11-27).
    "delivery_state_load_destinations_v2",
  );
  const byOrdinal = new Map(rows.map((row) => [Number(row.ord), row]));
  return items.map((_, index) => {
    const row = byOrdinal.get(index + 1);
    if (!row) return null;
    const { hasRecord, recordedStatus, secrets, ord: _ord, ...destination } = row;
    return {
      ...destination,
      secrets: secretsOf(secrets),
      recorded: hasRecord ? { ok: recordedStatus !== null && recordedStatus >= 200 && recordedStatus < 300 } : null,
    };
  });
}

/** One destination's attempt; see loadDestinations. */
export async function loadDestination(pool: pg.Pool, destinationId: string, attempt: number): Promise<LoadedDestination | null> {
  return (await loadDestinations(pool, [{ destinationId, attempt }]))[0];
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
  destination: Pick<LoadedDestination, "destinationId" | "accountId" | "eventId" | "webhookId" | "url">;
  /** 0 for the initial attempt, n for retry n. */
  attempt: number;
  result: AttemptRecord;
  /** `retry` leaves the destination pending (a retry is scheduled); `delivered` and `failed` end it. */
  outcome: "retry" | "delivered" | "failed";
}

/**
 * Records attempts of destinations and their consequences, in one statement however many there
 * are (the dispatcher batches the attempts that end at the same time): one delivery row each (a
 * row that exists already is kept: the attempt ran twice; `created_at` is PostgreSQL's now()),
 * the destinations that end move from `pending` with their events' counters and status
 * (docs/api.md, "Events"), and each webhook's auto-disable counters move without reading the
 * deliveries table: a success clears them (a write only when there is something to clear, so a
 * healthy webhook's row is never locked), a failure starts or extends the failing streak. The
 * counters move only for the rows actually written, so an attempt recorded again (its job ran
 * twice) is not counted twice.
 *
 * A success wins over a concurrent disable or delete (issue 17 item 8): a destination cancelled
 * while its attempt was in flight, whose attempt then got a 2xx, moves from `cancelled` to
 * `delivered` (the receiver did get it), and its event's counters follow.
 *
 * An attempt that ends its destination (`delivered`, `failed`) ends the destination's scheduler
 * lease in the same statement (endLeasesCte): one commit per batch instead of two, and no crash
 * can fall between the end of the work and the end of its lease.
 * @returns per attempt, in order, what it left (RecordedAttempt)
 */
export async function recordDestinationAttempts(db: Queryable, attempts: DestinationAttempt[]): Promise<RecordedAttempt[]> {
  const col = <T>(pick: (a: DestinationAttempt) => T) => attempts.map(pick);
  const { rows } = await runStatement<{ webhook_id: string | null; since: Date | null; events: number; unleased: string[] }>(
    db,
    sql`
    WITH input AS (
      SELECT * FROM unnest(
        ${col(() => newId("dlv"))}::text[], ${col((a) => a.destination.accountId)}::text[], ${col((a) => a.destination.eventId)}::text[],
        ${col((a) => a.destination.webhookId)}::text[], ${col((a) => a.destination.destinationId)}::text[], ${col((a) => a.destination.url)}::text[],
        ${col((a) => (a.attempt === 0 ? "initial" : "retry"))}::text[], ${col((a) => a.attempt)}::int[],
        ${col((a) => a.result.responseStatus)}::int[], ${col((a) => a.result.error)}::text[], ${col((a) => a.result.responseBody ?? null)}::text[],
        ${col((a) => a.result.durationMs)}::int[], ${col((a) => a.outcome)}::text[], ${col((a) => a.result.ok)}::boolean[]
      ) AS t(id, account_id, event_id, webhook_id, destination_id, url, trigger, attempt, response_status, error, response_body,
             duration_ms, outcome, ok)
    ), inserted AS (
      INSERT INTO deliveries (id, account_id, event_id, webhook_id, destination_id, url, trigger, attempt, response_status, error,
                              response_body, duration_ms, created_at)
      SELECT id, account_id, event_id, webhook_id, destination_id, url, trigger::"DeliveryTrigger", attempt, response_status, error,
             response_body, duration_ms, now() FROM input
      ON CONFLICT (destination_id, attempt) WHERE trigger IN ('initial', 'retry') DO NOTHING
      RETURNING id
    ), prev AS (
      SELECT d.id, d.event_id, i.outcome, d.status::text AS was FROM destinations d JOIN input i ON i.destination_id = d.id
       WHERE (i.outcome IN ('delivered', 'failed') AND d.status = 'pending') OR (i.outcome = 'delivered' AND d.status = 'cancelled')
       ORDER BY d.id
       FOR UPDATE OF d
    ), moved AS (
      UPDATE destinations d SET status = prev.outcome::"DeliveryStatus", updated_at = now()
        FROM prev WHERE d.id = prev.id
      RETURNING prev.event_id, prev.outcome, prev.was
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
    ), per_webhook AS (
      -- A webhook that answered 2xx to any of these attempts is not failing; else its streak grows
      -- by the events whose initial attempt failed. Only rows written now count: an attempt whose
      -- row exists already (its job ran again) was counted when that row was written.
      SELECT i.webhook_id, bool_or(i.ok) AS any_ok, (count(*) FILTER (WHERE NOT i.ok AND i.attempt = 0))::int AS initial_failures
        FROM input i JOIN inserted USING (id) GROUP BY i.webhook_id
    ), streak AS (
      UPDATE webhooks w SET
        failing_since = (CASE WHEN p.any_ok THEN NULL ELSE coalesce(w.failing_since, now()) END),
        failing_events = (CASE WHEN p.any_ok THEN 0 ELSE w.failing_events + p.initial_failures END)
        FROM per_webhook p
       WHERE w.id = p.webhook_id AND (NOT p.any_ok OR w.failing_since IS NOT NULL OR w.failing_events <> 0)
      RETURNING w.id AS webhook_id, w.failing_since AS since, w.failing_events AS events
    ), ${endLeasesCte(sql`ARRAY(SELECT destination_id FROM input WHERE outcome <> 'retry')`)}
    SELECT s.webhook_id, s.since, s.events,
           ARRAY(SELECT destination_id FROM input WHERE outcome <> 'retry' EXCEPT SELECT work_id FROM leases_ended) AS unleased
      FROM (SELECT 1) one LEFT JOIN streak s ON true`,
    // Prepared under a name: planned each time, this statement of nine CTEs cost 0.9 to 1.1 ms of
    // planning per batch beside 2 ms of execution (pg_stat_statements over a bench run,
    // 2026-11-27); PostgreSQL keeps a generic plan after five runs, unless it costs more.
    "delivery_state_record_destination_attempts",
  );
  // One row with nulls when no webhook's counters moved (the statement always answers one row).
  const streaks = new Map(
    rows.flatMap((r) => (r.webhook_id !== null && r.since !== null ? [[r.webhook_id, { since: r.since, events: r.events }]] : [])),
  );
  const unleased = new Set(rows[0]?.unleased ?? []);
  return attempts.map((a) => ({
    streak: a.result.ok ? null : (streaks.get(a.destination.webhookId) ?? null),
    leaseEnded: a.outcome !== "retry" && !unleased.has(a.destination.destinationId),
  }));
}

/** What recording one attempt left. */
export interface RecordedAttempt {
  /** The webhook's failing streak after a failure whose webhook's counters moved in this call, else null. */
  streak: FailingStreak | null;
  /**
   * The attempt ended its destination and the destination's lease with it. False for a retry, and
   * for an end that found no lease: one the lease keeper dropped, or one the relay had not
   * committed yet (LATE_LEASE_RELEASE_MS), which the worker then releases itself.
   */
  leaseEnded: boolean;
}

/** One attempt; see recordDestinationAttempts. */
export async function recordDestinationAttempt(
  db: Queryable,
  destination: DestinationAttempt["destination"],
  attempt: number,
  result: AttemptRecord,
  outcome: DestinationAttempt["outcome"],
): Promise<FailingStreak | null> {
  return (await recordDestinationAttempts(db, [{ destination, attempt, result, outcome }]))[0].streak;
}

/** Ends a pending destination whose webhook was disabled or deleted before it was delivered. */
export async function cancelDestination(db: Queryable, destinationId: string): Promise<void> {
  await runStatement(db, sql`WITH ${moveDestinationCte(destinationId, "cancelled", ["pending"])} SELECT count(*) FROM moved`);
}
