import { setNewest } from "@mailhooks/bounded-map";
import type { RedisClient } from "@mailhooks/queue";
import { FORFEIT_TURN, LIFT, RATE_TURN } from "./scripts.js";
import { createSlotWaits, createStartPacer, createWakePacer, FAST_WAIT_MS, holdDelayMs } from "./holds.js";
import { createShareLedger, reserveSlots, workerSlots as workerSlotsOf } from "./shares.js";

/**
 * Admission of delivery attempts (docs/scheduler.md; docs/api.md, "Webhooks", `rate_limit`;
 * docs/scheduler.md): before a job's attempt starts, the worker asks here whether its webhook may
 * take one of this dispatcher's slots now. Shares are counted by each dispatcher over its own
 * slots, in memory (no round trip per attempt, and nothing to clean up after a crash: the counts
 * die with the process whose attempts they count); every dispatcher applies the same rule, so the
 * shares hold for the deployment as a whole. What must be shared lives in Redis: the rate_limit
 * turns (one Lua script per turn, so that two dispatchers never take the same one) and the slow
 * and fast marks (the relays give slow webhooks a smaller job limit, fast ones a larger one).
 *
 * The rule, with C this dispatcher's slots (DISPATCHER_CONCURRENCY), R = reserveSlots(C) more
 * slots on top of them, and N the webhooks with attempts running here:
 * - a webhook takes a slot while fewer than C attempts run in all (work-conserving: alone, a
 *   webhook uses all C), or, in the reserve, while it runs fewer than C / (N + 1) (a newcomer's
 *   share): so a webhook that has had little always finds a slot at once, however many slots
 *   others hold;
 * - and in the reserve only while its account runs fewer reserve attempts (attempts that found C
 *   running when they started, of any age) than R / (accounts running reserve attempts, its own
 *   counted among them, + 1), at least one: an account whose many new webhooks all start
 *   hanging, none of them known slow yet, holds that share of the reserve for their first
 *   deadline, and every other account finds the rest (with R >= 2, i.e. C >= 16);
 * - a job of a webhook that is not slow, refused a slot, waits in its worker slot for one to free
 *   (RESERVE_WAIT_MS: a lone fast webhook's C attempts free one within milliseconds) only while
 *   R other worker slots are left free to fetch (the worker has R slots beyond the C + R attempts
 *   can take: workerSlots); otherwise it is held at once, so that a newcomer's
 *   job is always fetched. A fast webhook's job (8 quick attempts in a second here, lately), while
 *   its attempts run here and none for longer than FAST_WAIT_MS, waits in any worker slot, for up
 *   to FAST_WAIT_MS: its attempts free a slot, and the worker slot to fetch with it, every few
 *   milliseconds;
 * - a webhook is slow while an attempt of it runs longer than `slowAttemptMs`, or for
 *   `slowMemoryMs` after one took longer, on any dispatcher (a receiver that hangs until the
 *   deadline, or answers slowly); a slow webhook gets only its fair share (C / accounts running,
 *   divided among the account's running webhooks, at least one), never the reserve, until one of
 *   its attempts is quick again. This bounds what hanging receivers hold: together at most C
 *   slots, never the reserve, each at most its fair share once it is known slow, and their retries come back under
 *   the same rule;
 * - a slow webhook's admitted attempts start one per slowAttemptMs / C here (createStartPacer):
 *   its retries, due together, do not start together;
 * - a webhook with a `rate_limit` r is admitted at most once per 1.15 / r s (GCRA): the job whose
 *   turn is not yet due is given a reserved time and waits until then (no attempt is used). When
 *   the limit is lifted or changed (PATCH), reviewRateLimits gives the waiting jobs back at once.
 * A job held back waits in the queue's delayed set without using an attempt and comes back at the
 * time the answer names.
 */

export type Admission = { admitted: true } | { admitted: false; reason: HoldReason; retryAt: number };

/** Why an attempt was held back: its webhook or account had its share, or its rate_limit. */
export type HoldReason = "share" | "rate_limit";

export interface AdmissionOptions {
  redis: RedisClient;
  /** The deployment's Redis key prefix (redisKeyPrefix(QUEUE_PREFIX, REDIS_CLUSTER)). */
  keyPrefix: string;
  /** This dispatcher's slots (DISPATCHER_CONCURRENCY): the C of the rule. */
  localConcurrency: number;
  /** An attempt longer than this, in ms, marks its webhook slow (DISPATCHER_SLOW_ATTEMPT_MS). */
  slowAttemptMs: number;
  /** How long a webhook stays slow without a quick attempt, in ms (10 minutes). */
  slowMemoryMs?: number;
  /**
   * Moves a held job (by id) out of the delayed set at once, when a slot of its webhook frees
   * (BullMQ's promote). Without it, held jobs of slow webhooks ask again at their hold's end.
   */
  promote?: (jobId: string) => Promise<void>;
}

