import { sendSigned, type AttemptResult } from "../delivery/send.js";
import { loadReplay, recordReplay } from "../delivery/replay-store.js";
import type { DeliveryContext } from "./deliver-destination.js";
import { observeAttempt } from "../metrics.js";

/**
 * One replay (spec "Replay an event"): the stored envelope, byte for byte (same messageId, same
 * `timestamp` field), signed afresh with the original webhook's secret and sent once to the
 * original or override URL. One delivery row and one audit entry record it.
 */
export async function replayEvent(ctx: DeliveryContext, replayId: string): Promise<void> {
  const target = await loadReplay(ctx.prisma, replayId);
  if (!target || target.done) return;
  const replayedAt = new Date();
  const result =
    target.payload === null
      ? // Purged between the request and the attempt: nothing may be sent.
        ({ ok: false, responseStatus: null, error: "payload_expired", durationMs: 0 } satisfies AttemptResult)
      : await sendSigned(ctx.client, { url: target.destinationUrl, body: target.payload, secret: target.secret, allowPrivateTargets: ctx.allowPrivateTargets });
  await recordReplay(ctx.prisma, target, result, replayedAt);
  observeAttempt(ctx.metrics, "replay", result.ok, result.durationMs);
}
