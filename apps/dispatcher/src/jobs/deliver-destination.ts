import type pg from "pg";
import type { Got } from "got";
import type { Logger } from "@mailhooks/logger";
import {
  autoDisableWebhook,
  cancelDestination,
  createBatcher,
  decideAfterAttempt,
  loadDestinations,
  loadPayload,
  recordDestinationAttempts,
  signingSecretAt,
  type AttemptOutcome,
  type PayloadRef,
  type StoredSecrets,
  type AttemptRecord,
  type DestinationAttempt,
  type LoadedDestination,
  type FailingStreak,
  type RecordedAttempt,
} from "@mailhooks/delivery-state";
import type { WorkJobResult } from "@mailhooks/queue";
import type { Keyring } from "@mailhooks/secrets";
import { observeAttempt, type DispatcherMetrics } from "../metrics.js";
import { sendSigned, type AttemptResult } from "../delivery/send.js";
import { RetryableDeliveryError } from "../delivery/retry-policy.js";
import { createPayloadCache, type PayloadCache } from "../delivery/payload-cache.js";
import { decryptWebhookHeaders } from "../delivery/webhook-headers.js";

export interface DeliveryContext {
  pool: pg.Pool;
  client: Got;
  allowPrivateTargets: boolean;
  /** DELIVERY_RETRY_DELAYS_MS: the number of retries after the initial attempt is its length. */
  retryDelaysMs: readonly number[];
  logger: Logger;
  metrics: DispatcherMetrics;
  /** Decrypts webhook secrets (SECRET_ENCRYPTION_KEYS). */
  keyring: Keyring;
  /** WEBHOOK_AUTO_DISABLE_AFTER_HOURS in ms; 0: auto-disable off. */
  autoDisableAfterMs: number;
  /** Batched reads and writes of destination attempts; made by createDeliveryWorker when absent. */
  attempts?: AttemptStore;
  /** Large payloads, shared per event within a byte budget; made by createDeliveryWorker when absent. */
  payloads?: PayloadCache;
}

/** A context with the parts createDeliveryWorker fills in. */
export type WorkerContext = DeliveryContext & { attempts: AttemptStore; payloads: PayloadCache };

/** `context` with its AttemptStore and PayloadCache (new ones over its pool when absent). */
export function withDefaults(context: DeliveryContext): WorkerContext {
  return {
    ...context,
    attempts: context.attempts ?? createAttemptStore(context.pool),
    payloads: context.payloads ?? createPayloadCache((eventId) => loadPayload(context.pool, eventId)),
  };
}

/** What an attempt sends: the URL (its webhook's endpoint, or a replay's target_url), the webhook's secret and headers, the event id. */
export interface SigningInput {
  url: string;
  secret: string;
  eventId: string;
  storedHeaders: string | null;
}

/**
 * Sends `body` to `request.url` (see sendSigned), with the webhook's own headers decrypted just
 * before and dropped right after.
 * @throws SecretDecryptionError, StoredHeadersError from the stored headers
 */
export function sendToWebhook(ctx: DeliveryContext, request: SigningInput, body: string | Buffer): Promise<AttemptResult> {
  const headers = decryptWebhookHeaders(ctx.keyring, request.storedHeaders);
  return sendSigned(ctx.client, {
    url: request.url,
    body,
    secret: request.secret,
    eventId: request.eventId,
    headers,
    allowPrivateTargets: ctx.allowPrivateTargets,
  });
}

/**
 * Sends the stored envelope of `work` (a destination's attempt, a replay) once to `url`:
 * its payload held from the cache for the send, signed with whichever of the webhook's secrets
 * signs now (docs/api.md, "Webhooks"). A payload purged meanwhile sends nothing: `sent` is false
 * and the result `payload_expired`.
 * @throws SecretDecryptionError, StoredHeadersError (see sendToWebhook)
 */
export async function sendStoredEnvelope(
  ctx: WorkerContext,
  work: PayloadRef & { secrets: StoredSecrets; eventId: string; storedHeaders: string | null },
  url: string,
): Promise<{ result: AttemptRecord; sent: boolean }> {
  const held = await ctx.payloads.acquire(work);
  if (held === null)
    return { result: { ok: false, responseStatus: null, error: "payload_expired", responseBody: null, durationMs: 0 }, sent: false };
  try {
    const secret = ctx.keyring.decrypt(signingSecretAt(work.secrets, new Date()));
    return {
      result: await sendToWebhook(ctx, { url, secret, eventId: work.eventId, storedHeaders: work.storedHeaders }, held.body),
      sent: true,
    };
  } finally {
    held.release();
  }
}

/**
 * The reads and writes of destination attempts, batched: the attempts that start (or end) at
 * the same time share one query (one statement and one commit), which is what lets a dispatcher
 * beat a bare worker that writes one row per delivery.
 */
