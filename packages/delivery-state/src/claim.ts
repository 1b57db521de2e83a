import { createHash } from "node:crypto";
import type pg from "pg";
import sql, { empty, type Sql } from "sql-template-tag";
import { decide, type Candidate, type Decision } from "@mailhooks/scheduler";
import { isWorkJobName, type ClaimedWork, type WorkJobName } from "@mailhooks/queue";
import { inTransaction, run } from "./db.js";
import { rediscover } from "./rediscover.js";

/**
 * The claim (docs/scheduler.md): the one place where work is admitted. A relay pass runs it in
 * one transaction, under the deployment's claim lock (taken with the BEGIN), so that claims never
 * overlap and every limit holds for the deployment, whatever the number of dispatchers:
 * 1. one statement ends the leases that expired (their holder stopped renewing them), puts the
 *    webhooks heard of (new work notified) in the round, and reads what the decision needs: the
 *    live dispatchers' slots, the live leases, and the round's first webhooks
 *    (webhook_queues, the longest waiting first);
 * 2. @mailhooks/scheduler's `decide` says what may start;
 * 3. one statement leases, for each webhook, the waiting rows granted (the longest due first, only
 *    those rows locked), gives each webhook served or parked its next place in the round, and
 *    answers when the next thing comes due.
 * Every time is PostgreSQL's `now()`: one clock for every dispatcher. Four round trips in all
 * (BEGIN, the two statements, COMMIT): a relay shares its process with a busy worker, and each
 * round trip waits for that process's turn.
 */

/** Expired leases after which a unit of work ends `failed` (internal_error): it keeps killing its holders. */
export const MAX_EXPIRATIONS = 20;

export interface ClaimOptions {
  queuePrefix: string;
  /** Webhooks given work since the last pass (WORK_CHANNEL's payloads). */
  notified: readonly string[];
  /** Look for every webhook with waiting work (after the relay's listener reconnected). */
  rediscover: boolean;
  /** How long a lease lasts without a heartbeat, in ms. */
  visibilityTimeoutMs: number;
  /** How long the pass may hold the claim lock or wait for it, in ms. */
  lockTimeoutMs: number;
}

export interface ClaimPass {
  claimed: ClaimedWork[];
  /**
   * Work whose leases expired MAX_EXPIRATIONS times (it keeps killing its holders): held out of
   * the queue for an hour, for the caller to end with failWithoutAttempt (outside this
   * transaction: that function recovers from a refused statement, which a transaction cannot).
   */
  poisoned: { kind: WorkJobName; workId: string }[];
  /** In how many ms something comes due (a retry, a rate_limit turn, a lease's expiry); null: nothing known. */
  nextInMs: number | null;
  /**
   * Another pass may start more now: a grant found fewer rows due than it allowed while other
   * webhooks found no slot, or the round's read was full and webhooks of it were parked.
   */
  more: boolean;
  /** Work of the round is due and found no room: an attempt's end, freeing room, should start another pass. */
  waiting: boolean;
}

/** The claim lock of a deployment: an advisory lock whose key is a hash of its prefix (a signed 64-bit integer). */
function claimLockKey(queuePrefix: string): bigint {
  return createHash("sha256").update(`claim ${queuePrefix}`).digest().readBigInt64BE(0);
}

