import sql, { empty, type Sql } from "sql-template-tag";
import { newId } from "@mailhooks/db";
import { run, runStatement, type Queryable } from "./db.js";
import { moveDestinationCte, type DestinationStatus } from "./status.js";

/**
 * The dispatcher's side of delivery state: what one attempt needs, read in one query, and what it
 * leaves, written in one statement (the delivery row with the transition it causes). Rows are
 * unique per attempt: a destination's (destination, attempt) for initial and retry rows, a
 * replay's or a test delivery's id otherwise, so a job that runs twice (its dispatcher died
 * after writing) never writes a second row.
 */

/**
 * A webhook's stored (encrypted) secrets: `secret` signs from `activatesAt` on (always, when
 * null); before that, `previous` signs (CONTRACT.md section 4, rotation).
 */
export interface StoredSecrets {
  secret: string;
  previous: string | null;
  activatesAt: Date | null;
}

/** The stored secret that signs at `at`. */
export function signingSecretAt(secrets: StoredSecrets, at: Date): string {
  return secrets.activatesAt && secrets.previous !== null && at < secrets.activatesAt ? secrets.previous : secrets.secret;
}

/**
 * The event's payload, unless it is past the retention horizon. Pruning to the event's day
 * partition happens at run time, but the planner still looks at every partition (90 days of
 * retention and two weeks ahead: about 105), which cost some 10 ms per statement on a grown
 * database where execution takes 1 ms; statements with this join are therefore prepared under a
 * name (see `run`), so their plan is made once per connection.
 */
const PAYLOAD_JOIN = sql`LEFT JOIN event_payloads p ON p.event_id = e.id AND p.created_at = e.created_at
                           AND e.created_at >= (SELECT payloads_purged_before FROM retention_state WHERE id = 1)`;

const SECRET_COLUMNS = sql`json_build_object('secret', w.secret, 'previous', w.previous_secret, 'activatesAt', w.secret_activates_at) AS secrets`;

/** JSON columns come back with times as strings. */
function secretsOf(raw: { secret: string; previous: string | null; activatesAt: string | null }): StoredSecrets {
  return { secret: raw.secret, previous: raw.previous, activatesAt: raw.activatesAt ? new Date(raw.activatesAt) : null };
}

/** What an attempt produced (the dispatcher's AttemptResult has this shape). */
export interface AttemptRecord {
  ok: boolean;
  responseStatus: number | null;
  error: string | null;
  responseBody?: string | null;
  durationMs: number;
}

/** The row of a delivery attempt, as a VALUES list for `INSERT INTO deliveries`. */
function deliveryRow(row: {
  accountId: string;
  eventId: string | null;
  webhookId: string;
  destinationId: string | null;
  url: string;
  trigger: "initial" | "retry" | "replay" | "test";
  attempt: number;
  result: AttemptRecord;
  replayId?: string;
  testDeliveryId?: string;
  at?: Date;
}): Sql {
  return sql`INSERT INTO deliveries (id, account_id, event_id, webhook_id, destination_id, url, trigger, attempt, response_status,
                                     error, response_body, duration_ms, replay_id, test_delivery_id, created_at)
    VALUES (${newId("dlv")}, ${row.accountId}, ${row.eventId}, ${row.webhookId}, ${row.destinationId}, ${row.url},
            ${row.trigger}::"DeliveryTrigger", ${row.attempt}, ${row.result.responseStatus}, ${row.result.error},
            ${row.result.responseBody ?? null}, ${row.result.durationMs}, ${row.replayId ?? null}, ${row.testDeliveryId ?? null},
            ${row.at ?? new Date()})`;
}

// ------------------------------------------------------------------ destinations

export interface DestinationTarget {
  destinationId: string;
  accountId: string;
  eventId: string;
  webhookId: string;
  status: DestinationStatus;
  url: string;
  secrets: StoredSecrets;
  webhookEnabled: boolean;
  /** The envelope bytes; null once purged. */
  payload: string | null;
  eventCreatedAt: Date;
  /** The row this attempt number already has (its job ran before and died), else null. */
  recorded: { ok: boolean } | null;
}

/**
 * Everything the attempts `items` (destination, attempt number) need, in one query; null for an
 * unknown destination. Results are in the order of `items`.
 */
