import type { RedisClient } from "@mailhooks/queue";
import { ADMIT, HEARTBEAT, LIFT, RELEASE } from "./scripts.js";

/**
 * Admission of delivery attempts (CONTRACT.md section 6, fairness; section 4, `rate_limit`;
 * docs/scheduler.md): before a job's attempt starts, the worker asks here whether its webhook may
 * take a dispatcher slot now. The state is shared by every dispatcher of a deployment, in Redis
 * (keys under the deployment's prefix, one hash slot on a Cluster), and each step is one Lua
 * script, so that two dispatchers never both take the last share.
 *
 * The rule, with C the slots of all live dispatchers, R = max(1, C/8) a reserve, and N the
 * webhooks with attempts running:
 * - a webhook takes a slot while fewer than C - R attempts run in all (work-conserving: alone, a
 *   webhook may use that much), or, in the reserve, while it runs fewer than C / (N + 1) (a
 *   newcomer's share): so a webhook that has had little always finds a slot at once, however many
 *   slots others hold;
 * - and in the reserve only while its account's quick attempts (not yet `slowAttemptMs` old) are
 *   fewer than C / (accounts running + 1): an account whose many new webhooks all hang cannot
 *   take the reserve from the others in the first seconds;
 * - a webhook is slow while an attempt of it runs longer than `slowAttemptMs`, or after one took
 *   longer (a receiver that hangs until the deadline, or answers slowly); a slow webhook gets only its fair share (C / accounts running, divided among the
 *   account's running webhooks, at least one), never the reserve, until one of its attempts is
 *   quick again. This bounds what hanging receivers hold: together at most C - R slots, each at
 *   most its fair share once it is known slow, and their retries come back under the same rule;
 * - a webhook with a `rate_limit` r is admitted at most once per 1.15 / r s (GCRA): the job whose
 *   turn is not yet due is given a reserved time and waits until then (no attempt is used). When
 *   the limit is lifted or changed (PATCH), liftRateLimit gives the waiting jobs back at once.
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
  /** This dispatcher's slots (DISPATCHER_CONCURRENCY): the capacity until heartbeats tell more. */
  localConcurrency: number;
  /** An attempt longer than this, in ms, marks its webhook slow (DISPATCHER_SLOW_ATTEMPT_MS). */
  slowAttemptMs: number;
  /** How long a webhook stays slow without a quick attempt, in ms. */
  slowMemoryMs?: number;
  /**
   * Moves a held job (by id) out of the delayed set at once, when a slot of its webhook frees
   * (BullMQ's promote). Without it, held jobs of slow webhooks ask again at their hold's end.
   */
  promote?: (jobId: string) => Promise<void>;
  /**
   * Attempts older than this, in ms, no longer count (their dispatcher died mid-attempt): more
   * than the longest attempt (DELIVERY_TIMEOUT_MS plus the body read and the database write).
   */
  maxAttemptMs: number;
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
  schedulerAdmit(...args: (string | number)[]): Promise<[number, string?, number?]>;
  schedulerRelease(...args: (string | number)[]): Promise<string[]>;
  schedulerHeartbeat(...args: (string | number)[]): Promise<number>;
  schedulerLift(...args: (string | number)[]): Promise<string[]>;
};

/** What the scheduler knows of a deployment right now (metrics, tests). */
export interface AdmissionState {
  /** Attempts running on every dispatcher. */
  running: number;
  /** Slots of the live dispatchers (0 before the first heartbeat). */
  capacity: number;
  /** Webhooks marked slow. */
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
   * rate_limit (null: none).
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
  /** The webhooks marked slow now (the relay gives them a smaller job limit). */
  slowWebhooks(): Promise<string[]>;
  /** Tells the others that this dispatcher (`id`) lives with its slots, for `ttlMs`. */
  heartbeat(id: string, ttlMs: number): Promise<number>;
  state(): Promise<AdmissionState>;
}