export interface AttemptStore {
  load(destinationId: string, attempt: number): Promise<LoadedDestination | null>;
  record(attempt: DestinationAttempt): Promise<RecordedAttempt>;
}

/** An AttemptStore over `pool`, batching up to `maxBatch` attempts per query. */
export function createAttemptStore(pool: pg.Pool, maxBatch = 64): AttemptStore {
  const loads = createBatcher((items: { destinationId: string; attempt: number }[]) => loadDestinations(pool, items), {
    maxBatch,
    maxConcurrency: 2,
  });
  const records = createBatcher((items: DestinationAttempt[]) => recordDestinationAttempts(pool, items), { maxBatch, maxConcurrency: 2 });
  return { load: (destinationId, attempt) => loads.submit({ destinationId, attempt }), record: (attempt) => records.submit(attempt) };
}

/** Events a failing streak must span before auto-disable (docs/api.md, "Webhooks"). */
export const AUTO_DISABLE_MIN_EVENTS = 20;

/**
 * One attempt at one destination (spec "States and transitions"). `attempt` is 0 for the
 * initial attempt and n for retry n. A 2xx makes the destination `delivered`; a failure with a
 * retry left is recorded and rethrown as RetryableDeliveryError so BullMQ schedules the retry;
 * the last failure makes it `failed`. A destination that is no longer pending is left alone, one
 * whose webhook was disabled or deleted ends `cancelled`, and an attempt that a dead dispatcher
 * already recorded is not sent again: its recorded outcome is acted on. A payload over
 * INLINE_PAYLOAD_BYTES is held from the PayloadCache for the attempt (it may wait for budget).
 * Every request carries X-Service-Event-Id (the event id) and the webhook's own headers.
 * Returns `leaseReleased` when the attempt's record ended the destination and found its lease to end.
 */
export async function deliverDestination(ctx: WorkerContext, destinationId: string, attempt: number): Promise<WorkJobResult> {
  const destination = await ctx.attempts.load(destinationId, attempt);
  if (!destination || destination.status !== "pending") return;
  if (!destination.webhookEnabled) {
    await cancelDestination(ctx.pool, destinationId);
    return;
  }
  const trigger = attempt === 0 ? "initial" : "retry";
  let result: AttemptRecord;
  if (destination.recorded) {
    result = { ok: destination.recorded.ok, responseStatus: null, error: null, durationMs: 0 };
  } else {
    // A payload purged before it could be delivered sends nothing, and no retry can change that.
    const { result: sentResult, sent } = await sendStoredEnvelope(ctx, destination, destination.url);
    result = sentResult;
    if (sent) observeAttempt(ctx.metrics, trigger, result.ok, result.durationMs);
  }
  const outcome = decideAfterAttempt(ctx.retryDelaysMs, attempt, outcomeOf(result), new Date()).next;
  const { streak, leaseEnded } = await ctx.attempts.record({ destination, attempt, result, outcome });
  if (streak) await disableIfFailing(ctx, destination.webhookId, streak);
  if (result.ok && !destination.recorded) ctx.metrics.endToEndLatency.observe((Date.now() - destination.eventCreatedAt.getTime()) / 1000);
  if (outcome === "retry") {
    ctx.metrics.retriesScheduled.inc();
    throw new RetryableDeliveryError(`attempt ${attempt} failed: ${result.error ?? result.responseStatus}`);
  }
  // The statement that recorded the end of the work ended its lease too, when it found one.
  return leaseEnded ? { leaseReleased: true } : undefined;
}

/** How an attempt went, for the retry decision: a purged payload fails at once (no retry could send it). */
function outcomeOf(result: AttemptRecord): AttemptOutcome {
  if (result.ok) return "succeeded";
  return result.error === "payload_expired" ? "unretryable" : "failed";
}

/**
 * Auto-disable (docs/api.md, "Webhooks"): a webhook whose every attempt has failed for
 * WEBHOOK_AUTO_DISABLE_AFTER_HOURS across at least AUTO_DISABLE_MIN_EVENTS events is disabled
 * with `disabled_reason: "failing"`, and its pending destinations are cancelled.
 */
async function disableIfFailing(ctx: DeliveryContext, webhookId: string, streak: FailingStreak): Promise<void> {
  if (ctx.autoDisableAfterMs <= 0 || streak.events < AUTO_DISABLE_MIN_EVENTS) return;
  if (Date.now() - streak.since.getTime() < ctx.autoDisableAfterMs) return;
  if (!(await autoDisableWebhook(ctx.pool, webhookId))) return;
  ctx.logger.warn("webhook disabled: every attempt failed", {
    webhookId,
    failingSince: streak.since.toISOString(),
    failedEvents: streak.events,
  });
  ctx.metrics.webhooksAutoDisabled.inc();
}