export async function loadDestinations(db: Queryable, items: { destinationId: string; attempt: number }[]): Promise<(DestinationTarget | null)[]> {
  const { rows } = await run<Omit<DestinationTarget, "secrets"> & { ord: string; secrets: never; recordedStatus: number | null; hasRecord: boolean }>(
    db,
    sql`SELECT i.ord, d.id AS "destinationId", d.account_id AS "accountId", d.event_id AS "eventId", d.webhook_id AS "webhookId",
               d.status::text AS status, w.url, ${SECRET_COLUMNS}, (w.status = 'enabled' AND w.deleted_at IS NULL) AS "webhookEnabled",
               p.payload, e.created_at AS "eventCreatedAt", x.id IS NOT NULL AS "hasRecord", x.response_status AS "recordedStatus"
          FROM unnest(${items.map((i) => i.destinationId)}::text[], ${items.map((i) => i.attempt)}::int[]) WITH ORDINALITY AS i(id, attempt, ord)
          JOIN destinations d ON d.id = i.id
          JOIN webhooks w ON w.id = d.webhook_id
          JOIN events e ON e.id = d.event_id
          ${PAYLOAD_JOIN}
          LEFT JOIN deliveries x ON x.destination_id = d.id AND x.attempt = i.attempt AND x.trigger IN ('initial', 'retry')`,
    // Prepared: see PAYLOAD_JOIN.
    "delivery_state_load_destinations",
  );
  const byOrdinal = new Map(rows.map((row) => [Number(row.ord), row]));
  return items.map((_, index) => {
    const row = byOrdinal.get(index + 1);
    if (!row) return null;
    const { hasRecord, recordedStatus, secrets, ord: _ord, ...target } = row;
    return {
      ...target,
      secrets: secretsOf(secrets),
      recorded: hasRecord ? { ok: recordedStatus !== null && recordedStatus >= 200 && recordedStatus < 300 } : null,
    };
  });
}

/** One destination's attempt; see loadDestinations. */
export async function loadDestination(db: Queryable, destinationId: string, attempt: number): Promise<DestinationTarget | null> {
  return (await loadDestinations(db, [{ destinationId, attempt }]))[0];
}

/** Where a webhook stands on the way to auto-disable, after a failed attempt. */
export interface FailingStreak {
  /** Since when every attempt has failed. */
  since: Date;
  /** Events whose initial attempt failed since then. */
  events: number;
}

/** One attempt of a destination to record. */
export interface DestinationAttempt {
  target: Pick<DestinationTarget, "destinationId" | "accountId" | "eventId" | "webhookId" | "url">;
  /** 0 for the initial attempt, n for retry n. */
  attempt: number;
  result: AttemptRecord;
  /** `retry` leaves the destination pending (a retry is scheduled); `delivered` and `failed` end it. */
  outcome: "retry" | "delivered" | "failed";
}

/**
 * Records attempts of destinations and their consequences, in one statement however many there
 * are (the dispatcher batches the attempts that end at the same time): one delivery row each (a
 * row that exists already is kept: the attempt ran twice), the destinations that end move from
 * `pending` with their events' counters and status (CONTRACT.md section 5), and each webhook's
 * auto-disable counters move without reading the deliveries table: a success clears them (a
 * write only when there is something to clear, so a healthy webhook's row is never locked), a
 * failure starts or extends the failing streak. The counters move only for the rows actually
 * written, so an attempt recorded again (its job ran twice) is not counted twice.
 * @returns per attempt, the webhook's failing streak after a failure whose webhook's counters
 *   moved in this call, else null
 */
