import type pg from "pg";
import sql from "sql-template-tag";
import { newId } from "@mailhooks/db";
import { JOB_NAMES } from "@mailhooks/queue";
import { inTransaction, run } from "./db.js";
import { IDEMPOTENCY_WINDOW_HOURS, IdempotencyConflictError } from "./ingest.js";
import { enqueue } from "./work-queue.js";
import { testDeliveryRowId } from "./test-attempts.js";
import { WEBHOOK_COLUMNS, type WebhookRow } from "./webhooks.js";

/**
 * Registering a webhook (docs/api.md, "Webhooks"): the webhook with its test delivery in one
 * transaction, idempotent under an Idempotency-Key, and test deliveries asked for again later.
 */

export interface RegisterWebhookInput {
  accountId: string;
  queuePrefix: string;
  /** Null for a listen webhook (`mode` listen). */
  url: string | null;
  /** Absent: push. */
  mode?: "push" | "listen";
  events: string[];
  secret: string;
  /** MAX_WEBHOOKS_PER_ACCOUNT: live webhooks the account may have. */
  maxWebhooks: number;
  /** Requests per second at most; null or absent: no limit. */
  rateLimit?: number | null;
  /** The inboxes whose events it receives; null or absent: every inbox. */
  inboxIds?: string[] | null;
  /** Its extra request headers, already encrypted (stored form); null or absent: none. */
  headers?: string | null;
  /** How its requests are signed; absent: `service`. The caller checks that the secret suits `standard`. */
  signatureScheme?: "service" | "standard";
  /** The request's Idempotency-Key and the hash of its body (docs/api.md, "Webhooks"). */
  idempotency?: { key: string; requestHash: string };
}

/** A new webhook and its test delivery (the id of that delivery's row included). */
export interface RegisteredWebhook {
  webhook: WebhookRow;
  testDeliveryId: string;
  /** The id the test delivery's row will have. */
  deliveryId: string;
  repeated: false;
}

/** A repeat of an Idempotency-Key within 24 h with the same body: the webhook it made first; no test delivery. */
export interface RepeatedWebhook {
  webhook: WebhookRow;
  repeated: true;
}

/** The webhook an Idempotency-Key made was deleted since: the key cannot answer it again (409). */
export class IdempotentWebhookDeletedError extends Error {
  override name = "IdempotentWebhookDeletedError";
  constructor(readonly key: string) {
    super(`the webhook created with Idempotency-Key ${JSON.stringify(key)} was deleted since`);
  }
}

/**
 * Stores a webhook and its test delivery (with its row of the work queue) in one transaction. Creations of
 * one account serialize on its row, so the limit holds under concurrent requests, and so do
 * repeats of one Idempotency-Key: the second sees the first's key once it has committed.
 * @returns the new webhook and its test delivery; a repeat of the Idempotency-Key within 24 h
 *   with the same body: the first webhook (nothing stored); null when the account is at the limit
 * @throws IdempotencyConflictError (the key came with another body), IdempotentWebhookDeletedError
 */
export async function registerWebhook(
  pool: pg.Pool,
  input: RegisterWebhookInput & { idempotency?: undefined },
): Promise<RegisteredWebhook | null>;
export async function registerWebhook(pool: pg.Pool, input: RegisterWebhookInput): Promise<RegisteredWebhook | RepeatedWebhook | null>;
export async function registerWebhook(pool: pg.Pool, input: RegisterWebhookInput): Promise<RegisteredWebhook | RepeatedWebhook | null> {
  return inTransaction(pool, async (client) => {
    const { rows: live } = await run<{ n: number }>(
      client,
      sql`SELECT (SELECT count(*)::int FROM webhooks WHERE account_id = a.id AND deleted_at IS NULL) AS n
            FROM accounts a WHERE a.id = ${input.accountId} FOR UPDATE`,
    );
    const now = new Date();
    // Expired keys of the account go here (creations are few, and the account's row is locked):
    // the table never outgrows the last day's creations.
    await run(
      client,
      sql`DELETE FROM webhook_idempotency_keys
           WHERE account_id = ${input.accountId} AND created_at < ${now}::timestamptz - make_interval(hours => ${IDEMPOTENCY_WINDOW_HOURS})`,
    );
    if (input.idempotency) {
      const earlier = await webhookOfKey(client, input.accountId, input.idempotency, now);
      if (earlier) return { webhook: earlier, repeated: true };
    }
    if ((live[0]?.n ?? 0) >= input.maxWebhooks) return null;
    const { rows } = await run<WebhookRow>(
      client,
      sql`INSERT INTO webhooks (id, account_id, url, mode, events, secret, rate_limit, inbox_ids, headers, signature_scheme, created_at, updated_at)
          VALUES (${newId("wh")}, ${input.accountId}, ${input.url}, ${input.mode ?? "push"}, ${input.events}::text[], ${input.secret}, ${input.rateLimit ?? null},
                  ${input.inboxIds ?? null}::text[], ${input.headers ?? null}, ${input.signatureScheme ?? "service"}, ${now}, ${now})
          RETURNING ${WEBHOOK_COLUMNS}`,
    );
    const webhook = rows[0];
    if (input.idempotency) {
      // An expired claim of the key (older than the window) is taken over.
      await run(
        client,
        sql`INSERT INTO webhook_idempotency_keys (account_id, key, request_hash, webhook_id, created_at)
            VALUES (${input.accountId}, ${input.idempotency.key}, ${input.idempotency.requestHash}, ${webhook.id}, ${now})
            ON CONFLICT (account_id, key) DO UPDATE
              SET request_hash = EXCLUDED.request_hash, webhook_id = EXCLUDED.webhook_id, created_at = EXCLUDED.created_at`,
      );
    }
    const test = await addTestDelivery(client, input.accountId, webhook.id, input.queuePrefix, now, null);
    return { webhook, ...test, repeated: false };
  });
}

