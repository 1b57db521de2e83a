import {
  buildExampleEnvelope,
  buildOperationalEnvelope,
  buildTestEnvelope,
  EVENT_TYPES,
  isOperationalEventType,
  OPERATIONAL_EXAMPLES,
  type EventType,
} from "@mailhooks/events";
import {
  cancelTestDelivery,
  dropEndedWork,
  loadTestDelivery,
  releaseWork,
  recordTestAttempt,
  testDeliveryRowId,
  type LeasedWork,
} from "@mailhooks/delivery-state";
import { observeAttempt } from "../metrics.js";
import { sendToWebhook, signingAt, untilRecorded, type DeliveryContext } from "./deliver-destination.js";

/**
 * A test request (docs/api.md, "Test events"), one attempt, no retry, one delivery row with
 * `trigger: "test"` and no event: the `webhook.test` envelope `data: {webhookId, url}`, or, for a
 * test of one of the six kinds, that kind's example envelope with a fresh messageId, or for an
 * operational kind its example about this webhook. Its
 * X-Service-Event-Id is its delivery row's id (testDeliveryRowId), known before it is sent. A
 * webhook disabled or deleted before it was sent gets nothing (the test delivery ends `cancelled`).
 * @throws Error for a stored `event_type` of no known kind (poison: it ends
 *   `failed` with an internal_error row)
 */
export async function deliverTestEvent(ctx: DeliveryContext, work: LeasedWork): Promise<void> {
  const testDeliveryId = work.workId;
  const testDelivery = await loadTestDelivery(ctx.pool, testDeliveryId, work.lease);
  if (!testDelivery) return;
  if (testDelivery.status !== "pending") return dropEndedWork(ctx.pool, [testDeliveryId]);
  // Asked for before its webhook was paused: it waits for the resume.
  if (testDelivery.webhookPaused) return releaseWork(ctx.pool, [work]);
  if (!testDelivery.webhookEnabled) return cancelTestDelivery(ctx.pool, testDeliveryId);
  const now = new Date();
  let body: string;
  if (testDelivery.eventType === null) body = buildTestEnvelope(testDelivery.webhookId, testDelivery.url, now);
  else if ((EVENT_TYPES as readonly string[]).includes(testDelivery.eventType))
    body = buildExampleEnvelope(testDelivery.eventType as EventType, now);
  else if (isOperationalEventType(testDelivery.eventType))
    body = buildOperationalEnvelope(testDelivery.eventType, now, {
      ...OPERATIONAL_EXAMPLES[testDelivery.eventType],
      webhookId: testDelivery.webhookId,
      url: testDelivery.url,
    });
  else throw new Error(`test delivery ${testDeliveryId} asks for an unknown event_type`);
  const result = await sendToWebhook(
    ctx,
    {
      url: testDelivery.url,
      signing: signingAt(ctx.keyring, testDelivery, now),
      eventId: testDeliveryRowId(testDeliveryId),
      storedHeaders: testDelivery.storedHeaders,
    },
    body,
  );
  observeAttempt(ctx.metrics, "test", result.ok, result.durationMs);
  await untilRecorded(ctx, () => recordTestAttempt(ctx.pool, testDelivery, result));
}
