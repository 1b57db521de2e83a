import { z } from "zod";
import * as deliveryState from "@mailhooks/delivery-state";
import { SUBSCRIBABLE_EVENT_TYPES, TEST_EVENT_TYPE, type SubscribableEventType } from "@mailhooks/events";
import type { ApiDeps } from "../deps.js";
import { AppError } from "../errors.js";
import { findWebhook } from "./webhooks.js";

/**
 * What the dashboard shows about a webhook beyond its registration: its last attempt, its
 * success rate over the last 24 hours, its latest test request (docs/api.md, "Test events"),
 * and its work waiting in the scheduler (docs/scheduler.md).
 * Reads only; asking for a test request again goes through @mailhooks/delivery-state.
 */

export interface AttemptOutcome {
  at: string;
  trigger: string;
  response_status: number | null;
  error: string | null;
  ok: boolean;
}

export interface WebhookHealth {
  /** The webhook's newest delivery attempt of any trigger, or null before the first. */
  last_outcome: AttemptOutcome | null;
  /** Attempts of the last 24 hours, and how many got a 2xx. */
  last_24h: { attempts: number; succeeded: number };
}

const ok = (status: number | null) => status !== null && status >= 200 && status < 300;

/** Health of each of the account's `webhookIds` (ids of other accounts get an empty health). */
export async function webhookHealth(deps: ApiDeps, accountId: string, webhookIds: string[]): Promise<Map<string, WebhookHealth>> {
  const health = new Map<string, WebhookHealth>(
    webhookIds.map((id) => [id, { last_outcome: null, last_24h: { attempts: 0, succeeded: 0 } }]),
  );
  if (webhookIds.length === 0) return health;
  const [last, counts] = await Promise.all([
    deps.prisma.$queryRaw<
      { webhook_id: string; created_at: Date; trigger: string; response_status: number | null; error: string | null }[]
    >`
      SELECT w.id AS webhook_id, d.created_at, d.trigger::text AS trigger, d.response_status, d.error
        FROM unnest(${webhookIds}::text[]) AS w(id)
        JOIN LATERAL (SELECT created_at, trigger, response_status, error FROM deliveries
                       WHERE webhook_id = w.id AND account_id = ${accountId}
                       ORDER BY created_at DESC, id DESC LIMIT 1) d ON true`,
    deps.prisma.$queryRaw<{ webhook_id: string; attempts: number; succeeded: number }[]>`
      SELECT webhook_id, count(*)::int AS attempts, count(*) FILTER (WHERE response_status BETWEEN 200 AND 299)::int AS succeeded
        FROM deliveries
       WHERE webhook_id = ANY(${webhookIds}::text[]) AND account_id = ${accountId} AND created_at > now() - interval '24 hours'
       GROUP BY webhook_id`,
  ]);
  for (const row of last) {
    health.get(row.webhook_id)!.last_outcome = {
      at: row.created_at.toISOString(),
      trigger: row.trigger,
      response_status: row.response_status,
      error: row.error,
      ok: ok(row.response_status),
    };
  }
  for (const row of counts) health.get(row.webhook_id)!.last_24h = { attempts: row.attempts, succeeded: row.succeeded };
  return health;
}

export interface TestDeliveryOutcome {
  test_delivery_id: string;
  /** The kind of its example envelope, or null for `webhook.test`. */
  event_type: string | null;
  /** `pending` until its one attempt is recorded, then `delivered` or `failed`. */
  status: string;
  requested_at: string;
  /** The attempt, once made. */
  attempt: { at: string; response_status: number | null; error: string | null; duration_ms: number } | null;
}

/** The newest test request of a live webhook of the account, or null if none was ever sent. @throws AppError not_found */
export async function latestTestDelivery(deps: ApiDeps, accountId: string, webhookId: string): Promise<TestDeliveryOutcome | null> {
  await findWebhook(deps, accountId, webhookId);
  const rows = await deps.prisma.$queryRaw<
    {
      id: string;
      event_type: string | null;
      status: string;
      created_at: Date;
      attempted_at: Date | null;
      response_status: number | null;
      error: string | null;
      duration_ms: number | null;
    }[]
  >`
    SELECT t.id, t.event_type, t.status::text AS status, t.created_at, d.created_at AS attempted_at, d.response_status, d.error, d.duration_ms
      FROM test_deliveries t LEFT JOIN deliveries d ON d.test_delivery_id = t.id
     WHERE t.webhook_id = ${webhookId} AND t.account_id = ${accountId}
     ORDER BY t.created_at DESC, t.id DESC LIMIT 1`;
  const row = rows[0];
  if (!row) return null;
  return {
    test_delivery_id: row.id,
    event_type: row.event_type,
    status: row.status,
    requested_at: row.created_at.toISOString(),
    attempt: row.attempted_at
      ? { at: row.attempted_at.toISOString(), response_status: row.response_status, error: row.error, duration_ms: row.duration_ms ?? 0 }
      : null,
  };
}

const TEST_KINDS = [TEST_EVENT_TYPE, ...SUBSCRIBABLE_EVENT_TYPES] as const;

/**
 * POST /v1/webhooks/{id}/test `{event_type?}` (docs/api.md, "Test events"): `webhook.test` (also
 * when absent) for the `webhook.test` envelope, or one of the six email kinds or an operational
 * kind for an example envelope of that kind.
 */
export const testDeliveryRequestSchema = z.strictObject({
  event_type: z
    .enum(TEST_KINDS, { message: `must be one of ${TEST_KINDS.join(", ")}` })
    .optional()
    .meta({
      description:
        "the kind of the envelope to send: `webhook.test` (the default), or an example envelope of one of the six email kinds or an operational kind",
      example: "message.bounced",
    }),
});

/** The kind whose example envelope a test request sends, or undefined for `webhook.test`. */
export const exampleKindOf = (eventType: (typeof TEST_KINDS)[number] | undefined): SubscribableEventType | undefined =>
  eventType === TEST_EVENT_TYPE ? undefined : eventType;

/**
 * Sends one signed test request to a live, enabled webhook now (docs/api.md, "Test events": one
 * attempt, no retry): the `webhook.test` envelope, or with `eventType` an example envelope
 * of that kind.
 * @returns the id its delivery row will have (`trigger: "test"`, `event_id: null`)
 * @throws AppError not_found (no such live webhook), conflict (the webhook is paused or disabled)
 */
export async function requestTestDelivery(
  deps: ApiDeps,
  accountId: string,
  webhookId: string,
  eventType?: SubscribableEventType,
): Promise<string> {
  const ids = await deliveryState.requestTestDelivery(deps.pool, accountId, webhookId, deps.config.QUEUE_PREFIX, eventType ?? null);
  if (ids) return ids.deliveryId;
  const webhook = await findWebhook(deps, accountId, webhookId);
  if (webhook.status === "paused")
    throw new AppError("conflict", "webhook_paused", "the webhook is paused: resume it to send it a test event");
  throw new AppError("conflict", "webhook_disabled", "the webhook is disabled: enable it to send it a test event");
}

/**
 * A webhook's work in the work queue (docs/scheduler.md): `waiting` (for its turn, a retry's time,
 * or its webhook's resume) and `running` (leased to a dispatcher). The caller has checked that
 * the webhook is the account's.
 */
export async function webhookWaitingWork(deps: ApiDeps, webhookId: string): Promise<{ waiting: number; running: number }> {
  return deliveryState.webhookBacklog(deps.pool, webhookId);
}
