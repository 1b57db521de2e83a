import type pg from "pg";
import sql from "sql-template-tag";
import { newId } from "@mailhooks/db";
import { buildTestDeliveryEnvelope } from "@mailhooks/events";
import { JOB_NAMES } from "@mailhooks/queue";
import { inTransaction, run, type Queryable } from "./db.js";
import { loadPayload, type AttemptRecord, type AttemptWebhook } from "./attempt-common.js";
import { dropEndedWork, loadDestinations, recordDestinationAttempts } from "./destination-attempts.js";
import { loadReplay, recordReplayAttempt } from "./replay-attempts.js";
import { loadTestDelivery, recordTestAttempt, testDeliveryRowId } from "./test-attempts.js";
import { decideAfterAttempt } from "./retry-policy.js";
import { WORK_CHANNEL } from "./work-queue.js";

/**
 * Listen webhooks (docs/develop-locally.md): a webhook with no URL whose work waits in the work
 * queue until its developer pulls it (GET /v1/webhooks/{id}/pending) and answers each attempt
 * with what their local receiver said (POST /v1/webhooks/{id}/pending/{delivery_id}). The claim
 * never pushes this work (packages/scheduler, "Pause and listen"): a pull leases it instead, for
 * PULL_VISIBILITY_MS, under a `pull_id` that becomes the id of the delivery row its answer
 * writes; the answer is recorded by the same statements as a dispatcher's attempt, so retries,
 * statuses, replays, tests and operational events behave as for any webhook.
 */

/** How long a pulled attempt stays with its developer unanswered before it is handed out again, in ms. */
export const PULL_VISIBILITY_MS = 60_000;

/**
 * Pulled attempts one listen webhook may hold unanswered at once, and so the most one pull hands
 * out: a client that pulls and never answers holds at most this many rows' leases.
 */
export const MAX_PULLED = 100;

/**
 * Envelope bytes one pull hands out, past its first item (which goes whatever its size, up to the
 * 10 MiB an envelope may have): the answer of a pull of 100 large events stays a few MiB.
 */
export const PULL_BODY_BUDGET_BYTES = 4 * 1024 * 1024;

/** One pulled attempt, with what its request needs. */
export interface PulledWork {
  /** The id of the delivery row its answer writes (the `delivery_id` of the pull's answer). */
  pullId: string;
  trigger: "initial" | "retry" | "replay" | "test";
  /** 0 for the initial attempt, n for retry n; 0 for replays and tests. */
  attempt: number;
  /** The event's id; null for a test. */
  eventId: string | null;
  /** X-Service-Event-Id (and webhook-id): the event's id, or a test's delivery row id. */
  headerEventId: string;
  /** The exact envelope bytes to POST, as text (envelopes are UTF-8 JSON). */
  body: string;
  /** How it is signed and its own headers (stored forms): the caller signs with its keyring. */
  webhook: Pick<AttemptWebhook, "secrets" | "signatureScheme" | "storedHeaders">;
}

export type PullResult =
  | { webhook: "missing" | "push" | "disabled" }
  | {
      webhook: "listen";
      paused: boolean;
      items: PulledWork[];
      /** In how many ms something of it comes due (a retry, a pull that lapses); null: nothing known. */
      nextInMs: number | null;
    };

/**
 * Pulls up to `limit` (1..MAX_PULLED) attempts due of listen webhook `webhookId` of `accountId`,
 * the longest due first, within PULL_BODY_BUDGET_BYTES and MAX_PULLED held at once, and stamps
 * its `last_pulled_at` (LISTEN_IDLE_HOURS). Its own lapsed pulls are taken back first. A paused
 * webhook hands out nothing. Work found ended meanwhile leaves the queue; an event whose payload
 * was purged is recorded `payload_expired` (it can never be sent) instead of handed out.
 */
