import type pg from "pg";
import sql, { type Sql } from "sql-template-tag";
import { decide, type Candidate, type Decision, type Grant, type LeaseCount } from "@mailhooks/scheduler";
import { isWorkJobName, type ClaimedWork, type WorkJobName } from "@mailhooks/queue";
import { inTransaction, run, type Queryable } from "./db.js";

/**
 * The claim (docs/scheduler.md): the one place where work is admitted. A relay pass runs it in
 * one transaction, under the deployment's claim lock, so that claims never overlap and every
 * limit holds for the deployment, whatever the number of dispatchers:
 * 1. leases that expired (their holder stopped renewing them) end, and the webhooks heard of
 *    (new work notified, or everything after a reconnection) join the round;
 * 2. the state the decision needs is read: the live dispatchers' slots, the live leases, and the
 *    round's first webhooks (webhook_queues, the longest waiting first);
 * 3. @mailhooks/scheduler's `decide` says what may start; each webhook's waiting rows are leased
 *    for it, the longest due first, only the rows taken being locked;
 * 4. each webhook served or parked gets its next place in the round, and the time of the next
 *    thing to come due is answered.
 * Every time is PostgreSQL's `now()`: one clock for every dispatcher.
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
  /** A grant found fewer rows due than it allowed: another pass may give the slots to others. */
  more: boolean;
}

/** The claim lock of a deployment: an advisory lock on a hash of its prefix. */
const lockOf = (queuePrefix: string) => sql`SELECT pg_advisory_xact_lock(hashtextextended(${`claim ${queuePrefix}`}, 0))`;

/** One claim; see above. */
export async function claimWork(pool: pg.Pool, options: ClaimOptions): Promise<ClaimPass> {
  const ms = Math.ceil(options.lockTimeoutMs);
  return inTransaction(
    pool,
    async (client) => {
      await run(client, lockOf(options.queuePrefix));
      const poisoned = await expireAndJoin(client, options);
      const state = await readState(client, options.queuePrefix);
      const decision = decide(state);
      const { claimed, more } = await take(client, options, decision);
      const nextInMs = await placeInRound(client, options.queuePrefix, decision);
      return { claimed, poisoned, nextInMs, more };
    },
    { lock_timeout: ms, statement_timeout: ms, idle_in_transaction_session_timeout: ms },
  );
}

/**
 * Step 1: ends expired leases, and puts their webhooks and those heard of in the round. Work
 * expiring for the MAX_EXPIRATIONS-th time is held out instead (ClaimPass.poisoned).
 */
async function expireAndJoin(client: Queryable, options: ClaimOptions): Promise<ClaimPass["poisoned"]> {
  const prefix = options.queuePrefix;
  const { rows } = await run<{ kind: string; work_id: string }>(
    client,
    sql`WITH expired AS (
          UPDATE work_items SET expirations = expirations + 1, reserved = false,
                 leased_until = (CASE WHEN expirations + 1 >= ${MAX_EXPIRATIONS} THEN now() + interval '1 hour' END)
           WHERE queue_prefix = ${prefix} AND leased_until IS NOT NULL AND leased_until <= now()
          RETURNING kind, work_id, webhook_id, account_id, expirations
        ), heard AS (
          SELECT webhook_id, account_id FROM expired
          UNION SELECT w.id, w.account_id FROM webhooks w WHERE w.id = ANY(${[...options.notified]}::text[])
        ), joined AS (
          INSERT INTO webhook_queues (queue_prefix, webhook_id, account_id, ready_at)
          SELECT ${prefix}, webhook_id, account_id, now() FROM heard
          ON CONFLICT (queue_prefix, webhook_id) DO UPDATE SET ready_at = least(coalesce(webhook_queues.ready_at, 'infinity'), now())
          RETURNING 1
        )
        SELECT kind, work_id FROM expired WHERE expirations >= ${MAX_EXPIRATIONS}`,
  );
  if (options.rediscover) await rediscover(client, prefix);
  return rows.flatMap((row) => (isWorkJobName(row.kind) ? [{ kind: row.kind, workId: row.work_id }] : []));
}

/**
 * Puts every webhook with waiting work of `prefix` in the round (notifications sent while the
 * relay was not listening are lost): one index probe per webhook with waiting work, of any
 * deployment, however many rows wait.
 */