export async function recordDestinationAttempts(db: Queryable, attempts: DestinationAttempt[]): Promise<(FailingStreak | null)[]> {
  const col = <T>(pick: (a: DestinationAttempt) => T) => attempts.map(pick);
  const { rows } = await runStatement<{ webhook_id: string; since: Date | null; events: number }>(
    db,
    sql`
    WITH input AS (
      SELECT * FROM unnest(
        ${col(() => newId("dlv"))}::text[], ${col((a) => a.target.accountId)}::text[], ${col((a) => a.target.eventId)}::text[],
        ${col((a) => a.target.webhookId)}::text[], ${col((a) => a.target.destinationId)}::text[], ${col((a) => a.target.url)}::text[],
        ${col((a) => (a.attempt === 0 ? "initial" : "retry"))}::text[], ${col((a) => a.attempt)}::int[],
        ${col((a) => a.result.responseStatus)}::int[], ${col((a) => a.result.error)}::text[], ${col((a) => a.result.responseBody ?? null)}::text[],
        ${col((a) => a.result.durationMs)}::int[], ${col((a) => a.outcome)}::text[], ${col((a) => a.result.ok)}::boolean[]
      ) AS t(id, account_id, event_id, webhook_id, destination_id, url, trigger, attempt, response_status, error, response_body,
             duration_ms, outcome, ok)
    ), inserted AS (
      INSERT INTO deliveries (id, account_id, event_id, webhook_id, destination_id, url, trigger, attempt, response_status, error,
                              response_body, duration_ms)
      SELECT id, account_id, event_id, webhook_id, destination_id, url, trigger::"DeliveryTrigger", attempt, response_status, error,
             response_body, duration_ms FROM input
      ON CONFLICT (destination_id, attempt) WHERE trigger IN ('initial', 'retry') DO NOTHING
      RETURNING id
    ), prev AS (
      SELECT d.id, d.event_id, i.outcome FROM destinations d JOIN input i ON i.destination_id = d.id
       WHERE i.outcome IN ('delivered', 'failed') AND d.status = 'pending'
       ORDER BY d.id
       FOR UPDATE OF d
    ), moved AS (
      UPDATE destinations d SET status = prev.outcome::"DeliveryStatus", updated_at = now()
        FROM prev WHERE d.id = prev.id
      RETURNING prev.event_id, prev.outcome
    ), per_event AS (
      SELECT event_id, count(*)::int AS ended, (count(*) FILTER (WHERE outcome = 'failed'))::int AS failed FROM moved GROUP BY event_id
    ), event_moved AS (
      UPDATE events e SET
        pending_destinations = e.pending_destinations - p.ended,
        failed_destinations = e.failed_destinations + p.failed,
        status = (CASE WHEN e.pending_destinations - p.ended > 0 THEN 'pending'
                       WHEN e.failed_destinations + p.failed > 0 THEN 'failed' ELSE 'delivered' END)::"DeliveryStatus"
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
    )
    SELECT webhook_id, since, events FROM streak`,
  );
  const streaks = new Map(rows.filter((r) => r.since !== null).map((r) => [r.webhook_id, { since: r.since!, events: r.events }]));
  return attempts.map((a) => (a.result.ok ? null : (streaks.get(a.target.webhookId) ?? null)));
}

/** One attempt; see recordDestinationAttempts. */
export async function recordDestinationAttempt(
  db: Queryable,
  target: DestinationAttempt["target"],
  attempt: number,
  result: AttemptRecord,
  outcome: DestinationAttempt["outcome"],
): Promise<FailingStreak | null> {
  return (await recordDestinationAttempts(db, [{ target, attempt, result, outcome }]))[0];
}

/** Clears a webhook's failing streak after a success to its own URL (a replay, a test event). */
function clearStreakCte(webhookId: string): Sql {
  return sql`streak AS (
      UPDATE webhooks SET failing_since = NULL, failing_events = 0
       WHERE id = ${webhookId} AND (failing_since IS NOT NULL OR failing_events <> 0) RETURNING id)`;
}

/** Ends a pending destination whose webhook was disabled or deleted before it was delivered. */
export async function cancelDestination(db: Queryable, destinationId: string): Promise<void> {
  await runStatement(db, sql`WITH ${moveDestinationCte(destinationId, "cancelled", ["pending"])} SELECT count(*) FROM moved`);
}

// ------------------------------------------------------------------ replays

export interface ReplayAttemptTarget {
  replayId: string;
  accountId: string;
  eventId: string;
  webhookId: string;
  destinationId: string;
  destinationUrl: string;
  toOwnUrl: boolean;
  /** Asked for with a target_url. */
  hasTargetUrl: boolean;
  apiKeyId: string;
  secrets: StoredSecrets;
  /** The webhook is enabled and not deleted (read at attempt time). */
  webhookEnabled: boolean;
  payload: string | null;
  status: "pending" | "delivered" | "failed" | "cancelled";
}

