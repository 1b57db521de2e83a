import type pg from "pg";
import type { Got } from "got";
import type { Logger } from "@mailhooks/logger";
import {
  autoDisableWebhook,
  cancelDestination,
  createBatcher,
  decideAfterAttempt,
  dropEndedWork,
  loadDestinations,
  releaseWork,
  loadPayload,
  recordDestinationAttempts,
  signingAt,
  type AttemptOutcome,
  type AttemptWebhook,
  type PayloadRef,
  type StoredSecrets,
  type AttemptRecord,
  type DestinationAttempt,
  type LoadedDestination,
  type FailingStreak,
  type LeasedWork,
} from "@mailhooks/delivery-state";
import { isInfrastructureError } from "@mailhooks/infrastructure-errors";
import type { PrivateTargets } from "@mailhooks/url-policy";
import type { Keyring } from "@mailhooks/secrets";
import type { RequestSigning } from "@mailhooks/signing";
import { observeAttempt, type DispatcherMetrics } from "../metrics.js";
import { sendSigned, type AttemptResult } from "../delivery/send.js";
import { createPayloadCache, type PayloadCache } from "../delivery/payload-cache.js";
import { decryptWebhookHeaders } from "../delivery/webhook-headers.js";

export interface DeliveryContext {
  pool: pg.Pool;
  /**
   * The loads' connections (BATCHES_IN_FLIGHT at most): a pool made with createPool's
   * `genericPlans`, so that the load keeps its generic plan in one round trip; absent: `pool`.
   */
  loadPool?: pg.Pool;
  client: Got;
  /** ALLOW_PRIVATE_TARGETS: which non-public addresses may be delivered to. */
  allowPrivateTargets: PrivateTargets;
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
    attempts: context.attempts ?? createAttemptStore(context.pool, context.loadPool),
    payloads: context.payloads ?? createPayloadCache((eventId) => loadPayload(context.pool, eventId)),
  };
}

/** What an attempt sends: the URL (its webhook's endpoint, or a replay's target_url), the webhook's signing and headers, the event id. */
export interface SigningInput {
  url: string;
  signing: RequestSigning;
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
    signing: request.signing,
    eventId: request.eventId,
    headers,
    allowPrivateTargets: ctx.allowPrivateTargets,
  });
}

/**
 * Sends the stored envelope of `work` (a destination's attempt, a replay) once to `url`:
 * its payload held from the cache for the send, signed under the webhook's scheme with whichever
 * of its secrets sign now (signingAt; docs/receivers.md, "Secret rotation"). A payload purged
 * meanwhile sends nothing: `sent` is false and the result `payload_expired`.
 * @throws SecretDecryptionError, StoredHeadersError (see sendToWebhook)
 */
