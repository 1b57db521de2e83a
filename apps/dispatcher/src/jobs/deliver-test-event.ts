import { buildExampleEnvelope, buildTestEnvelope, EVENT_TYPES, type EventType } from "@mailhooks/events";
import { cancelTestDelivery, loadTestDelivery, recordTestAttempt, signingSecretAt, testDeliveryRowId } from "@mailhooks/delivery-state";
import { observeAttempt } from "../metrics.js";
import { sendToWebhook, type DeliveryContext } from "./deliver-destination.js";

/**
 * A test request (CONTRACT.md sections 4 and 6), one attempt, no retry, one delivery row with
 * `trigger: "test"` and no event: the `webhook.test` envelope `data: {webhookId, url}`, or, for a
 * test of one of the six kinds, that kind's example envelope with a fresh messageId. Its
 * X-Service-Event-Id is its delivery row's id (testDeliveryRowId), known before it is sent. A
 * webhook disabled or deleted before it was sent gets nothing (the test delivery ends `cancelled`).
 * @throws Error for a stored `event_type` that is not one of the six kinds (poison: it ends
 *   `failed` with an internal_error row)
 */
export async function deliverTestEvent(ctx: DeliveryContext, testDeliveryId: string): Promise<void> {
  const target = await loadTestDelivery(ctx.pool, testDeliveryId);
  if (!target || target.status !== "pending") return;
  if (!target.webhookEnabled) {
    await cancelTestDelivery(ctx.pool, testDeliveryId);
    return;
  }
  const now = new Date();
  let body: string;
  if (target.eventType === null) body = buildTestEnvelope(target.webhookId, target.url, now);
  else if ((EVENT_TYPES as readonly string[]).includes(target.eventType)) body = buildExampleEnvelope(target.eventType as EventType, now);
  else throw new Error(`test delivery ${testDeliveryId} asks for an unknown event_type`);
  const secret = ctx.keyring.decrypt(signingSecretAt(target.secrets, now));
  const result = await sendToWebhook(
    ctx,
    { url: target.url, secret, eventId: testDeliveryRowId(testDeliveryId), storedHeaders: target.storedHeaders },
    body,
  );
  observeAttempt(ctx.metrics, "test", result.ok, result.durationMs);
  await recordTestAttempt(ctx.pool, target, result);
}