/**
 * Spacing of a rate-limited webhook's attempts, in ms: 1.15 s / r. The 15 % are for the jitter
 * between an attempt's turn and its request reaching the receiver (a queue promotion, a
 * connection, a busy process): r turns then span 1.15 s, so that up to 150 ms of jitter still
 * puts at most r requests in any one second at the receiver.
 */
export function rateIntervalMs(rateLimit: number): number {
  return 1150 / rateLimit;
}

type Scripted = RedisClient & {
  schedulerRateTurn(...args: (string | number)[]): Promise<[number, string?, number?]>;
  schedulerForfeitTurn(...args: (string | number)[]): Promise<number>;
  schedulerLift(...args: (string | number)[]): Promise<string[]>;
};

/** What the scheduler knows of a deployment right now (metrics, tests). */
export interface AdmissionState {
  /** Attempts running on this dispatcher. */
  running: number;
  /** This dispatcher's slots. */
  capacity: number;
  /** Webhooks marked slow, on any dispatcher. */
  slowWebhooks: number;
  /** Webhooks whose rate_limit holds work back now. */
  rateLimitedWebhooks: number;
  /** Jobs waiting for a reserved turn of their webhook's rate_limit. */
  waitingForRateLimit: number;
}

export interface AdmissionControl {
  /**
   * May the attempt of job `jobId` for `webhookId` of `accountId` start now? `holds` is how
   * often this job was held back already (the wait grows with it); `rateLimit` the webhook's
   * rate_limit (null: none). Throws only when Redis fails to answer for a rate limit.
   */
  admit(input: { jobId: string; webhookId: string; accountId: string; holds: number; rateLimit: number | null }): Promise<Admission>;
  /** The attempt of an admitted job ended after `durationMs`: its slot is free again. */
  release(input: { jobId: string; webhookId: string; accountId: string; durationMs: number }): Promise<void>;
  /**
   * Looks at the webhooks whose rate_limit holds work back now: where `currentLimit` says the
   * limit was lifted or changed since their turns were given out, their turns are dropped and
   * their waiting jobs promoted (so that lifting a limit takes effect at once). Returns how many
   * webhooks were given back their work.
   */
  reviewRateLimits(currentLimit: (webhookId: string) => Promise<number | null>): Promise<number>;
  /** The webhooks marked slow now, by any dispatcher (the relay gives them a smaller job limit). */
  slowWebhooks(): Promise<string[]>;
  /**
   * The webhooks with many quick attempts lately (FAST_QUICK_ATTEMPTS in a second, on one
   * dispatcher, in the last FAST_MEMORY_MS; on any dispatcher) (the relay
   * gives them a larger job limit, so that a fast receiver's queue never runs dry between relay
   * passes). At most MAX_MARKS.
   */
  fastWebhooks(): Promise<string[]>;
  /** Both of the above, for the relay (relayOutbox's `classes`). */
  webhookClasses(): Promise<{ slow: string[]; fast: string[] }>;
  /** Learns the slow marks of the other dispatchers (call every second or so). */
  refreshSlowMarks(): Promise<void>;
  state(): Promise<AdmissionState>;
}

/** Bound of the fast marks' bookkeeping (a dispatcher's memory is shared by every account). */
const MAX_MARKS = 50_000;
/** How long, in ms, a fast mark lasts; it is renewed at most every second. */
const FAST_MEMORY_MS = 10_000;
/**
 * Quick attempts of one webhook within one second on one dispatcher that mark it fast (the relay
 * then gives it 64 times the job limit): half the default job limit (16). A quick receiver whose
 * work is held to the limit's 16 jobs in the queue runs at least 16 attempts a second (each under
 * DISPATCHER_SLOW_ATTEMPT_MS), so it is marked within its first second or two, before the limit
 * could keep it from the dispatchers' slots. One quick answer (a webhook's test event) is not
 * enough: a receiver may answer that and hang on the rest.
 */
const FAST_QUICK_ATTEMPTS = 8;

