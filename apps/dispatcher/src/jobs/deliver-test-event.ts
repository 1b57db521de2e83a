import { buildTestEnvelope } from "@mailhooks/events";
import { cancelTestDelivery, loadTestDelivery, recordTestAttempt, signingSecretAt } from "@mailhooks/delivery-state";
import { sendSigned } from "../delivery/send.js";
import { observeAttempt } from "../metrics.js";
import type { DeliveryContext } from "./deliver-destination.js";

/**
 * A test event (CONTRACT.md section 6): envelope `webhook.test` with `data: {webhookId, url}`,
 * one attempt, no retry, one delivery row with `trigger: "test"` and no event. A webhook
 * disabled or deleted before it was sent gets nothing (the test delivery ends `cancelled`).
 */
export async function deliverTestEvent(ctx: DeliveryContext, testDeliveryId: string): Promise<void> {
  const target = await loadTestDelivery(ctx.pool, testDeliveryId);
  if (!target || target.status !== "pending") return;
  if (!target.webhookEnabled) {
    await cancelTestDelivery(ctx.pool, testDeliveryId);
    return;
  }
  const body = buildTestEnvelope(target.webhookId, target.url, new Date());
  const secret = ctx.keyring.decrypt(signingSecretAt(target.secrets, new Date()));
  const result = await sendSigned(ctx.client, { url: target.url, body, secret, allowPrivateTargets: ctx.allowPrivateTargets });
  observeAttempt(ctx.metrics, "test", result.ok, result.durationMs);
  await recordTestAttempt(ctx.pool, target, result);
}