/** One claim; see above. */
export async function claimWork(pool: pg.Pool, options: ClaimOptions): Promise<ClaimPass> {
  const ms = Math.ceil(options.lockTimeoutMs);
  return inTransaction(
    pool,
    async (client) => {
      if (options.rediscover) await rediscover(client, options.queuePrefix);
      const { rows } = await run<{ state: ClaimState }>(
        client,
        prepareStatement(options.queuePrefix, options.notified),
        "delivery_state_claim_prepare",
      );
      const state = rows[0].state;
      const decision = decide({
        now: state.now_ms,
        slots: state.slots,
        reserve: state.reserve,
        leases: state.leases.map((l) => ({
          webhookId: l.webhook_id,
          accountId: l.account_id,
          leases: l.leases,
          reserved: l.reserved,
          quick: l.quick,
        })),
        candidates: state.round.map((c) => ({
          webhookId: c.webhook_id,
          accountId: c.account_id,
          status: c.status,
          mode: c.mode,
          rateLimit: c.rate_limit,
          turnAt: c.turn_at_ms,
          bypassWaiting: c.bypass_waiting,
          failing: c.failing,
          quick: c.quick,
        })),
      });
      const taken = await run<{
        claimed: { kind: string; work_id: string; lease: number; reserved: boolean; webhook_id: string; ready: boolean }[];
        next_in_ms: number | null;
        waiting: boolean;
      }>(client, takeStatement(options.queuePrefix, decision, options.visibilityTimeoutMs), "delivery_state_claim_take");
      const priorities = new Map(decision.grants.map((g) => [g.webhookId, g.priority]));
      const claimed = taken.rows[0].claimed.flatMap((r): ClaimedWork[] =>
        isWorkJobName(r.kind)
          ? [
              {
                kind: r.kind,
                workId: r.work_id,
                lease: r.lease,
                reserved: r.reserved,
                ...(r.ready ? { priority: priorities.get(r.webhook_id) } : {}),
              },
            ]
          : [],
      );
      const granted = decision.grants.reduce((sum, g) => sum + g.count, 0);
      const next = taken.rows[0].next_in_ms;
      return {
        claimed,
        poisoned: state.poisoned.flatMap((p) => (isWorkJobName(p.kind) ? [{ kind: p.kind, workId: p.work_id }] : [])),
        nextInMs: next === null ? null : Math.max(0, Number(next)),
        waiting: taken.rows[0].waiting,
        // Another pass at once: slots a grant left unused may go to others, and webhooks parked
        // out of a full read leave room for due webhooks behind them (which no due time names).
        more:
          (claimed.length < granted && decision.unserved > 0) || (decision.parked.length > 0 && state.round.length >= state.round_limit),
      };
    },
    { lock_timeout: ms, statement_timeout: ms, idle_in_transaction_session_timeout: ms, advisory_lock: claimLockKey(options.queuePrefix) },
  );
}

/** What the first statement answers (one JSON value). */
interface ClaimState {
  now_ms: number;
  slots: number;
  reserve: number;
  /** How many webhooks of the round the statement reads at most. */
  round_limit: number;
  leases: { webhook_id: string; account_id: string; leases: number; reserved: number; quick: boolean }[];
  round: {
    webhook_id: string;
    account_id: string;
    status: Candidate["status"];
    mode: Candidate["mode"];
    rate_limit: number | null;
    turn_at_ms: number | null;
    bypass_waiting: boolean;
    failing: boolean;
    quick: boolean;
  }[];
  poisoned: { kind: string; work_id: string }[];
}

/**
 * The first statement (step 1): expired leases end (work expiring for the MAX_EXPIRATIONS-th
 * time is held out an hour instead and answered in `poisoned`), the webhooks of expired work and
 * `notified` join the round, and the state is read. The round read is the first webhooks whose
 * turn has come, as many as hold leases plus twice the slots and the reserve (the most leases a decision grants): whatever `decide` grants
 * falls among them, since a webhook holding nothing comes before any holding something. Exported
 * for its plan's test (claim.integration.test.ts).
 */