async function rediscover(client: Queryable, prefix: string): Promise<void> {
  await run(
    client,
    sql`WITH RECURSIVE hooks AS (
          (SELECT webhook_id FROM work_items WHERE leased_until IS NULL ORDER BY webhook_id LIMIT 1)
          UNION ALL
          SELECT (SELECT i.webhook_id FROM work_items i WHERE i.leased_until IS NULL AND i.webhook_id > h.webhook_id
                   ORDER BY i.webhook_id LIMIT 1)
            FROM hooks h WHERE h.webhook_id IS NOT NULL
        )
        INSERT INTO webhook_queues (queue_prefix, webhook_id, account_id, ready_at)
        SELECT ${prefix}, w.id, w.account_id, now() FROM hooks h JOIN webhooks w ON w.id = h.webhook_id
         WHERE EXISTS (SELECT 1 FROM work_items i WHERE i.webhook_id = h.webhook_id AND i.queue_prefix = ${prefix} AND i.leased_until IS NULL)
        ON CONFLICT (queue_prefix, webhook_id) DO UPDATE SET ready_at = least(coalesce(webhook_queues.ready_at, 'infinity'), now())`,
  );
}

/**
 * Step 2: the live dispatchers' slots, the live leases, and the round's first webhooks: as many as
 * hold leases plus the slots and reserve (whatever `decide` grants falls among them: a webhook
 * holding nothing comes before any holding something). Read with PostgreSQL's now().
 */
async function readState(client: Queryable, prefix: string): Promise<Parameters<typeof decide>[0]> {
  const { rows } = await run<{
    now_ms: number;
    slots: number;
    reserve: number;
    leases: { webhook_id: string; account_id: string; leases: number; reserved: number }[];
  }>(
    client,
    sql`SELECT (extract(epoch FROM now()) * 1000)::float8 AS now_ms,
               (SELECT coalesce(sum(slots), 0)::int FROM dispatchers WHERE queue_prefix = ${prefix} AND seen_until > now()) AS slots,
               (SELECT coalesce(sum(reserve), 0)::int FROM dispatchers WHERE queue_prefix = ${prefix} AND seen_until > now()) AS reserve,
               (SELECT coalesce(json_agg(l), '[]') FROM (
                  SELECT webhook_id, account_id, count(*)::int AS leases, (count(*) FILTER (WHERE reserved))::int AS reserved
                    FROM work_items WHERE queue_prefix = ${prefix} AND leased_until > now() GROUP BY webhook_id, account_id) l) AS leases`,
  );
  const state = rows[0];
  const leases: LeaseCount[] = state.leases.map((l) => ({
    webhookId: l.webhook_id,
    accountId: l.account_id,
    leases: l.leases,
    reserved: l.reserved,
  }));
  const limit = leases.length + state.slots + state.reserve;
  const candidates =
    limit === 0
      ? []
      : (
          await run<{
            webhook_id: string;
            account_id: string;
            status: Candidate["status"];
            rate_limit: number | null;
            turn_at_ms: number | null;
            bypass_waiting: boolean;
            failing: boolean;
          }>(
            client,
            roundStatement(prefix, limit),
            "delivery_state_claim_round_v2",
          )
        ).rows;
  return {
    now: state.now_ms,
    slots: state.slots,
    reserve: state.reserve,
    leases,
    candidates: candidates.map((c) => ({
      webhookId: c.webhook_id,
      accountId: c.account_id,
      status: c.status,
      mode: "push",
      rateLimit: c.rate_limit,
      turnAt: c.turn_at_ms,
      bypassWaiting: c.bypass_waiting,
      failing: c.failing,
    })),
  };
}

/**
 * Step 3: leases what `decision` grants: for each webhook, its waiting rows due now, the longest
 * due first (a paused webhook's: only its replays to a target_url), `FOR UPDATE SKIP LOCKED` on
 * just those rows. Each lease gets the next `lease` number and the visibility timeout.
 */
async function take(client: Queryable, options: ClaimOptions, decision: Decision): Promise<{ claimed: ClaimedWork[]; more: boolean }> {
  if (decision.grants.length === 0) return { claimed: [], more: false };
  const claimed: ClaimedWork[] = [];
  for (const bypassOnly of [false, true]) {
    const grants = decision.grants.filter((g) => g.bypassOnly === bypassOnly);
    if (grants.length === 0) continue;
    const { rows } = await run<{ kind: string; work_id: string; lease: number }>(
      client,
      takeStatement(options.queuePrefix, grants, options.visibilityTimeoutMs, bypassOnly),
      bypassOnly ? "delivery_state_claim_take_bypass_v2" : "delivery_state_claim_take_v2",
    );
    for (const row of rows) if (isWorkJobName(row.kind)) claimed.push({ kind: row.kind, workId: row.work_id, lease: row.lease });
  }
  const granted = decision.grants.reduce((sum, g) => sum + g.count, 0);
  return { claimed, more: claimed.length < granted };
}

/**
 * Step 4: the next place in the round of each webhook served (now, behind the others, while more
 * of it is due; else when its next row comes due) or parked (at its next rate_limit turn, or out of
 * the round until a change of the webhook puts it back), with its next turn; and in how many ms
 * the next webhook of the round, or the next lease's expiry, comes due.
 */
