import { buildTestEnvelope } from "@mailhooks/events";
import { sendSigned } from "../delivery/send.js";
import { observeAttempt } from "../metrics.js";
import { loadTestTarget, recordAttempt } from "../delivery/store.js";
import type { DeliveryContext } from "./deliver-destination.js";

/**
 * The test event of a new webhook (CONTRACT.md section 6): envelope `webhook.test` with
 * `data: {webhookId, url}`, one attempt, no retry, one delivery row with `trigger: "test"` and
 * no event.
 */
export async function deliverTestEvent(ctx: DeliveryContext, webhookId: string, accountId: string): Promise<void> {
  const target = await loadTestTarget(ctx.prisma, webhookId, accountId);
  if (!target) return;
  const body = buildTestEnvelope(webhookId, target.url, new Date());
  const result = await sendSigned(ctx.client, { url: target.url, body, secret: target.secret, allowPrivateTargets: ctx.allowPrivateTargets });
  observeAttempt(ctx.metrics, "test", result.ok, result.durationMs);
  await recordAttempt(ctx.prisma, {
    accountId,
    eventId: null,
    webhookId,
    destinationId: null,
    url: target.url,
    trigger: "test",
    attempt: 0,
    result,
  });
}
