import type { PrismaClient } from "@mailhooks/db";
import type { Got } from "got";
import type { Logger } from "@mailhooks/logger";
import { observeAttempt, type DispatcherMetrics } from "../metrics.js";
import { sendSigned } from "../delivery/send.js";
import { RetryableDeliveryError } from "../delivery/retry-policy.js";
import { finishDestination, loadDestination, recordAttempt } from "../delivery/store.js";

export interface DeliveryContext {
  prisma: PrismaClient;
  client: Got;
  allowPrivateTargets: boolean;
  /** DELIVERY_RETRY_DELAYS_MS: the number of retries after the initial attempt is its length. */
  retryDelaysMs: readonly number[];
  logger: Logger;
  metrics: DispatcherMetrics;
}

/**
 * One attempt at one destination (spec "States and transitions"). `attempt` is 0 for the
 * initial attempt and n for retry n. A 2xx makes the destination `delivered`; a failure with a
 * retry left is recorded and rethrown as RetryableDeliveryError so BullMQ schedules the retry;
 * the last failure makes it `failed`. A destination that is no longer pending is left alone
 * (the job may run twice after a crash: at-least-once, never a second final write).
 */
export async function deliverDestination(ctx: DeliveryContext, destinationId: string, attempt: number): Promise<void> {
  const target = await loadDestination(ctx.prisma, destinationId);
  if (!target || target.destinationStatus !== "pending") return;
  if (!target.webhookEnabled || target.payload === null) {
    // Disabled or deleted webhooks get no new attempts, scheduled retries included.
    await finishDestination(ctx.prisma, target, "failed", null);
    return;
  }
  const result = await sendSigned(ctx.client, {
    url: target.url,
    body: target.payload,
    secret: target.secret,
    allowPrivateTargets: ctx.allowPrivateTargets,
  });
  const row = {
    accountId: target.accountId,
    eventId: target.eventId,
    webhookId: target.webhookId,
    destinationId,
    url: target.url,
    trigger: attempt === 0 ? ("initial" as const) : ("retry" as const),
    attempt,
    result,
  };
  if (result.ok) {
    await finishDestination(ctx.prisma, target, "delivered", row);
    observeAttempt(ctx.metrics, row.trigger, true, result.durationMs);
    ctx.metrics.endToEndLatency.observe((Date.now() - target.eventCreatedAt.getTime()) / 1000);
    return;
  }
  if (attempt >= ctx.retryDelaysMs.length) {
    await finishDestination(ctx.prisma, target, "failed", row);
    observeAttempt(ctx.metrics, row.trigger, false, result.durationMs);
    return;
  }
  await recordAttempt(ctx.prisma, row);
  observeAttempt(ctx.metrics, row.trigger, false, result.durationMs);
  ctx.metrics.retriesScheduled.inc();
  throw new RetryableDeliveryError(`attempt ${attempt} failed: ${result.error ?? result.responseStatus}`);
}
