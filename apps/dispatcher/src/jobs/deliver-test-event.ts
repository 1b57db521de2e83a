import { buildTestDeliveryEnvelope } from "@mailhooks/events";
import {
  cancelTestDelivery,
  dropEndedWork,
  loadTestDelivery,
  releaseWork,
  recordTestAttempt,
  signingAt,
  testDeliveryRowId,
  type LeasedWork,
} from "@mailhooks/delivery-state";
import { observeAttempt } from "../metrics.js";
import { sendToWebhook, untilRecorded, type DeliveryContext } from "./deliver-destination.js";

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
  // Only a disabled listen webhook's test is ever claimed (and cancelled above): the rest are pulled.
  if (testDelivery.url === null) throw new Error(`test delivery ${testDeliveryId} of a listen webhook was claimed`);
  const body = buildTestDeliveryEnvelope(testDelivery, now);
  const result = await sendToWebhook(
    ctx,
    {
      url: testDelivery.url,
      signing: signingAt((stored) => ctx.keyring.decrypt(stored), testDelivery, now),
      eventId: testDeliveryRowId(testDeliveryId),
      storedHeaders: testDelivery.storedHeaders,
    },
    body,
  );
  observeAttempt(ctx.metrics, "test", result.ok, result.durationMs);
  await untilRecorded(ctx, () => recordTestAttempt(ctx.pool, testDelivery, result));
}
