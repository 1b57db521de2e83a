import { decideAfterAttempt, payloadPurgeAt } from "@mailhooks/delivery-state";
import type { ApiDeps } from "../deps.js";
import { notFound } from "../errors.js";

/**
 * An event's history for the dashboard (docs/api.md, "Events"; docs/api.md, "Deliveries log"): its newest attempts with
 * the receiver's answer and how many there are in all, the replays still waiting for their
 * attempt, and when each pending destination's next retry is due. Reads only, each bounded
 * whatever the number of delivery rows of the event (the deliveries log pages through them all).
 */

/**
 * How many attempts the event page shows: the newest. An event may have any number of rows
 * (about 100k replays of one event happen), each with up to 4 KiB of response body, and its page
 * is polled every second while it is pending.
 */
export const TIMELINE_ATTEMPTS = 20;

export interface TimelineAttempt {
  id: string;
  webhook_id: string;
  /** Null for an attempt pulled by a listen webhook. */
  url: string | null;
  trigger: string;
  attempt: number;
  response_status: number | null;
  error: string | null;
  /** At most the first 4096 bytes of the answer, as text (docs/api.md, "Deliveries log"). */
  response_body: string | null;
  duration_ms: number;
  /** When the attempt was recorded (its end). */
  created_at: string;
  ok: boolean;
}

export interface PendingReplay {
  replay_id: string;
  webhook_id: string;
  destination_url: string | null;
  requested_at: string;
}

export interface ScheduledRetry {
  webhook_id: string;
  /** The retry's number (1 to 3). */
  retry: number;
  /** When it is due: the failed attempt's end plus its delay (`decideAfterAttempt`, DELIVERY_RETRY_DELAYS_MS). */
  due_at: string;
}

export interface EventTimeline {
  /** The newest TIMELINE_ATTEMPTS attempts (at most), oldest first. */
  attempts: TimelineAttempt[];
  /** Every delivery row of the event (the deliveries log, `/dashboard/deliveries?event_id=`, lists them all). */
  attempts_total: number;
  pending_replays: PendingReplay[];
  scheduled_retries: ScheduledRetry[];
}

/**
 * Retention of a payload: `purged: false` with the time from which it may be removed
 * (`payloadPurgeAt`: the end of its UTC day plus EVENT_RETENTION_DAYS), or `purged: true`.
 */
export interface PayloadExpiry {
  at: string | null;
  purged: boolean;
}

/** The PayloadExpiry of an event created at `createdAt` whose payload is (`retained`) or is not kept any more. */
export function payloadExpiry(deps: Pick<ApiDeps, "config">, createdAt: Date, retained: boolean): PayloadExpiry {
  return retained
    ? { at: payloadPurgeAt(createdAt, deps.config.EVENT_RETENTION_DAYS).toISOString(), purged: false }
    : { at: null, purged: true };
}

const isOk = (status: number | null) => status !== null && status >= 200 && status < 300;

/** An attempt as PostgreSQL returns it: its time a Date, its outcome not yet decided. */
type AttemptRow = Omit<TimelineAttempt, "created_at" | "ok"> & { created_at: Date };

export interface TimelineOptions {
  /** How many of the newest attempts to return (TIMELINE_ATTEMPTS). */
  shown?: number;
  /**
   * The event's delivery rows when the caller counted them already: the sum of its
   * destinations' `attempts` (every delivery row of an event has its destination, replays
   * included). Counted here otherwise.
   */
  attemptsTotal?: number;
}

/**
 * The timeline of one event of the account. Read after the event itself, its newest attempts and
 * total include every attempt that led to the status the event was read with.
 * @throws AppError not_found
 */
export async function eventTimeline(
  deps: ApiDeps,
  accountId: string,
  eventId: string,
  options: TimelineOptions = {},
): Promise<EventTimeline> {
  const shown = options.shown ?? TIMELINE_ATTEMPTS;
  const event = await deps.prisma.event.findFirst({ where: { id: eventId, accountId }, select: { id: true } });
  if (!event) throw notFound("event");
  // What is pending is read before the attempts, not beside them: an attempt ends pending work
  // and writes its row in one statement, so whatever is no longer pending here has its row below.
  const [replays, pending] = await Promise.all([
    deps.prisma.replay.findMany({ where: { eventId, accountId, status: "pending" }, orderBy: { id: "asc" } }),
    deps.prisma.destination.findMany({ where: { eventId, accountId, status: "pending" }, select: { id: true, webhookId: true } }),
  ]);
  // The event is the account's (above): its rows are counted on the (event_id, created_at, id)
  // index alone, and the newest read from it in order.
  type LastTry = { destination_id: string; attempt: number; response_status: number | null; created_at: Date };
  const [newest, total, lastTries] = await Promise.all([
    deps.prisma.$queryRaw<AttemptRow[]>`
      SELECT id, webhook_id, url, trigger::text AS trigger, attempt, response_status, error, response_body, duration_ms, created_at
        FROM deliveries WHERE event_id = ${eventId} ORDER BY created_at DESC, id DESC LIMIT ${shown}`,
    options.attemptsTotal !== undefined
      ? Promise.resolve([{ n: options.attemptsTotal }])
      : deps.prisma.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM deliveries WHERE event_id = ${eventId}`,
    // Each pending destination's latest initial or retry attempt: one entry of the partial
    // unique index deliveries_destination_attempt_key each, whatever the number of its replays.
    pending.length === 0
      ? Promise.resolve([] as LastTry[])
      : deps.prisma.$queryRaw<LastTry[]>`
          SELECT DISTINCT ON (destination_id) destination_id, attempt, response_status, created_at
            FROM deliveries WHERE destination_id = ANY(${pending.map((d) => d.id)}::text[]) AND trigger IN ('initial', 'retry')
           ORDER BY destination_id, attempt DESC`,
  ]);
  const lastTry = new Map(lastTries.map((r) => [r.destination_id, r]));
  const scheduled: ScheduledRetry[] = [];
  for (const destination of pending) {
    const last = lastTry.get(destination.id);
    if (!last) continue;
    // The dispatcher's own decision after that attempt: a retry is due its delay after the attempt's end.
    const next = decideAfterAttempt(
      deps.config.DELIVERY_RETRY_DELAYS_MS,
      last.attempt,
      isOk(last.response_status) ? "succeeded" : "failed",
      last.created_at,
    );
    if (next.next === "retry") scheduled.push({ webhook_id: destination.webhookId, retry: next.attempt, due_at: next.at.toISOString() });
  }
  return {
    attempts: newest.reverse().map((a) => ({
      id: a.id,
      webhook_id: a.webhook_id,
      url: a.url,
      trigger: a.trigger,
      attempt: a.attempt,
      response_status: a.response_status,
      error: a.error,
      response_body: a.response_body,
      duration_ms: a.duration_ms,
      created_at: a.created_at.toISOString(),
      ok: isOk(a.response_status),
    })),
    // Rows written after the count may be among those shown: never fewer than shown.
    attempts_total: Math.max(total[0]?.n ?? 0, newest.length),
    pending_replays: replays.map((r) => ({
      replay_id: r.id,
      webhook_id: r.webhookId,
      destination_url: r.destinationUrl,
      requested_at: r.createdAt.toISOString(),
    })),
    scheduled_retries: scheduled,
  };
}
