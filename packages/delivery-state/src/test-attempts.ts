import sql, { empty } from "sql-template-tag";
import { run, runStatement, type Queryable } from "./db.js";
import { endWorkCte } from "./work-queue.js";
import { newId } from "@mailhooks/db";
import { ATTEMPT_WEBHOOK_COLUMNS, secretsOf, type AttemptRecord, type AttemptWebhook } from "./attempt-common.js";
import { clearStreakCte } from "./notices.js";

/**
 * The one attempt of a test delivery (docs/api.md, "Test events"): `webhook.test`, or an
 * example envelope of one of the six kinds (`eventType`). Its delivery row's id is known before
 * the request is sent (testDeliveryRowId): the request carries it as X-Service-Event-Id, and the
 * API can answer it as `delivery_id` when the test is asked for.
 */

export interface LoadedTestDelivery extends AttemptWebhook {
  testDeliveryId: string;
  accountId: string;
  webhookId: string;
  /** Null for a listen webhook (the test is pulled). */
  url: string | null;
  /** null: the `webhook.test` envelope; else the kind of the example envelope to send. */
  eventType: string | null;
  status: "pending" | "delivered" | "failed" | "cancelled";
  queuePrefix: string;
}

/**
 * The id of the delivery row of test delivery `testDeliveryId` (`tst_<hex>` -> `dlv_<hex>`): the
 * same every time the job runs, and unique, since the hex of each id is a fresh UUIDv7.
 */
export function testDeliveryRowId(testDeliveryId: string): string {
  return `dlv_${testDeliveryId.slice(testDeliveryId.indexOf("_") + 1)}`;
}

/** What the attempt of test delivery `testDeliveryId` under lease `lease` needs, or null when that lease is not its current, live one. */
export async function loadTestDelivery(db: Queryable, testDeliveryId: string, lease: number): Promise<LoadedTestDelivery | null> {
  const { rows } = await run<LoadedTestDelivery & { secrets: never }>(
    db,
    sql`SELECT t.id AS "testDeliveryId", t.account_id AS "accountId", t.webhook_id AS "webhookId", t.status::text AS status,
               t.queue_prefix AS "queuePrefix",
               t.event_type AS "eventType", w.url, ${ATTEMPT_WEBHOOK_COLUMNS}
          FROM test_deliveries t JOIN work_items q ON q.work_id = t.id AND q.lease = ${lease} AND q.leased_until > now()
          JOIN webhooks w ON w.id = t.webhook_id
         WHERE t.id = ${testDeliveryId}`,
  );
  return rows[0] ? { ...rows[0], secrets: secretsOf(rows[0].secrets) } : null;
}

/**
 * Records a test delivery's one attempt (`trigger: "test"`, no event, id testDeliveryRowId,
 * stamped now()), its status and the end of its row of the work queue; a second run writes
 * nothing more.
 */
export async function recordTestAttempt(db: Queryable, testDelivery: LoadedTestDelivery, result: AttemptRecord): Promise<void> {
  await runStatement(
    db,
    sql`WITH inserted AS (
          INSERT INTO deliveries (id, account_id, event_id, webhook_id, destination_id, url, trigger, attempt, response_status,
                                  error, response_body, duration_ms, test_delivery_id, created_at)
          VALUES (${testDeliveryRowId(testDelivery.testDeliveryId)}, ${testDelivery.accountId}, NULL, ${testDelivery.webhookId}, NULL, ${testDelivery.url},
                  'test'::"DeliveryTrigger", 0, ${result.responseStatus}, ${result.error}, ${result.responseBody ?? null},
                  ${result.durationMs}, ${testDelivery.testDeliveryId}, now())
          ON CONFLICT DO NOTHING RETURNING id
        ), ${endWorkCte(sql`${[testDelivery.testDeliveryId]}::text[]`)}${result.ok ? sql`, ${clearStreakCte(testDelivery.webhookId, testDelivery.queuePrefix, newId("evt"))}` : empty}
        UPDATE test_deliveries SET status = ${result.ok ? "delivered" : "failed"}::"DeliveryStatus", updated_at = now()
         WHERE id = ${testDelivery.testDeliveryId} AND status = 'pending'`,
  );
}

/** Ends a test delivery whose webhook was disabled or deleted before it was sent, and its row of the work queue. */
export async function cancelTestDelivery(db: Queryable, testDeliveryId: string): Promise<void> {
  await runStatement(
    db,
    sql`WITH ${endWorkCte(sql`${[testDeliveryId]}::text[]`)}
        UPDATE test_deliveries SET status = 'cancelled', updated_at = now() WHERE id = ${testDeliveryId} AND status = 'pending'`,
  );
}

/**
 * Ends a pending test delivery `failed` with a delivery row whose `error` is `error` (nothing was
 * sent), stamped now(). Nothing when it is no longer pending.
 */
export async function failTestDeliveryWithoutAttempt(db: Queryable, testDeliveryId: string, error: string): Promise<void> {
  await runStatement(
    db,
    sql`WITH done AS (
          UPDATE test_deliveries SET status = 'failed', updated_at = now() WHERE id = ${testDeliveryId} AND status = 'pending'
          RETURNING id, account_id, webhook_id
        ), ${endWorkCte(sql`${[testDeliveryId]}::text[]`)}
        INSERT INTO deliveries (id, account_id, event_id, webhook_id, destination_id, url, trigger, attempt, response_status,
                                error, response_body, duration_ms, test_delivery_id, created_at)
        SELECT ${testDeliveryRowId(testDeliveryId)}::text, done.account_id, NULL, done.webhook_id, NULL, w.url, 'test'::"DeliveryTrigger", 0,
               NULL, ${error}::text, NULL, 0, done.id, now()
          FROM done JOIN webhooks w ON w.id = done.webhook_id
        ON CONFLICT DO NOTHING`,
  );
}