export async function sendStoredEnvelope(
  ctx: WorkerContext,
  work: PayloadRef & {
    secrets: StoredSecrets;
    signatureScheme: AttemptWebhook["signatureScheme"];
    eventId: string;
    storedHeaders: string | null;
  },
  url: string,
): Promise<{ result: AttemptRecord; sent: boolean }> {
  const held = await ctx.payloads.acquire(work);
  if (held === null)
    return { result: { ok: false, responseStatus: null, error: "payload_expired", responseBody: null, durationMs: 0 }, sent: false };
  try {
    const signing = signingAt((stored) => ctx.keyring.decrypt(stored), work, new Date());
    return {
      result: await sendToWebhook(ctx, { url, signing, eventId: work.eventId, storedHeaders: work.storedHeaders }, held.body),
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
  load(work: LeasedWork): Promise<LoadedDestination | null>;
  record(attempt: DestinationAttempt): Promise<FailingStreak | null>;
}

/**
 * The loads, and the records, in flight at once: two, so that one batch gathers while the other
 * runs (batcher.ts), whatever the slots; more would only split the same attempts into smaller
 * batches.
 */
export const BATCHES_IN_FLIGHT = 2;

/** An AttemptStore over `pool` (its loads over `loadPool`), batching up to `maxBatch` attempts per query. */
export function createAttemptStore(pool: pg.Pool, loadPool: pg.Pool = pool, maxBatch = 64): AttemptStore {
  const loads = createBatcher((items: LeasedWork[]) => loadDestinations(loadPool, items), { maxBatch, maxConcurrency: BATCHES_IN_FLIGHT });
  const records = createBatcher((items: DestinationAttempt[]) => recordDestinationAttempts(pool, items), {
    maxBatch,
    maxConcurrency: BATCHES_IN_FLIGHT,
  });
  return { load: (work) => loads.submit(work), record: (attempt) => records.submit(attempt) };
}

/** The first and the longest pause between two tries of an attempt's record, in ms. */
const RECORD_RETRY_MS = { first: 100, max: 5_000 };

/**
 * `write()`, tried again while PostgreSQL is unreachable (isInfrastructureError), with a pause
 * doubling from 100 ms to 5 s, until it succeeds: the outcome of an attempt that was made is kept
 * and written, never lost to an outage (then the attempt would be made again). Any other error is
 * thrown.
 */
export async function untilRecorded<T>(ctx: Pick<DeliveryContext, "logger">, write: () => Promise<T>): Promise<T> {
  for (let pause = RECORD_RETRY_MS.first; ; pause = Math.min(RECORD_RETRY_MS.max, pause * 2)) {
    try {
      return await write();
    } catch (error) {
      if (!isInfrastructureError(error)) throw error;
      ctx.logger.warn("could not record an attempt; its outcome is kept and written again", { error: (error as Error).message, pause });
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}

/** Events a failing streak must span before auto-disable (docs/api.md, "Webhooks"). */
export const AUTO_DISABLE_MIN_EVENTS = 20;

/**
 * One attempt at one destination (spec "States and transitions"), for the lease `work` a claim
 * took: attempt 0 is the initial one, n is retry n (the work queue says which). A 2xx makes the
 * destination `delivered`; a failure with a retry left is recorded and its retry scheduled (the
 * work waits in the queue for its delay: nothing holds a slot meanwhile); the last failure makes
 * it `failed` (decideAfterAttempt). A lease that is not the work's current one does nothing, a
 * destination no longer pending leaves the queue without an attempt, one whose webhook was paused
 * since the claim goes back to wait, and one whose webhook was disabled or deleted ends `cancelled`. A payload over INLINE_PAYLOAD_BYTES is held from the
 * PayloadCache for the attempt (it may wait for budget). Every request carries X-Service-Event-Id
 * (the event id) and the webhook's own headers.
 */
export async function deliverDestination(ctx: WorkerContext, work: LeasedWork): Promise<void> {
  const destination = await ctx.attempts.load(work);
  if (!destination) return;
  if (destination.status !== "pending") return dropEndedWork(ctx.pool, [work.workId]);
  // Paused between the claim and now: the work waits for the resume, no attempt used.
  if (destination.webhookPaused) return releaseWork(ctx.pool, [work]);
  if (!destination.webhookEnabled) return cancelDestination(ctx.pool, work.workId);
  // A listen webhook's destinations are pulled, never claimed (unless disabled: cancelled above).
  if (destination.url === null) throw new Error(`destination ${work.workId} of a listen webhook was claimed`);
  const { attempt } = destination;
  // A payload purged before it could be delivered sends nothing, and no retry can change that.
  const { result, sent } = await sendStoredEnvelope(ctx, destination, destination.url);
  if (sent) observeAttempt(ctx.metrics, attempt === 0 ? "initial" : "retry", result.ok, result.durationMs);
  const next = decideAfterAttempt(ctx.retryDelaysMs, attempt, outcomeOf(result), new Date());
  const streak = await untilRecorded(ctx, () =>
    ctx.attempts.record({
      destination,
      attempt,
      result,
      outcome: next.next,
      retryDelayMs: next.next === "retry" ? next.delayMs : undefined,
    }),
  );
  if (streak) await disableIfFailing(ctx, destination, streak);
  if (result.ok) ctx.metrics.endToEndLatency.observe((Date.now() - destination.eventCreatedAt.getTime()) / 1000);
  if (next.next === "retry") ctx.metrics.retriesScheduled.inc();
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
async function disableIfFailing(
  ctx: DeliveryContext,
  { webhookId, queuePrefix }: Pick<LoadedDestination, "webhookId" | "queuePrefix">,
  streak: FailingStreak,
): Promise<void> {
  if (ctx.autoDisableAfterMs <= 0 || streak.events < AUTO_DISABLE_MIN_EVENTS) return;
  if (Date.now() - streak.since.getTime() < ctx.autoDisableAfterMs) return;
  if (!(await autoDisableWebhook(ctx.pool, webhookId, queuePrefix))) return;
  ctx.logger.warn("webhook disabled: every attempt failed", {
    webhookId,
    failingSince: streak.since.toISOString(),
    failedEvents: streak.events,
  });
  ctx.metrics.webhooksAutoDisabled.inc();
}