export function prepareStatement(prefix: string, notified: readonly string[]): Sql {
  return sql`
    WITH expired AS (
      -- A pull that lapsed (its developer never answered) is not a holder that died: it counts no expiration.
      UPDATE work_items SET expirations = expirations + (pull_id IS NULL)::int, reserved = false, pull_id = NULL,
             leased_until = (CASE WHEN pull_id IS NULL AND expirations + 1 >= ${MAX_EXPIRATIONS} THEN now() + interval '1 hour' END)
       WHERE queue_prefix = ${prefix} AND leased_until IS NOT NULL AND leased_until <= now()
      RETURNING kind, work_id, webhook_id, account_id, leased_until IS NOT NULL AS poisoned
    ), heard AS (
      SELECT webhook_id, account_id FROM expired
      UNION SELECT w.id, w.account_id FROM webhooks w WHERE w.id = ANY(${[...notified]}::text[])
    ), joined AS (
      INSERT INTO webhook_queues (queue_prefix, webhook_id, account_id, ready_at)
      SELECT ${prefix}, webhook_id, account_id, now() FROM heard
      ON CONFLICT (queue_prefix, webhook_id) DO UPDATE SET ready_at = least(coalesce(webhook_queues.ready_at, 'infinity'), now())
      RETURNING webhook_id, account_id, ready_at, turn_at, quick
    ), capacity AS (
      SELECT coalesce(sum(slots), 0)::int AS slots, coalesce(sum(reserve), 0)::int AS reserve
        FROM dispatchers WHERE queue_prefix = ${prefix} AND seen_until > now()
    ), leases AS (
      -- Pulled work (listen.ts) holds no dispatcher's slot.
      SELECT l.*, coalesce(q.quick, false) AND w.failing_since IS NULL AS quick
        FROM (SELECT webhook_id, account_id, count(*)::int AS leases, (count(*) FILTER (WHERE reserved))::int AS reserved
                FROM work_items WHERE queue_prefix = ${prefix} AND leased_until > now() AND pull_id IS NULL GROUP BY webhook_id, account_id) l
        JOIN webhooks w ON w.id = l.webhook_id
        LEFT JOIN webhook_queues q ON q.queue_prefix = ${prefix} AND q.webhook_id = l.webhook_id
    ), size AS (
      SELECT (SELECT count(*) FROM leases) + 2 * slots + reserve AS n FROM capacity
    ), round AS (
      -- The round as this statement's snapshot sees it, and the webhooks that joined it now.
      SELECT * FROM (
        (SELECT q.webhook_id, q.account_id, q.ready_at, q.turn_at, q.quick FROM webhook_queues q
          WHERE q.queue_prefix = ${prefix} AND q.ready_at <= now() ORDER BY q.ready_at LIMIT (SELECT n FROM size))
        UNION ALL
        SELECT j.webhook_id, j.account_id, j.ready_at, j.turn_at, j.quick FROM joined j WHERE j.ready_at <= now()
      ) r
      ORDER BY r.webhook_id, r.ready_at
    ), firsts AS (
      SELECT DISTINCT ON (webhook_id) * FROM round ORDER BY webhook_id, ready_at
    )
    SELECT json_build_object(
      'now_ms', (extract(epoch FROM now()) * 1000)::float8,
      'slots', (SELECT slots FROM capacity),
      'reserve', (SELECT reserve FROM capacity),
      'round_limit', (SELECT n FROM size),
      'leases', (SELECT coalesce(json_agg(l), '[]') FROM leases l),
      'round', (SELECT coalesce(json_agg(c ORDER BY c.ready_at), '[]') FROM (
                 SELECT f.webhook_id, f.account_id, f.ready_at, w.status::text AS status, w.mode, w.rate_limit,
                        w.failing_since IS NOT NULL AS failing, f.quick AND w.failing_since IS NULL AS quick, (extract(epoch FROM f.turn_at) * 1000)::float8 AS turn_at_ms,
                        ((w.status::text = 'paused' OR w.mode = 'listen') AND EXISTS (
                           SELECT 1 FROM work_items b WHERE b.webhook_id = f.webhook_id AND b.bypass_pause AND b.leased_until IS NULL
                              AND b.queue_prefix = ${prefix})) AS bypass_waiting
                   FROM (SELECT * FROM firsts ORDER BY ready_at LIMIT (SELECT n FROM size)) f JOIN webhooks w ON w.id = f.webhook_id) c),
      'poisoned', (SELECT coalesce(json_agg(json_build_object('kind', kind, 'work_id', work_id)), '[]')
                     FROM expired WHERE poisoned)
    ) AS state`;
}

/**
 * The second statement (step 3). Leases what `decision` grants: for each webhook, its waiting
 * rows due now, the longest due first (a paused webhook's: only its replays to a target_url),
 * `FOR UPDATE SKIP LOCKED` on just those rows inside each webhook's LIMIT; each gets the next
 * lease number and `visibilityTimeoutMs`. Places each webhook served (now, behind the others,
 * while more of it is due; else when its next row comes due) or parked (at its next rate_limit
 * turn, or out of the round until a change of the webhook puts it back), with its next turn.
 * Answers the claimed work and in how many ms the next webhook of the round, or the next lease's
 * expiry, comes due. Exported for its plan's test (claim.integration.test.ts).
 */
