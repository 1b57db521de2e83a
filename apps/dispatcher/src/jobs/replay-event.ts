import {
  cancelReplay,
  dropEndedWork,
  loadReplay,
  recordReplayAttempt,
  releaseWork,
  replayCancelled,
  type LeasedWork,
} from "@mailhooks/delivery-state";
import { sendStoredEnvelope, untilRecorded, type WorkerContext } from "./deliver-destination.js";
import { observeAttempt } from "../metrics.js";

/**
 * One replay (spec "Replay an event"): the stored envelope, byte for byte (same messageId, same
 * `timestamp` field), signed afresh with the original webhook's secret, with its
 * X-Service-Event-Id and its own headers, and sent once to the original or override URL. One
 * delivery row and one audit entry record it, however many times it is attempted, stamped by
 * PostgreSQL when they are written. A replay to the webhook's own URL whose webhook was disabled
 * or deleted since it was accepted is not sent: it ends `cancelled`, with an audit entry and no
 * delivery row (disabled and deleted webhooks get no new deliveries: docs/api.md, "Replay").
 */
export async function replayEvent(ctx: WorkerContext, work: LeasedWork): Promise<void> {
  const replay = await loadReplay(ctx.pool, work.workId, work.lease);
  if (!replay) return;
  if (replay.status !== "pending") return dropEndedWork(ctx.pool, [work.workId]);
  // To a paused webhook's own URL: it waits for the resume (a replay to a target_url goes).
  if (replay.webhookPaused && !replay.hasTargetUrl) return releaseWork(ctx.pool, [work]);
  if (replayCancelled(replay)) {
    await cancelReplay(ctx.pool, replay);
    return;
  }
  // A listen webhook's replay to its own destination is pulled, never claimed (unless disabled: cancelled above).
  if (replay.destinationUrl === null) throw new Error(`replay ${work.workId} of a listen webhook was claimed`);
  // A payload purged between the request and the attempt sends nothing (payload_expired). Whichever secret signs at this
  // moment signs, also for an override URL.
  const { result } = await sendStoredEnvelope(ctx, replay, replay.destinationUrl);
  await untilRecorded(ctx, () => recordReplayAttempt(ctx.pool, replay, result));
  observeAttempt(ctx.metrics, "replay", result.ok, result.durationMs);
}