export function createAdmissionControl(options: AdmissionOptions): AdmissionControl {
  const redis = options.redis as Scripted;
  const k = (name: string) => `${options.keyPrefix}:sched:${name}`;
  if (typeof redis.schedulerRateTurn !== "function") {
    redis.defineCommand("schedulerRateTurn", { numberOfKeys: 6, lua: RATE_TURN });
    redis.defineCommand("schedulerForfeitTurn", { numberOfKeys: 3, lua: FORFEIT_TURN });
    redis.defineCommand("schedulerLift", { numberOfKeys: 4, lua: LIFT });
  }
  const capacity = options.localConcurrency;
  const slowMemoryMs = options.slowMemoryMs ?? 600_000;
  const shares = createShareLedger({ capacity, slowAttemptMs: options.slowAttemptMs });
  /** Fast marks this dispatcher wrote: webhook -> when (ms). */
  const fastMarked = new Map<string, number>();
  /** Quick attempts per webhook in the current second: webhook -> [second's start (ms), count]. */
  const quickCounts = new Map<string, [number, number]>();
  const turnKeys = (webhookId: string, jobId: string) => [
    k(`rate:${webhookId}`),
    k(`turn:${jobId}`),
    k("rate-limited"),
    k("reserved"),
    k(`webhooks:rate-waiting:${webhookId}`),
    k("webhooks:rate-interval"),
  ];

  const reserveWaits = createSlotWaits();
  /** The worker's concurrency (createConfiguredDeliveryWorker). */
  const workerSlots = workerSlotsOf(capacity);
  /** Worker slots kept free to fetch (never taken by a job waiting in its slot): R. */
  const fetchSlots = reserveSlots(capacity);
  const promote = (jobId: string) => options.promote?.(jobId) ?? Promise.resolve();
  const wakes = createWakePacer({ intervalMs: options.slowAttemptMs / capacity, maxQueued: capacity * 4, promote });
  const slowStarts = createStartPacer(options.slowAttemptMs / capacity);

  return {
    async admit(input) {
      const now = Date.now();
      // The same job asking again here (taken over after a stall) replaces its own entry.
      shares.forget(input.jobId);
      const slow = shares.isSlow(input.webhookId, now);
      // Takes the slot in the same tick as the check: two jobs woken by one free slot cannot both take it.
      const takeSlot = () => {
        const at = Date.now();
        if (!shares.hasShare(input.webhookId, input.accountId, slow)) return false;
        shares.start(input.jobId, input.webhookId, input.accountId, at);
        return true;
      };
      // A job waits in its worker slot only while R other worker slots are left free to fetch:
      // jobs waiting in every free one would keep any other job (a newcomer's) from being fetched.
      // Except a fast webhook's (quick attempts here, lately) while its own attempts run here and
      // none for longer than FAST_WAIT_MS, in any worker slot and for up to FAST_WAIT_MS: those
      // attempts free a slot, and with it a worker slot to fetch, every few ms, and the waiters
      // are served in turn; held instead, a lone fast webhook's jobs went to the delayed set and
      // back, over and over. Fast webhooks that start hanging stop waiting so within FAST_WAIT_MS.
      const oldest = shares.oldestRunning(input.webhookId);
      const fast =
        !slow &&
        oldest !== undefined &&
        oldest >= now - FAST_WAIT_MS &&
        (fastMarked.get(input.webhookId) ?? -Infinity) >= now - FAST_MEMORY_MS;
      const mayWait = fast || (!slow && shares.running + reserveWaits.waiting + fetchSlots < workerSlots);
      if (!takeSlot() && (!mayWait || !(await reserveWaits.wait(takeSlot, fast ? FAST_WAIT_MS : undefined)))) {
        if (input.rateLimit)
          await redis.schedulerForfeitTurn(
            k(`turn:${input.jobId}`),
            k("reserved"),
            k(`webhooks:rate-waiting:${input.webhookId}`),
            input.jobId,
          );
        if (slow) shares.hold(input.webhookId, input.jobId);
        // From now, not from the ask: a hold after a wait in the worker slot is a hold too.
        return { admitted: false, reason: "share", retryAt: Date.now() + holdDelayMs(input.holds, slow) };
      }
      if (slow) {
        // Its turn among the slow webhooks' starts here (createStartPacer), waited for in its worker
        // slot with its share's slot taken: a wave of their retries due together starts paced.
        const wait = slowStarts.turn(Date.now()) - Date.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      }
      if (input.rateLimit) {
        // Should Redis fail here, the worker lets the attempt go ahead on the slot it holds.
        const [turn, , at] = await redis.schedulerRateTurn(
          ...turnKeys(input.webhookId, input.jobId),
          Date.now(),
          input.jobId,
          input.webhookId,
          rateIntervalMs(input.rateLimit),
        );
        if (turn !== 1) {
          shares.forget(input.jobId);
          reserveWaits.slotFreed();
          return { admitted: false, reason: "rate_limit", retryAt: Number(at) };
        }
      }
      return { admitted: true };
    },
    async release(input) {
      const now = Date.now();
      shares.forget(input.jobId);
      reserveWaits.slotFreed();
      const known = shares.slowMark(input.webhookId);
      const quick = input.durationMs <= options.slowAttemptMs;
      if (!quick) {
        // Told to the other dispatchers (and their relays) when new, or when half its memory is gone.
        if (known === undefined || known < now + slowMemoryMs / 2) {
          shares.markSlow(input.webhookId, now + slowMemoryMs);
          await redis.zadd(k("slow"), now + slowMemoryMs, input.webhookId);
        }
      } else {
        if (known !== undefined) {
          shares.clearSlow(input.webhookId);
          await redis.zrem(k("slow"), input.webhookId);
        }
        let count = quickCounts.get(input.webhookId);
        if (!count || count[0] < now - 1_000) {
          count = [now, 0];
          setNewest(quickCounts, input.webhookId, count, MAX_MARKS);
        }
        count[1]++;
        if (count[1] >= FAST_QUICK_ATTEMPTS && (fastMarked.get(input.webhookId) ?? 0) < now - 1_000) {
          setNewest(fastMarked, input.webhookId, now, MAX_MARKS);
          await redis.zadd(k("fast"), now + FAST_MEMORY_MS, input.webhookId);
        }
      }
      // A slot of this webhook is free: the job of it held back longest may take it (one: a second
      // would only be held again), paced; all of them at once when it was quick (the webhook is no
      // longer slow, or its work is cancelled). A held job that asked again meanwhile is not promoted.
      const woken = shares.wake(input.webhookId, quick);
      if (quick) for (const jobId of woken) await promote(jobId).catch(() => undefined);
      else await wakes.wake(woken);
    },
    async refreshSlowMarks() {
      const now = Date.now();
      shares.expireSlowMarks(now);
      // An attempt running long marks its webhook slow for the relays now, not at its end (a
      // hanging receiver's comes at the deadline, 30 s later): a webhook marked fast that starts
      // hanging would be handed 64 times the job limit meanwhile, each job to be fetched and refused.
      for (const webhookId of shares.runningLong(now)) {
        const known = shares.slowMark(webhookId);
        if (known !== undefined && known >= now + slowMemoryMs / 2) continue;
        shares.markSlow(webhookId, now + slowMemoryMs);
        await redis.zadd(k("slow"), now + slowMemoryMs, webhookId);
      }
      const marks = await redis.zrangebyscore(k("slow"), now, "+inf", "WITHSCORES", "LIMIT", 0, MAX_MARKS);
      for (let i = 0; i < marks.length; i += 2)
        if ((shares.slowMark(marks[i]) ?? 0) < Number(marks[i + 1])) shares.markSlow(marks[i], Number(marks[i + 1]));
      // Marks cleared elsewhere (a quick attempt on another dispatcher) are kept here until they
      // end or a quick attempt here clears them: a webhook is then treated as slow a little longer.
      await redis.zremrangebyscore(k("slow"), "-inf", now);
      await redis.zremrangebyscore(k("fast"), "-inf", now);
      for (const [webhookId, at] of fastMarked) if (at < now - FAST_MEMORY_MS) fastMarked.delete(webhookId);
      for (const [webhookId, [since]] of quickCounts) if (since < now - 1_000) quickCounts.delete(webhookId);
    },
    async reviewRateLimits(currentLimit) {
      const limited = await redis.zrangebyscore(k("rate-limited"), Date.now(), "+inf", "LIMIT", 0, 1000);
      if (limited.length === 0) return 0;
      const intervals = await redis.hmget(k("webhooks:rate-interval"), ...limited);
      let lifted = 0;
      for (const [i, webhookId] of limited.entries()) {
        const limit = await currentLimit(webhookId);
        const interval = limit ? rateIntervalMs(limit) : 0;
        if (intervals[i] !== null && Math.abs(Number(intervals[i]) - interval) < 1e-6) continue;
        const jobs = await redis.schedulerLift(
          k(`rate:${webhookId}`),
          k(`webhooks:rate-waiting:${webhookId}`),
          k("rate-limited"),
          k("webhooks:rate-interval"),
          webhookId,
          k("turn:"),
        );
        for (const jobId of jobs) await promote(jobId).catch(() => undefined);
        lifted++;
      }
      return lifted;
    },
    async slowWebhooks() {
      return redis.zrangebyscore(k("slow"), Date.now(), "+inf", "LIMIT", 0, MAX_MARKS);
    },
    async fastWebhooks() {
      return redis.zrangebyscore(k("fast"), Date.now(), "+inf", "LIMIT", 0, MAX_MARKS);
    },
    async webhookClasses() {
      const [slow, fast] = await Promise.all([this.slowWebhooks(), this.fastWebhooks()]);
      return { slow, fast };
    },
    async state() {
      const now = Date.now();
      const [slow, limited, reserved] = await Promise.all([
        redis.zcount(k("slow"), now, "+inf"),
        redis.zcount(k("rate-limited"), now, "+inf"),
        redis.zcount(k("reserved"), now, "+inf"),
      ]);
      return { running: shares.running, capacity, slowWebhooks: slow, rateLimitedWebhooks: limited, waitingForRateLimit: reserved };
    },
  };
}