export function takeStatement(prefix: string, decision: Pick<Decision, "grants" | "parked">, visibilityTimeoutMs: number): Sql {
  const { grants, parked } = decision;
  const placed = [
    ...grants.map((g) => ({ webhookId: g.webhookId, park: false, notBefore: g.turnAt, turnAt: g.turnAt })),
    ...parked.map((p) => ({ webhookId: p.webhookId, park: p.until === null, notBefore: p.until, turnAt: null })),
  ];
  const lateral = (bypassOnly: boolean) => sql`
        SELECT i.id, g.webhook_id, g.n, g.reserved, g.ready, i.due_at
          FROM g CROSS JOIN LATERAL (
            SELECT w.id, w.due_at FROM work_items w
             WHERE w.webhook_id = g.webhook_id AND w.leased_until IS NULL AND w.due_at <= now() AND w.queue_prefix = ${prefix}
               ${bypassOnly ? sql`AND w.bypass_pause` : empty}
             ORDER BY w.due_at, w.id LIMIT g.n
             FOR UPDATE SKIP LOCKED) i
         WHERE g.bypass_only = ${bypassOnly}`;
  return sql`
    WITH g AS (
      SELECT * FROM unnest(${grants.map((g) => g.webhookId)}::text[], ${grants.map((g) => g.count)}::int[],
                           ${grants.map((g) => g.reserved)}::int[], ${grants.map((g) => g.ready)}::int[],
                           ${grants.map((g) => g.bypassOnly)}::boolean[])
               AS g(webhook_id, n, reserved, ready, bypass_only)
    ), candidates AS (
      ${lateral(false)}
      UNION ALL
      ${lateral(true)}
    ), picked AS (
      SELECT id, n, reserved, ready, row_number() OVER (PARTITION BY webhook_id ORDER BY due_at, id) AS rn FROM candidates
    ), taken AS (
      -- By the primary key, row by row (= ANY of an array): joined to picked instead, the planner may
      -- hash the whole table.
      UPDATE work_items w SET lease = w.lease + 1, reserved = w.id = ANY(ARRAY(SELECT id FROM picked WHERE rn > n - reserved)),
             leased_until = now() + make_interval(secs => ${visibilityTimeoutMs / 1000})
       WHERE w.id = ANY(ARRAY(SELECT id FROM picked))
      RETURNING w.kind, w.work_id, w.lease, w.reserved, w.webhook_id,
                w.id = ANY(ARRAY(SELECT id FROM picked WHERE rn > n - reserved - ready AND rn <= n - reserved)) AS ready
    ), u AS (
      SELECT * FROM unnest(${placed.map((p) => p.webhookId)}::text[], ${placed.map((p) => p.park)}::boolean[],
                           ${placed.map((p) => p.notBefore)}::float8[], ${placed.map((p) => p.turnAt)}::float8[])
               AS u(webhook_id, park, not_before_ms, turn_at_ms)
    ), placed AS (
      UPDATE webhook_queues q SET
        ready_at = (CASE WHEN u.park THEN NULL ELSE (
                      SELECT greatest(i.due_at, now(), to_timestamp(u.not_before_ms / 1000)) FROM work_items i
                       WHERE i.webhook_id = q.webhook_id AND i.leased_until IS NULL AND i.queue_prefix = q.queue_prefix
                         AND i.id <> ALL(ARRAY(SELECT id FROM picked))
                       ORDER BY i.due_at, i.id LIMIT 1) END),
        turn_at = coalesce(to_timestamp(u.turn_at_ms / 1000), q.turn_at)
        FROM u WHERE q.queue_prefix = ${prefix} AND q.webhook_id = u.webhook_id
      RETURNING q.webhook_id, q.ready_at
    )
    SELECT (SELECT coalesce(json_agg(t), '[]') FROM taken t) AS claimed,
           extract(epoch FROM least(
             (SELECT min(ready_at) FROM placed WHERE ready_at > now()),
             (SELECT min(q.ready_at) FROM webhook_queues q
               WHERE q.queue_prefix = ${prefix} AND q.ready_at > now() AND q.webhook_id NOT IN (SELECT webhook_id FROM placed)),
             (SELECT min(leased_until) FROM work_items WHERE queue_prefix = ${prefix} AND leased_until > now())) - now()) * 1000
           AS next_in_ms,
           EXISTS (SELECT 1 FROM placed WHERE ready_at <= now())
             OR EXISTS (SELECT 1 FROM webhook_queues q
                         WHERE q.queue_prefix = ${prefix} AND q.ready_at <= now() AND q.webhook_id NOT IN (SELECT webhook_id FROM placed))
           AS waiting`;
}
