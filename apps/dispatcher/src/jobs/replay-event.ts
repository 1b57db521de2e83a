import { cancelReplay, loadReplay, recordReplayAttempt, replayCancelled, signingSecretAt, type AttemptRecord } from "@mailhooks/delivery-state";
import { sendSigned } from "../delivery/send.js";
import type { DeliveryContext } from "./deliver-destination.js";
import { observeAttempt } from "../metrics.js";

/**
 * One replay (spec "Replay an event"): the stored envelope, byte for byte (same messageId, same
 * `timestamp` field), signed afresh with the original webhook's secret and sent once to the
 * original or override URL. One delivery row and one audit entry record it, however many times
 * the job runs. A replay to the webhook's own URL whose webhook was disabled or deleted since it
 * was accepted is not sent: it ends `cancelled`, with an audit entry and no delivery row
 * (CONTRACT.md section 4: disabled and deleted webhooks get no new deliveries).
 */
export async function replayEvent(ctx: DeliveryContext, replayId: string): Promise<void> {
  const target = await loadReplay(ctx.pool, replayId);
  if (!target || target.status !== "pending") return;
  const replayedAt = new Date();
  if (replayCancelled(target)) {
    await cancelReplay(ctx.pool, target, replayedAt);
    return;
  }
  const result: AttemptRecord =
    target.payload === null
      ? // Purged between the request and the attempt: nothing may be sent.
        { ok: false, responseStatus: null, error: "payload_expired", responseBody: null, durationMs: 0 }
      : await sendSigned(ctx.client, {
          url: target.destinationUrl,
          body: target.payload,
          // Whichever secret signs at this moment, also for an override URL (CONTRACT.md section 4).
          secret: ctx.keyring.decrypt(signingSecretAt(target.secrets, replayedAt)),
          allowPrivateTargets: ctx.allowPrivateTargets,
        });
  await recordReplayAttempt(ctx.pool, target, result, replayedAt);
  observeAttempt(ctx.metrics, "replay", result.ok, result.durationMs);
}
