import { cancelReplay, loadReplay, recordReplayAttempt, replayCancelled } from "@mailhooks/delivery-state";
import { sendStoredEnvelope, type WorkerContext } from "./deliver-destination.js";
import { observeAttempt } from "../metrics.js";

/**
 * One replay (spec "Replay an event"): the stored envelope, byte for byte (same messageId, same
 * `timestamp` field), signed afresh with the original webhook's secret, with its
 * X-Service-Event-Id and its own headers, and sent once to the original or override URL. One
 * delivery row and one audit entry record it, however many times the job runs, stamped by
 * PostgreSQL when they are written. A replay to the webhook's own URL whose webhook was disabled
 * or deleted since it was accepted is not sent: it ends `cancelled`, with an audit entry and no
 * delivery row (docs/api.md, "Webhooks": disabled and deleted webhooks get no new deliveries).
 */
export async function replayEvent(ctx: WorkerContext, replayId: string): Promise<void> {
  const replay = await loadReplay(ctx.pool, replayId);
  if (!replay || replay.status !== "pending") return;
  if (replayCancelled(replay)) {
    await cancelReplay(ctx.pool, replay);
    return;
  }
  // A payload purged between the request and the attempt sends nothing (payload_expired). Whichever secret signs at this
  // moment signs, also for an override URL (docs/api.md, "Webhooks").
  const { result } = await sendStoredEnvelope(ctx, replay, replay.destinationUrl);
  await recordReplayAttempt(ctx.pool, replay, result);
  observeAttempt(ctx.metrics, "replay", result.ok, result.durationMs);
}