async function placeInRound(client: Queryable, prefix: string, decision: Decision): Promise<number | null> {
  const placed = [
    ...decision.grants.map((g) => ({ webhookId: g.webhookId, park: false, notBefore: g.turnAt, turnAt: g.turnAt })),
    ...decision.parked.map((p) => ({ webhookId: p.webhookId, park: p.until === null, notBefore: p.until, turnAt: null })),
  ];
  const { rows } = await run<{ next_in_ms: number | null }>(
    client,
    sql`WITH u AS (
          SELECT * FROM unnest(${placed.map((p) => p.webhookId)}::text[], ${placed.map((p) => p.park)}::boolean[],
                               ${placed.map((p) => p.notBefore)}::float8[], ${placed.map((p) => p.turnAt)}::float8[])
                   AS u(webhook_id, park, not_before_ms, turn_at_ms)
        ), placed AS (
          UPDATE webhook_queues q SET
            ready_at = (CASE WHEN u.park THEN NULL ELSE (
                          SELECT greatest(i.due_at, now(), to_timestamp(u.not_before_ms / 1000)) FROM work_items i
                           WHERE i.webhook_id = q.webhook_id AND i.leased_until IS NULL AND i.queue_prefix = q.queue_prefix
                           ORDER BY i.due_at, i.id LIMIT 1) END),
            turn_at = coalesce(to_timestamp(u.turn_at_ms / 1000), q.turn_at)
            FROM u WHERE q.queue_prefix = ${prefix} AND q.webhook_id = u.webhook_id
          RETURNING q.ready_at
        )
        SELECT extract(epoch FROM least(
                 (SELECT min(ready_at) FROM placed WHERE ready_at > now()),
                 (SELECT min(ready_at) FROM webhook_queues WHERE queue_prefix = ${prefix} AND ready_at > now()),
                 (SELECT min(leased_until) FROM work_items WHERE queue_prefix = ${prefix} AND leased_until > now())) - now()) * 1000
               AS next_in_ms`,
  );
  const next = rows[0]?.next_in_ms;
  return next === null || next === undefined ? null : Math.max(0, Number(next));
}

/**
 * The round's first `limit` webhooks of `prefix` whose turn has come, the longest waiting first,
 * with what the decision reads of each (exported for its plan's test, claim.integration.test.ts).
 */
export function roundStatement(prefix: string, limit: number): Sql {
  return sql`SELECT q.webhook_id, q.account_id, w.status::text AS status, w.rate_limit, w.failing_since IS NOT NULL AS failing,
                    (extract(epoch FROM q.turn_at) * 1000)::float8 AS turn_at_ms,
                    (w.status::text = 'paused' AND EXISTS (
                       SELECT 1 FROM work_items b WHERE b.webhook_id = q.webhook_id AND b.bypass_pause AND b.leased_until IS NULL
                          AND b.queue_prefix = ${prefix})) AS bypass_waiting
               FROM webhook_queues q JOIN webhooks w ON w.id = q.webhook_id
              WHERE q.queue_prefix = ${prefix} AND q.ready_at <= now()
              ORDER BY q.ready_at LIMIT ${limit}`;
}

/**
 * Leases what `grants` allow: for each webhook, its waiting rows due now, the longest due first
 * (with `bypassOnly`, only its replays to a target_url), locking just those rows
 * (`FOR UPDATE SKIP LOCKED` inside each webhook's LIMIT); each gets the next lease number and
 * `visibilityTimeoutMs`. Exported for its plan's test (claim.integration.test.ts).
 */
export function takeStatement(prefix: string, grants: Grant[], visibilityTimeoutMs: number, bypassOnly: boolean): Sql {
  return sql`WITH g AS (
        SELECT * FROM unnest(${grants.map((g) => g.webhookId)}::text[], ${grants.map((g) => g.count)}::int[],
                             ${grants.map((g) => g.reserved)}::int[]) AS g(webhook_id, n, reserved)
      ), picked AS (
        SELECT i.id, g.n, g.reserved, row_number() OVER (PARTITION BY g.webhook_id ORDER BY i.due_at, i.id) AS rn
          FROM g CROSS JOIN LATERAL (
            SELECT w.id, w.due_at FROM work_items w
             WHERE w.webhook_id = g.webhook_id AND w.leased_until IS NULL AND w.due_at <= now() AND w.queue_prefix = ${prefix}
               ${bypassOnly ? sql`AND w.bypass_pause` : sql``}
             ORDER BY w.due_at, w.id LIMIT g.n
             FOR UPDATE SKIP LOCKED) i
      )
      -- By the primary key, row by row (= ANY of an array): joined to picked instead, the planner may
      -- hash the whole table.
      UPDATE work_items w SET lease = w.lease + 1, reserved = w.id = ANY(ARRAY(SELECT id FROM picked WHERE rn > n - reserved)),
             leased_until = now() + make_interval(secs => ${visibilityTimeoutMs / 1000})
       WHERE w.id = ANY(ARRAY(SELECT id FROM picked))
      RETURNING w.kind, w.work_id, w.lease`;
}
