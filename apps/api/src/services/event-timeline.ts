import { payloadPurgeAt, retryDelayFor } from "@mailhooks/delivery-state";
import type { ApiDeps } from "../deps.js";
import { notFound } from "../errors.js";
import { readPayload } from "./events.js";

/**
 * An event's history for the dashboard (CONTRACT.md sections 5 to 8): every attempt with the
 * receiver's answer, the replays still waiting for their attempt, when each pending
 * destination's next retry is due, and when the payload goes (or went). Reads only.
 */

export interface TimelineAttempt {
  id: string;
  webhook_id: string;
  url: string;
  trigger: string;
  attempt: number;
  response_status: number | null;
  error: string | null;
  /** At most the first 4096 bytes of the answer, as text (CONTRACT.md section 8). */
  response_body: string | null;
  duration_ms: number;
  /** When the attempt was recorded (its end). */
  created_at: string;
  ok: boolean;
}

export interface PendingReplay {
  replay_id: string;
  webhook_id: string;
  destination_url: string;
  requested_at: string;
}

export interface ScheduledRetry {
  webhook_id: string;
  /** The retry's number (1 to 3). */
  retry: number;
  /** When it is due: the failed attempt's end plus its delay (`retryDelayFor`, DELIVERY_RETRY_DELAYS_MS). */
  due_at: string;
}

export interface EventTimeline {
  /** Oldest first. */
  attempts: TimelineAttempt[];
  pending_replays: PendingReplay[];
  scheduled_retries: ScheduledRetry[];
  /** The envelope exactly as sent (signed and delivered), or null once purged. */
  payload_bytes: string | null;
  /**
   * Retention: `purged: false` with the time from which the payload may be removed
   * (`payloadPurgeAt`: the end of its UTC day plus EVENT_RETENTION_DAYS), or `purged: true`.
   */
  payload_expiry: { at: string | null; purged: boolean };
}

const isOk = (status: number | null) => status !== null && status >= 200 && status < 300;

/**
 * The timeline of one event of the account. Read after the event itself, it holds every attempt
 * that led to the status the event was read with. @throws AppError not_found
 */
export async function eventTimeline(deps: ApiDeps, accountId: string, eventId: string): Promise<EventTimeline> {
  const event = await deps.prisma.event.findFirst({ where: { id: eventId, accountId }, select: { id: true, createdAt: true } });
  if (!event) throw notFound("event");
  const payload = await readPayload(deps, event);
  // What is pending is read before the attempts, not beside them: an attempt ends pending work
  // and writes its row in one statement, so whatever is no longer pending here has its row below.
  const [replays, pending] = await Promise.all([
    deps.prisma.replay.findMany({ where: { eventId, accountId, status: "pending" }, orderBy: { id: "asc" } }),
    deps.prisma.destination.findMany({ where: { eventId, accountId, status: "pending" }, select: { id: true, webhookId: true } }),
  ]);
  const attempts = await deps.prisma.delivery.findMany({ where: { eventId, accountId }, orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
  const scheduled: ScheduledRetry[] = [];
  for (const destination of pending) {
    const last = attempts.filter((a) => a.destinationId === destination.id && (a.trigger === "initial" || a.trigger === "retry")).at(-1);
    if (!last || isOk(last.responseStatus)) continue;
    // A failed attempt with a retry left: the dispatcher's backoff counts from that attempt's end.
    // Attempt 0 is the initial one, so `attempt + 1` attempts were made.
    const delay = retryDelayFor(deps.config.DELIVERY_RETRY_DELAYS_MS, last.attempt + 1);
    if (delay >= 0) scheduled.push({ webhook_id: destination.webhookId, retry: last.attempt + 1, due_at: new Date(last.createdAt.getTime() + delay).toISOString() });
  }
  return {
    attempts: attempts.map((a) => ({
      id: a.id,
      webhook_id: a.webhookId,
      url: a.url,
      trigger: a.trigger,
      attempt: a.attempt,
      response_status: a.responseStatus,
      error: a.error,
      response_body: a.responseBody,
      duration_ms: a.durationMs,
      created_at: a.createdAt.toISOString(),
      ok: isOk(a.responseStatus),
    })),
    pending_replays: replays.map((r) => ({ replay_id: r.id, webhook_id: r.webhookId, destination_url: r.destinationUrl, requested_at: r.createdAt.toISOString() })),
    scheduled_retries: scheduled,
    payload_bytes: payload,
    payload_expiry: payload === null ? { at: null, purged: true } : { at: payloadPurgeAt(event.createdAt, deps.config.EVENT_RETENTION_DAYS).toISOString(), purged: false },
  };
}