/**
 * How long a job held back for its share waits before it asks again, in ms: 50 ms doubling to
 * 1 s; for a slow webhook's job 500 ms doubling to 5 s, but the end of any attempt of its
 * webhook wakes the two held longest at once (`promote`): its slots free at the pace of its
 * receiver, and asking more often would only cost the dispatchers.
 */
export function holdDelayMs(holds: number, slow = false): number {
  const n = Math.min(6, Math.max(0, holds));
  return slow ? Math.min(5_000, 500 * 2 ** n) : Math.min(1_000, 50 * 2 ** n);
}

export function createAdmissionControl(options: AdmissionOptions): AdmissionControl {
  const redis = options.redis as Scripted;
  const k = (name: string) => `${options.keyPrefix}:sched:${name}`;
  if (typeof redis.schedulerAdmit !== "function") {
    redis.defineCommand("schedulerAdmit", { numberOfKeys: 9, lua: ADMIT });
    redis.defineCommand("schedulerRelease", { numberOfKeys: 4, lua: RELEASE });
    redis.defineCommand("schedulerHeartbeat", { numberOfKeys: 3, lua: HEARTBEAT });
    redis.defineCommand("schedulerLift", { numberOfKeys: 4, lua: LIFT });
  }
  const slowMemoryMs = options.slowMemoryMs ?? 600_000;
  const memberOf = (input: { jobId: string; webhookId: string; accountId: string }) => `${input.jobId}|${input.webhookId}|${input.accountId}`;
  return {
    async admit(input) {
      const now = Date.now();
      const [admitted, reason, retryAt] = await redis.schedulerAdmit(
        k("active"),
        k("accounts"),
        k("slow"),
        k("capacity-sum"),
        k(`rate:${input.webhookId}`),
        k(`turn:${input.jobId}`),
        k("rate-limited"),
        k("reserved"),
        k("hooks"),
        now,
        memberOf(input),
        input.webhookId,
        input.accountId,
        options.maxAttemptMs,
        options.localConcurrency,
        input.rateLimit ? rateIntervalMs(input.rateLimit) : 0,
        holdDelayMs(input.holds),
        k("webhooks:"),
        holdDelayMs(input.holds, true),
        options.slowAttemptMs,
      );
      if (admitted === 1) return { admitted: true };
      return { admitted: false, reason: reason as HoldReason, retryAt: Number(retryAt) };
    },
    async release(input) {
      const slowUntil = input.durationMs > options.slowAttemptMs ? Date.now() + slowMemoryMs : 0;
      const woken = await redis.schedulerRelease(k("active"), k("accounts"), k("slow"), k("hooks"), memberOf(input), input.webhookId, input.accountId, slowUntil, k("webhooks:"));
      // A held job that is no longer delayed (it asked again meanwhile) cannot be promoted.
      for (const jobId of woken ?? []) await options.promote?.(jobId).catch(() => undefined);
    },
    heartbeat(id, ttlMs) {
      return redis.schedulerHeartbeat(k("workers"), k("capacities"), k("capacity-sum"), Date.now(), id, options.localConcurrency, ttlMs);
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
        const jobs = await redis.schedulerLift(k(`rate:${webhookId}`), k(`webhooks:rate-waiting:${webhookId}`), k("rate-limited"), k("webhooks:rate-interval"), webhookId, k("turn:"));
        for (const jobId of jobs) await options.promote?.(jobId).catch(() => undefined);
        lifted++;
      }
      return lifted;
    },
    async slowWebhooks() {
      return redis.zrangebyscore(k("slow"), Date.now(), "+inf");
    },
    async state() {
      const now = Date.now();
      const [running, capacity, slow, limited, reserved] = await Promise.all([
        redis.zcard(k("active")),
        redis.get(k("capacity-sum")),
        redis.zcount(k("slow"), now, "+inf"),
        redis.zcount(k("rate-limited"), now, "+inf"),
        redis.zcount(k("reserved"), now, "+inf"),
      ]);
      return { running, capacity: Number(capacity ?? 0), slowWebhooks: slow, rateLimitedWebhooks: limited, waitingForRateLimit: reserved };
    },
  };
}