export async function pullWork(pool: pg.Pool, accountId: string, webhookId: string, limit: number): Promise<PullResult> {
  const taken = await inTransaction(pool, async (client) => {
    const { rows } = await run<{ mode: string; status: string }>(
      client,
      sql`WITH w AS (
            SELECT id, mode, status::text AS status FROM webhooks WHERE id = ${webhookId} AND account_id = ${accountId} AND deleted_at IS NULL
          ), touched AS (
            UPDATE webhooks x SET last_pulled_at = now() FROM w WHERE x.id = w.id AND w.mode = 'listen' AND w.status <> 'disabled' RETURNING 1
          )
          SELECT mode, status FROM w`,
    );
    const webhook = rows[0];
    if (!webhook) return { webhook: "missing" as const };
    if (webhook.mode !== "listen") return { webhook: "push" as const };
    if (webhook.status === "disabled") return { webhook: "disabled" as const };
    if (webhook.status === "paused") return { webhook: "listen" as const, paused: true, leased: [], nextInMs: null };
    await run(
      client,
      sql`UPDATE work_items SET leased_until = NULL, pull_id = NULL
           WHERE webhook_id = ${webhookId} AND pull_id IS NOT NULL AND leased_until <= now()`,
    );
    const ids = Array.from({ length: limit }, () => newId("dlv"));
    const leased = await run<{ kind: string; work_id: string; lease: number; attempt: number; pull_id: string; rn: string }>(
      client,
      sql`WITH held AS (
            SELECT count(*)::int AS n FROM work_items WHERE webhook_id = ${webhookId} AND pull_id IS NOT NULL
          ), picked AS (
            SELECT q.id, q.kind, q.work_id, q.due_at FROM work_items q
             WHERE q.webhook_id = ${webhookId} AND q.leased_until IS NULL AND q.due_at <= now() AND NOT q.bypass_pause
             ORDER BY q.due_at, q.id
             LIMIT greatest(0, least(${limit}::int, ${MAX_PULLED}::int - (SELECT n FROM held)))
             FOR UPDATE OF q SKIP LOCKED
          ), sized AS (
            SELECT p.id, row_number() OVER w AS rn, sum(coalesce(octet_length(pl.payload), 0)) OVER w AS upto
              FROM picked p
              LEFT JOIN destinations d ON p.kind = ${JOB_NAMES.delivery} AND d.id = p.work_id
              LEFT JOIN replays r ON p.kind = ${JOB_NAMES.replay} AND r.id = p.work_id
              LEFT JOIN events e ON e.id = coalesce(d.event_id, r.event_id)
              LEFT JOIN event_payloads pl ON pl.event_id = e.id AND pl.created_at = e.created_at
            WINDOW w AS (ORDER BY p.due_at, p.id)
          ), chosen AS (
            SELECT id, rn FROM sized WHERE rn = 1 OR upto <= ${PULL_BODY_BUDGET_BYTES}
          )
          UPDATE work_items q SET lease = q.lease + 1, reserved = false,
                 leased_until = now() + make_interval(secs => ${PULL_VISIBILITY_MS / 1000}),
                 -- A test's row id was answered when it was asked for (testDeliveryRowId).
                 pull_id = (CASE WHEN q.kind = ${JOB_NAMES.testDelivery} THEN 'dlv_' || substr(q.work_id, strpos(q.work_id, '_') + 1)
                                 ELSE (${ids}::text[])[c.rn::int] END)
            FROM chosen c WHERE q.id = c.id
          RETURNING q.kind, q.work_id, q.lease, q.attempt, q.pull_id, c.rn`,
    );
    const next = await run<{ next_in_ms: number | null }>(
      client,
      sql`SELECT extract(epoch FROM least(
                   (SELECT min(leased_until) FROM work_items WHERE webhook_id = ${webhookId} AND pull_id IS NOT NULL),
                   -- Held to the full: nothing more is handed out before a pull lapses or is answered.
                   (SELECT min(due_at) FROM work_items WHERE webhook_id = ${webhookId} AND leased_until IS NULL AND NOT bypass_pause
                       AND (SELECT count(*) FROM work_items WHERE webhook_id = ${webhookId} AND pull_id IS NOT NULL) < ${MAX_PULLED})
                 ) - now()) * 1000 AS next_in_ms`,
    );
    const nextInMs = next.rows[0]?.next_in_ms;
    return {
      webhook: "listen" as const,
      paused: false,
      leased: leased.rows.sort((a, b) => Number(a.rn) - Number(b.rn)),
      nextInMs: nextInMs === null || nextInMs === undefined ? null : Math.max(0, Number(nextInMs)),
    };
  });
  if (taken.webhook !== "listen") return taken;
  return { webhook: "listen", paused: taken.paused, items: await loadPulled(pool, taken.leased), nextInMs: taken.nextInMs };
}

