import sql, { empty } from "sql-template-tag";
import { newId } from "@mailhooks/db";
import { run, runStatement, type Queryable } from "./db.js";
import { moveDestinationCte } from "./status.js";
import { endWorkCte } from "./work-queue.js";
import { ATTEMPT_WEBHOOK_COLUMNS, PAYLOAD_COLUMNS, PAYLOAD_JOIN, secretsOf } from "./attempt-common.js";
import { clearStreakCte } from "./notices.js";
import type { AttemptRecord, AttemptWebhook, PayloadRef } from "./attempt-common.js";

/**
 * The one attempt of a replay (docs/api.md, "Replay"): read what it needs, and write its
 * delivery row, its audit entry and its status in one statement, stamped with PostgreSQL's now()
 * when the statement runs (not when the attempt started: one clock for every log).
 */

/** A replay's attempt; its webhook's extra headers are sent to an override URL too. */
export interface LoadedReplay extends PayloadRef, AttemptWebhook {
  replayId: string;
  accountId: string;
  webhookId: string;
  destinationId: string;
  /** Null: a listen webhook's own destination (the replay is pulled). */
  destinationUrl: string | null;
  toOwnUrl: boolean;
  /** Asked for with a target_url. */
  hasTargetUrl: boolean;
  apiKeyId: string;
  status: "pending" | "delivered" | "failed" | "cancelled";
  queuePrefix: string;
}

/**
 * Whether a replay must end `cancelled` without an attempt (docs/api.md, "Replay"): it
 * was asked for without a target_url (so it goes to its webhook's own URL), and that webhook was
 * disabled or deleted after the replay was accepted. A replay with a target_url is sent whatever
 * its webhook's status, even to the webhook's own URL: the disabled webhook's secret still signs.
 */
export function replayCancelled(replay: Pick<LoadedReplay, "hasTargetUrl" | "webhookEnabled">): boolean {
  return !replay.hasTargetUrl && !replay.webhookEnabled;
}

/**
 * What the attempt of replay `replayId` under lease `lease` needs (a payload over
 * INLINE_PAYLOAD_BYTES left out), or null when that lease is not the replay's current, live one.
 */
export async function loadReplay(db: Queryable, replayId: string, lease: number): Promise<LoadedReplay | null> {
  const { rows } = await run<LoadedReplay & { secrets: never }>(
    db,
    sql`SELECT r.id AS "replayId", r.account_id AS "accountId", r.event_id AS "eventId", r.webhook_id AS "webhookId",
               r.destination_id AS "destinationId", r.destination_url AS "destinationUrl", r.to_own_url AS "toOwnUrl",
               r.has_target_url AS "hasTargetUrl", r.api_key_id AS "apiKeyId", r.status::text AS status, r.queue_prefix AS "queuePrefix",
               ${ATTEMPT_WEBHOOK_COLUMNS},
               ${PAYLOAD_COLUMNS}, e.created_at AS "eventCreatedAt"
          FROM replays r JOIN work_items q ON q.work_id = r.id AND q.lease = ${lease} AND q.leased_until > now()
          JOIN webhooks w ON w.id = r.webhook_id JOIN events e ON e.id = r.event_id ${PAYLOAD_JOIN}
         WHERE r.id = ${replayId}`,
    "delivery_state_load_replay_v5",
  );
  return rows[0] ? { ...rows[0], secrets: secretsOf(rows[0].secrets) } : null;
}

/**
 * Records a replay's one attempt: its delivery row, its audit entry, its status and the end of
 * its row of the work queue in one statement; a success to the webhook's own URL also makes the
 * destination `delivered`, from any state, and takes its retry, if one waits, out of the queue
 * (docs/api.md, "Replay"). A second run writes nothing more.
 */