/**
 * The webhook an Idempotency-Key made within the window, or null when the key is new (or expired).
 * @throws IdempotencyConflictError, IdempotentWebhookDeletedError
 */
async function webhookOfKey(
  client: pg.PoolClient,
  accountId: string,
  idempotency: { key: string; requestHash: string },
  now: Date,
): Promise<WebhookRow | null> {
  const { rows } = await run<{ request_hash: string; webhook_id: string }>(
    client,
    sql`SELECT request_hash, webhook_id FROM webhook_idempotency_keys
         WHERE account_id = ${accountId} AND key = ${idempotency.key}
           AND created_at >= ${now}::timestamptz - make_interval(hours => ${IDEMPOTENCY_WINDOW_HOURS})`,
  );
  const claim = rows[0];
  if (!claim) return null;
  if (claim.request_hash !== idempotency.requestHash) throw new IdempotencyConflictError(idempotency.key);
  const { rows: webhooks } = await run<WebhookRow>(
    client,
    sql`SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE id = ${claim.webhook_id} AND account_id = ${accountId} AND deleted_at IS NULL`,
  );
  if (!webhooks[0]) throw new IdempotentWebhookDeletedError(idempotency.key);
  return webhooks[0];
}

/** A test delivery: its id, and the id its one delivery row will have. */
export interface TestDeliveryIds {
  testDeliveryId: string;
  deliveryId: string;
}

/**
 * Adds a test delivery with its row of the work queue. Its delivery row's id follows from its own
 * (testDeliveryRowId: the dispatcher sends it as X-Service-Event-Id and writes the row under it)
 * and is stored in `test_deliveries.delivery_id`, so that POST /v1/webhooks/{id}/test can answer
 * it at once.
 */
async function addTestDelivery(
  client: pg.PoolClient,
  accountId: string,
  webhookId: string,
  queuePrefix: string,
  now: Date,
  eventType: string | null,
): Promise<TestDeliveryIds> {
  const id = newId("tst");
  const deliveryId = testDeliveryRowId(id);
  await run(
    client,
    sql`INSERT INTO test_deliveries (id, account_id, webhook_id, queue_prefix, event_type, delivery_id, created_at, updated_at)
        VALUES (${id}, ${accountId}, ${webhookId}, ${queuePrefix}, ${eventType}, ${deliveryId}, ${now}, ${now})`,
  );
  await enqueue(client, queuePrefix, [{ kind: JOB_NAMES.testDelivery, workId: id, webhookId, accountId }]);
  return { testDeliveryId: id, deliveryId };
}

/**
 * Queues a test request to a live, enabled webhook (POST /v1/webhooks/{id}/test, the dashboard's
 * "Send test event"): `eventType` null for the `webhook.test` envelope, else one of the six kinds
 * for an example envelope of that kind (the dispatcher builds it from `test_deliveries.event_type`).
 * @returns the test delivery's ids, or null when there is no such enabled webhook
 */
export async function requestTestDelivery(
  pool: pg.Pool,
  accountId: string,
  webhookId: string,
  queuePrefix: string,
  eventType: string | null = null,
): Promise<TestDeliveryIds | null> {
  return inTransaction(pool, async (client) => {
    const { rows } = await run(
      client,
      sql`SELECT 1 FROM webhooks WHERE id = ${webhookId} AND account_id = ${accountId} AND deleted_at IS NULL AND status = 'enabled' FOR SHARE`,
    );
    if (rows.length === 0) return null;
    return addTestDelivery(client, accountId, webhookId, queuePrefix, new Date(), eventType);
  });
}