/** What each leased row needs (in their order), its ended work dropped and purged payloads recorded. */
async function loadPulled(
  pool: pg.Pool,
  leased: { kind: string; work_id: string; lease: number; attempt: number; pull_id: string }[],
): Promise<PulledWork[]> {
  const destinations = await loadDestinations(
    pool,
    leased.filter((l) => l.kind === JOB_NAMES.delivery).map((l) => ({ workId: l.work_id, lease: l.lease })),
  );
  const byId = new Map(destinations.flatMap((d) => (d ? [[d.destinationId, d] as const] : [])));
  const large = new Map<string, Promise<Buffer | null>>();
  const payloadOf = async (ref: { eventId: string; payload: string | null; payloadBytes: number | null }) => {
    if (ref.payload !== null || ref.payloadBytes === null) return ref.payload;
    if (!large.has(ref.eventId)) large.set(ref.eventId, loadPayload(pool, ref.eventId));
    return (await large.get(ref.eventId))?.toString("utf8") ?? null;
  };
  const ended: string[] = [];
  const items: PulledWork[] = [];
  for (const l of leased) {
    if (l.kind === JOB_NAMES.delivery) {
      const d = byId.get(l.work_id);
      if (!d) continue;
      if (d.status !== "pending") {
        ended.push(l.work_id);
        continue;
      }
      const body = await payloadOf(d);
      if (body === null) {
        await recordDestinationAttempts(pool, [
          { destination: d, attempt: d.attempt, result: PAYLOAD_EXPIRED, outcome: "failed", deliveryId: l.pull_id },
        ]);
        continue;
      }
      const trigger = d.attempt === 0 ? "initial" : "retry";
      items.push({ pullId: l.pull_id, trigger, attempt: d.attempt, eventId: d.eventId, headerEventId: d.eventId, body, webhook: d });
    } else if (l.kind === JOB_NAMES.replay) {
      const r = await loadReplay(pool, l.work_id, l.lease);
      if (!r) continue;
      if (r.status !== "pending") {
        ended.push(l.work_id);
        continue;
      }
      const body = await payloadOf(r);
      if (body === null) {
        await recordReplayAttempt(pool, r, PAYLOAD_EXPIRED, l.pull_id);
        continue;
      }
      items.push({ pullId: l.pull_id, trigger: "replay", attempt: 0, eventId: r.eventId, headerEventId: r.eventId, body, webhook: r });
    } else {
      const t = await loadTestDelivery(pool, l.work_id, l.lease);
      if (!t) continue;
      if (t.status !== "pending") {
        ended.push(l.work_id);
        continue;
      }
      const body = buildTestDeliveryEnvelope(t, new Date());
      items.push({
        pullId: l.pull_id,
        trigger: "test",
        attempt: 0,
        eventId: null,
        headerEventId: testDeliveryRowId(t.testDeliveryId),
        body,
        webhook: t,
      });
    }
  }
  await dropEndedWork(pool, ended);
  return items;
}

/** What a pulled attempt that could not be sent records: its event's payload was purged. */
const PAYLOAD_EXPIRED: AttemptRecord = { ok: false, responseStatus: null, error: "payload_expired", responseBody: null, durationMs: 0 };

/**
 * How an answer went: `recorded` (now, or by an earlier answer of the same pull: a repeat is
 * harmless), `expired` (its PULL_VISIBILITY_MS passed: it waits for, or went to, another pull),
 * `missing` (no such pull of this webhook).
 */
export type AnswerOutcome = "recorded" | "expired" | "missing";

/**
 * Records the answer `result` to pulled attempt `pullId` of webhook `webhookId` of `accountId`
 * as its delivery row (id `pullId`): a destination's 2xx delivers it, anything else schedules
 * its retry on `retryDelaysMs` (DELIVERY_RETRY_DELAYS_MS; the retry becomes pullable when due,
 * and waiting pulls are woken to time it) or fails it after the last; a replay's or a test's
 * ends them. The same statements as a dispatcher's attempts (destination-attempts.ts and the others).
 */
export async function answerPulled(
  pool: pg.Pool,
  input: { accountId: string; webhookId: string; pullId: string; result: AttemptRecord; retryDelaysMs: readonly number[] },
): Promise<AnswerOutcome> {
  const { rows } = await run<{ kind: string; work_id: string; lease: number; live: boolean; queue_prefix: string }>(
    pool,
    sql`SELECT q.kind, q.work_id, q.lease, q.leased_until > now() AS live, q.queue_prefix
          FROM work_items q JOIN webhooks w ON w.id = q.webhook_id
         WHERE q.pull_id = ${input.pullId} AND q.webhook_id = ${input.webhookId} AND w.account_id = ${input.accountId}`,
  );
  const pulled = rows[0];
  if (!pulled) return (await deliveryRowExists(pool, input)) ? "recorded" : "missing";
  if (!pulled.live) return "expired";
  const work = { workId: pulled.work_id, lease: pulled.lease };
  if (pulled.kind === JOB_NAMES.delivery) {
    const [destination] = await loadDestinations(pool, [work]);
    if (!destination) return "expired";
    const next = decideAfterAttempt(input.retryDelaysMs, destination.attempt, input.result.ok ? "succeeded" : "failed", new Date());
    await recordDestinationAttempts(pool, [
      {
        destination,
        attempt: destination.attempt,
        result: input.result,
        outcome: next.next,
        retryDelayMs: next.next === "retry" ? next.delayMs : undefined,
        deliveryId: input.pullId,
      },
    ]);
    if (next.next === "retry") await run(pool, sql`SELECT pg_notify(${WORK_CHANNEL}, ${`${pulled.queue_prefix} ${input.webhookId}`})`);
  } else if (pulled.kind === JOB_NAMES.replay) {
    const replay = await loadReplay(pool, work.workId, work.lease);
    if (!replay) return "expired";
    await recordReplayAttempt(pool, replay, input.result, input.pullId);
  } else {
    const test = await loadTestDelivery(pool, work.workId, work.lease);
    if (!test) return "expired";
    await recordTestAttempt(pool, test, input.result);
  }
  return "recorded";
}

async function deliveryRowExists(db: Queryable, input: { accountId: string; webhookId: string; pullId: string }): Promise<boolean> {
  const { rows } = await run(
    db,
    sql`SELECT 1 FROM deliveries WHERE id = ${input.pullId} AND webhook_id = ${input.webhookId} AND account_id = ${input.accountId}`,
  );
  return rows.length > 0;
}