/**
 * Whether a replay must end `cancelled` without an attempt (CONTRACT.md sections 4 and 7): it
 * was asked for without a target_url (so it goes to its webhook's own URL), and that webhook was
 * disabled or deleted after the replay was accepted. A replay with a target_url is sent whatever
 * its webhook's status, even to the webhook's own URL: the disabled webhook's secret still signs.
 */
export function replayCancelled(target: Pick<ReplayAttemptTarget, "hasTargetUrl" | "webhookEnabled">): boolean {
  return !target.hasTargetUrl && !target.webhookEnabled;
}

export async function loadReplay(db: Queryable, replayId: string): Promise<ReplayAttemptTarget | null> {
  const { rows } = await run<ReplayAttemptTarget & { secrets: never }>(
    db,
    sql`SELECT r.id AS "replayId", r.account_id AS "accountId", r.event_id AS "eventId", r.webhook_id AS "webhookId",
               r.destination_id AS "destinationId", r.destination_url AS "destinationUrl", r.to_own_url AS "toOwnUrl",
               r.has_target_url AS "hasTargetUrl", r.api_key_id AS "apiKeyId", r.status::text AS status, ${SECRET_COLUMNS},
               (w.status = 'enabled' AND w.deleted_at IS NULL) AS "webhookEnabled", p.payload
          FROM replays r JOIN webhooks w ON w.id = r.webhook_id JOIN events e ON e.id = r.event_id ${PAYLOAD_JOIN}
         WHERE r.id = ${replayId}`,
    "delivery_state_load_replay_v2",
  );
  return rows[0] ? { ...rows[0], secrets: secretsOf(rows[0].secrets) } : null;
}

/**
 * Records a replay's one attempt: its delivery row, its audit entry and its status in one
 * statement; a success to the webhook's own URL also makes the destination `delivered`, from any
 * state (CONTRACT.md section 5). A second run writes nothing more.
 */
export async function recordReplayAttempt(db: Queryable, target: ReplayAttemptTarget, result: AttemptRecord, replayedAt: Date): Promise<void> {
  const row = deliveryRow({
    accountId: target.accountId,
    eventId: target.eventId,
    webhookId: target.webhookId,
    destinationId: target.destinationId,
    url: target.destinationUrl,
    trigger: "replay",
    attempt: 0,
    result,
    replayId: target.replayId,
    at: replayedAt,
  });
  const own = result.ok && target.toOwnUrl;
  const move = own ? sql`, ${moveDestinationCte(target.destinationId, "delivered", ["pending", "failed", "cancelled"])}, ${clearStreakCte(target.webhookId)}` : empty;
  await runStatement(
    db,
    sql`WITH inserted AS (${row} ON CONFLICT (replay_id) DO NOTHING RETURNING id),
        audit AS (
          INSERT INTO audit_entries (id, account_id, event_id, replay_id, webhook_id, replayed_at, destination_url,
                                     response_status, error, api_key_id)
          VALUES (${newId("aud")}, ${target.accountId}, ${target.eventId}, ${target.replayId}, ${target.webhookId}, ${replayedAt},
                  ${target.destinationUrl}, ${result.responseStatus}, ${result.error}, ${target.apiKeyId})
          ON CONFLICT (replay_id) DO NOTHING RETURNING id
        ), done AS (
          UPDATE replays SET status = ${result.ok ? "delivered" : "failed"}::"DeliveryStatus", updated_at = now()
           WHERE id = ${target.replayId} AND status = 'pending' RETURNING id
        ) ${move}
        SELECT (SELECT count(*) FROM inserted) + (SELECT count(*) FROM audit) + (SELECT count(*) FROM done) AS written`,
  );
}

/** The `error` of the audit entry of a replay that ended `cancelled` without an attempt. */
export const REPLAY_CANCELLED_ERROR = "cancelled";

/**
 * Ends a pending replay `cancelled` without an attempt (see replayCancelled): no delivery row,
 * since nothing was sent, and its audit entry with `response_status` null and `error`
 * "cancelled", so that the audit log still shows the replay that was asked for. One statement;
 * a second run (or a replay that ended otherwise meanwhile) writes nothing.
 */