export async function recordReplayAttempt(
  db: Queryable,
  replay: LoadedReplay,
  result: AttemptRecord,
  /** Its delivery row's id: a pull's (listen.ts); absent, a new one. */
  deliveryId: string = newId("dlv"),
): Promise<void> {
  const own = result.ok && replay.toOwnUrl;
  const move = own
    ? sql`, ${moveDestinationCte(replay.destinationId, "delivered", ["pending", "failed", "cancelled"])}, ${clearStreakCte(replay.webhookId, replay.queuePrefix, newId("evt"))},
          retry_dropped AS (DELETE FROM work_items WHERE work_id = ${replay.destinationId} AND leased_until IS NULL RETURNING 1)`
    : empty;
  await runStatement(
    db,
    sql`WITH inserted AS (
          INSERT INTO deliveries (id, account_id, event_id, webhook_id, destination_id, url, trigger, attempt, response_status,
                                  error, response_body, duration_ms, replay_id, created_at)
          VALUES (${deliveryId}, ${replay.accountId}, ${replay.eventId}, ${replay.webhookId}, ${replay.destinationId},
                  ${replay.destinationUrl}, 'replay'::"DeliveryTrigger", 0, ${result.responseStatus}, ${result.error}, ${result.responseBody ?? null},
                  ${result.durationMs}, ${replay.replayId}, now())
          ON CONFLICT (replay_id) DO NOTHING RETURNING id
        ), audit AS (
          INSERT INTO audit_entries (id, account_id, event_id, replay_id, webhook_id, replayed_at, destination_url,
                                     response_status, error, api_key_id)
          VALUES (${newId("aud")}, ${replay.accountId}, ${replay.eventId}, ${replay.replayId}, ${replay.webhookId}, now(),
                  ${replay.destinationUrl}, ${result.responseStatus}, ${result.error}, ${replay.apiKeyId})
          ON CONFLICT (replay_id) DO NOTHING RETURNING id
        ), done AS (
          UPDATE replays SET status = ${result.ok ? "delivered" : "failed"}::"DeliveryStatus", updated_at = now()
           WHERE id = ${replay.replayId} AND status = 'pending' RETURNING id
        ), ${endWorkCte(sql`${[replay.replayId]}::text[]`)} ${move}
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
export async function cancelReplay(db: Queryable, replay: LoadedReplay): Promise<void> {
  await endReplayWithoutAttempt(db, replay.replayId, "cancelled", REPLAY_CANCELLED_ERROR, false);
}

/**
 * Ends pending replay `replayId` without an attempt, `status` with an audit entry whose `error`
 * is `error` (and, with `withRow`, a delivery row saying the same), stamped now(). Nothing when
 * it is no longer pending.
 */
export async function endReplayWithoutAttempt(
  db: Queryable,
  replayId: string,
  status: "cancelled" | "failed",
  error: string,
  withRow: boolean,
): Promise<void> {
  const row = withRow
    ? sql`, dlv AS (
          INSERT INTO deliveries (id, account_id, event_id, webhook_id, destination_id, url, trigger, attempt, response_status,
                                  error, response_body, duration_ms, replay_id, created_at)
          SELECT ${newId("dlv")}::text, account_id, event_id, webhook_id, destination_id, destination_url, 'replay'::"DeliveryTrigger", 0, NULL, ${error}::text,
                 NULL, 0, id, now() FROM done
          ON CONFLICT (replay_id) DO NOTHING RETURNING id)`
    : empty;
  await runStatement(
    db,
    sql`WITH done AS (
          UPDATE replays SET status = ${status}::"DeliveryStatus", updated_at = now()
           WHERE id = ${replayId} AND status = 'pending'
          RETURNING id, account_id, event_id, webhook_id, destination_id, destination_url, api_key_id
        ), ${endWorkCte(sql`${[replayId]}::text[]`)}, audit AS (
          INSERT INTO audit_entries (id, account_id, event_id, replay_id, webhook_id, replayed_at, destination_url,
                                     response_status, error, api_key_id)
          SELECT ${newId("aud")}::text, account_id, event_id, id, webhook_id, now(), destination_url, NULL::int, ${error}::text, api_key_id
            FROM done
          ON CONFLICT (replay_id) DO NOTHING RETURNING id
        ) ${row}
        SELECT (SELECT count(*) FROM done) + (SELECT count(*) FROM audit) AS written`,
  );
}
