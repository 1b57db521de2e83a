import type pg from "pg";
import sql, { type Sql } from "sql-template-tag";
import { newId } from "@mailhooks/db";
import { buildOperationalEnvelope, type OperationalEventType } from "@mailhooks/events";
import { JOB_NAMES } from "@mailhooks/queue";
import { inTransaction, run, type Queryable } from "./db.js";
import { enqueueCte } from "./work-queue.js";
import { eventStatusSql } from "./status.js";

/**
 * Operational events (docs/api.md, "Operational events"): `webhook.failing` (a webhook's attempts
 * failed FAILING_AFTER times in a row: once, until it recovers), `webhook.recovered` (its first 2xx
 * after that), `webhook.disabled` (by a person, `manual`, or by auto-disable, `failing`) and
 * `destination.failed` (a destination of an email event ended failed). Each is first a row of
 * `notices`, written in the transaction of what causes it, so it is made exactly once whatever
 * dispatcher records what; publishNotices turns notices into events of the account, delivered to
 * every webhook of the account subscribed to the kind except the one they are about, and deletes
 * them in the same transaction. No notice is made about an operational event's own delivery.
 */

/** Attempts failed in a row after which a webhook is failing. */
export const FAILING_AFTER = 5;

/** An ISO 8601 UTC timestamp (`2026-11-22T10:00:00.000Z`) of the SQL timestamptz expression `at`. */
export function isoUtc(at: Sql): Sql {
  return sql`to_char(${at} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
}

/**
 * The CTE clearing a webhook's failing streaks after a success to its own URL (a replay, a test
 * event): `streak AS (...)`, and `recovered AS (...)` inserting its `webhook.recovered` notice (id
 * `noticeId`, in `queuePrefix`) when `webhook.failing` was made for the streak that ends.
 */
export function clearStreakCte(webhookId: string, queuePrefix: string, noticeId: string): Sql {
  return sql`was AS (
      SELECT id, account_id, url, failing_since, failing_noticed_at FROM webhooks
       WHERE id = ${webhookId}
         AND (failing_since IS NOT NULL OR failing_events <> 0 OR consecutive_failures <> 0 OR failing_noticed_at IS NOT NULL)
       FOR UPDATE
    ), streak AS (
      UPDATE webhooks w SET failing_since = NULL, failing_events = 0, consecutive_failures = 0, failing_noticed_at = NULL
        FROM was WHERE w.id = was.id RETURNING w.id
    ), recovered AS (
      INSERT INTO notices (id, queue_prefix, account_id, kind, webhook_id, data)
      SELECT ${noticeId}, ${queuePrefix}, account_id, 'webhook.recovered', id,
             jsonb_build_object('webhookId', id, 'url', url, 'failingSince', ${isoUtc(sql`failing_since`)}, 'recoveredAt', ${isoUtc(sql`now()`)})
        FROM was WHERE failing_noticed_at IS NOT NULL
      RETURNING 1
    )`;
}

/**
 * The statement writing a `webhook.disabled` notice about `webhookId` (disabled for `reason`),
 * for the caller's transaction.
 */
export function disabledNotice(webhookId: string, queuePrefix: string, reason: "manual" | "failing" | "idle"): Sql {
  return sql`INSERT INTO notices (id, queue_prefix, account_id, kind, webhook_id, data)
             SELECT ${newId("evt")}, ${queuePrefix}, account_id, 'webhook.disabled', id,
                    jsonb_build_object('webhookId', id, 'url', url, 'reason', ${reason}::text)
               FROM webhooks WHERE id = ${webhookId}`;
}

interface NoticeRow {
  id: string;
  account_id: string;
  kind: OperationalEventType;
  webhook_id: string;
  data: Record<string, unknown>;
  occurred_at: Date;
}

/**
 * Makes the events of up to `limit` notices of `queuePrefix`, oldest first, in one transaction:
 * each becomes an event of its account (id: the notice's; `inbox_id` null) with its envelope, one
 * destination (and its unit of work) per enabled or paused webhook of the account subscribed to
 * its kind, other than the webhook it is about (`inbox_ids` does not filter them), and the notice
 * is deleted. A notice no webhook subscribes to makes no event: an account that does not use
 * operational events never sees them among its events. Notices another transaction holds are
 * left to it (SKIP LOCKED). Returns the events made, by kind, and whether notices may be left.
 */
export async function publishNotices(
  pool: pg.Pool,
  queuePrefix: string,
  limit = 100,
): Promise<{ made: Partial<Record<OperationalEventType, number>>; more: boolean }> {
  return inTransaction(pool, async (client) => {
    const { rows } = await run<NoticeRow>(
      client,
      sql`SELECT id, account_id, kind, webhook_id, data, occurred_at FROM notices WHERE queue_prefix = ${queuePrefix}
           ORDER BY occurred_at, id LIMIT ${limit} FOR UPDATE SKIP LOCKED`,
    );
    const made: Partial<Record<OperationalEventType, number>> = {};
    for (const notice of rows) if (await makeEvent(client, queuePrefix, notice)) made[notice.kind] = (made[notice.kind] ?? 0) + 1;
    if (rows.length > 0) await run(client, sql`DELETE FROM notices WHERE id = ANY(${rows.map((r) => r.id)}::text[])`);
    return { made, more: rows.length === limit };
  });
}

/**
 * One notice's event, its payload, its destinations and their units of work; none without a
 * subscriber, nor for a repeat (the event id exists). Whether the event was made.
 */
async function makeEvent(client: Queryable, queuePrefix: string, notice: NoticeRow): Promise<boolean> {
  const payload = buildOperationalEnvelope(notice.kind, notice.occurred_at, notice.data);
  const { rows } = await run<{ made: number }>(
    client,
    sql`WITH subscribers AS (
          SELECT w.id AS webhook_id FROM webhooks w
           WHERE w.account_id = ${notice.account_id} AND w.id <> ${notice.webhook_id} AND w.deleted_at IS NULL
             AND w.status IN ('enabled', 'paused') AND ${notice.kind} = ANY(w.events)
        ), ev AS (
          INSERT INTO events (id, account_id, event_type, inbox_id, message_id, thread_id, status, pending_destinations, occurred_at, created_at)
          SELECT ${notice.id}, ${notice.account_id}, ${notice.kind}, NULL, '', '',
                 ${eventStatusSql({ pending: sql`n`, failed: sql`0` })}, n, ${notice.occurred_at}, now()
            FROM (SELECT count(*)::int AS n FROM subscribers) c WHERE n > 0
          ON CONFLICT (id) DO NOTHING
          RETURNING id, created_at
        ), body AS (
          INSERT INTO event_payloads (event_id, created_at, payload) SELECT id, created_at, ${payload} FROM ev
        ), dst AS (
          INSERT INTO destinations (id, account_id, event_id, webhook_id, queue_prefix, created_at, updated_at)
          SELECT 'dst_' || replace(gen_random_uuid()::text, '-', ''), ${notice.account_id}, ev.id, s.webhook_id, ${queuePrefix}, ev.created_at, ev.created_at
            FROM subscribers s, ev
          RETURNING id, webhook_id, account_id
        ), ${enqueueCte(queuePrefix, sql`SELECT ${JOB_NAMES.delivery}::text, id, webhook_id, account_id, false FROM dst`)}
        SELECT (SELECT count(*) FROM ev)::int AS made, (SELECT count(*) FROM queued) AS queued`,
  );
  return rows[0]?.made === 1;
}