export async function cancelReplay(db: Queryable, target: ReplayAttemptTarget, at: Date): Promise<void> {
  await runStatement(
    db,
    sql`WITH done AS (
          UPDATE replays SET status = 'cancelled', updated_at = now()
           WHERE id = ${target.replayId} AND status = 'pending' RETURNING id
        ), audit AS (
          INSERT INTO audit_entries (id, account_id, event_id, replay_id, webhook_id, replayed_at, destination_url,
                                     response_status, error, api_key_id)
          SELECT ${newId("aud")}::text, ${target.accountId}::text, ${target.eventId}::text, done.id, ${target.webhookId}::text,
                 ${at}::timestamptz, ${target.destinationUrl}::text, NULL::int, ${REPLAY_CANCELLED_ERROR}::text, ${target.apiKeyId}::text
            FROM done
          ON CONFLICT (replay_id) DO NOTHING RETURNING id
        )
        SELECT (SELECT count(*) FROM done) + (SELECT count(*) FROM audit) AS written`,
  );
}

// ------------------------------------------------------------------ test deliveries

export interface TestAttemptTarget {
  testDeliveryId: string;
  accountId: string;
  webhookId: string;
  url: string;
  secrets: StoredSecrets;
  webhookEnabled: boolean;
  status: "pending" | "delivered" | "failed" | "cancelled";
}

export async function loadTestDelivery(db: Queryable, testDeliveryId: string): Promise<TestAttemptTarget | null> {
  const { rows } = await run<TestAttemptTarget & { secrets: never }>(
    db,
    sql`SELECT t.id AS "testDeliveryId", t.account_id AS "accountId", t.webhook_id AS "webhookId", t.status::text AS status,
               w.url, ${SECRET_COLUMNS}, (w.status = 'enabled' AND w.deleted_at IS NULL) AS "webhookEnabled"
          FROM test_deliveries t JOIN webhooks w ON w.id = t.webhook_id
         WHERE t.id = ${testDeliveryId}`,
  );
  return rows[0] ? { ...rows[0], secrets: secretsOf(rows[0].secrets) } : null;
}

/** Records a test delivery's one attempt (`trigger: "test"`, no event) and its status. */
export async function recordTestAttempt(db: Queryable, target: TestAttemptTarget, result: AttemptRecord): Promise<void> {
  const row = deliveryRow({
    accountId: target.accountId,
    eventId: null,
    webhookId: target.webhookId,
    destinationId: null,
    url: target.url,
    trigger: "test",
    attempt: 0,
    result,
    testDeliveryId: target.testDeliveryId,
  });
  await runStatement(
    db,
    sql`WITH inserted AS (${row} ON CONFLICT (test_delivery_id) DO NOTHING RETURNING id)${result.ok ? sql`, ${clearStreakCte(target.webhookId)}` : empty}
        UPDATE test_deliveries SET status = ${result.ok ? "delivered" : "failed"}::"DeliveryStatus", updated_at = now()
         WHERE id = ${target.testDeliveryId} AND status = 'pending'`,
  );
}

/** Ends a test delivery whose webhook was disabled or deleted before it was sent. */
export async function cancelTestDelivery(db: Queryable, testDeliveryId: string): Promise<void> {
  await runStatement(db, sql`UPDATE test_deliveries SET status = 'cancelled', updated_at = now() WHERE id = ${testDeliveryId} AND status = 'pending'`);
}

// ------------------------------------------------------------------ poison

/** The kinds of delivery work, by the name of their job. */
export type WorkKind = "delivery" | "replay" | "test-delivery";

/**
 * Ends pending work as `failed` without an attempt row: its job failed for a reason that is not
 * a delivery failure nor an outage (a bug, a constraint), and must never send again.
 */
export async function failWithoutAttempt(db: Queryable, kind: WorkKind, id: string): Promise<void> {
  if (kind === "delivery") {
    await runStatement(db, sql`WITH ${moveDestinationCte(id, "failed", ["pending"])} SELECT count(*) FROM moved`);
  } else {
    const table = kind === "replay" ? sql`replays` : sql`test_deliveries`;
    await runStatement(db, sql`UPDATE ${table} SET status = 'failed', updated_at = now() WHERE id = ${id} AND status = 'pending'`);
  }
}
