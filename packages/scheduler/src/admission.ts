import type { RedisClient } from "@mailhooks/queue";

/**
 * Admission of delivery attempts (CONTRACT.md section 6, fairness; section 4, `rate_limit`;
 * docs/scheduler.md): before a job's attempt starts, the worker asks here whether its webhook may
 * take a dispatcher slot now. The state is shared by every dispatcher of a deployment, in Redis
 * (keys under the deployment's prefix, one hash slot on a Cluster), and each step is one Lua
 * script, so that two dispatchers never both take the last share.
 *
 * The rule, with C the slots of all live dispatchers and R = max(1, C/8) a reserve:
 * - a webhook takes a slot while fewer than C - R attempts run in all (work-conserving: alone, a
 *   webhook may use all of them), or while its account runs fewer than C / (accounts running)
 *   and it runs fewer than its account's share / (the account's webhooks running) (its fair
 *   share, at least one): so a webhook, or an account, that has not had its share yet always
 *   finds one, in the reserve if need be;
 * - a webhook marked slow (an attempt of it lasted longer than `slowAttemptMs`: a receiver that
 *   hangs until the deadline) gets only its fair share, and never the reserve, until one of its
 *   attempts is quick again. This bounds what hanging receivers hold: together at most C - R
 *   slots, each at most its fair share, and their retries come back under the same rule;
 * - a webhook with a `rate_limit` r is admitted at most once per 1.05 / r s (GCRA): the job whose
 *   turn is not yet due is given a reserved time and waits until then (no attempt is used).
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
   * Attempts older than this, in ms, no longer count (their dispatcher died mid-attempt): more
   * than the longest attempt (DELIVERY_TIMEOUT_MS plus the body read and the database write).
   */
  maxAttemptMs: number;
}

/** Spacing of a rate-limited webhook's attempts, in ms: 5 % above 1/r, for network jitter. */
export function rateIntervalMs(rateLimit: number): number {
  return (1000 / rateLimit) * 1.05;
}

const ADMIT = `
local active, accounts, slowKey, capKey, rateKey, slotKey, limitedKey, reservedKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local now, member, W, A = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
local maxAge, localCap, interval, holdMs, whPrefix = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9]

local function forget(m)
  if redis.call('ZREM', active, m) == 1 then
    local _, _, w, a = string.find(m, '^[^|]*|([^|]*)|([^|]*)$')
    if a then
      if redis.call('HINCRBY', accounts, a, -1) <= 0 then redis.call('HDEL', accounts, a) end
      if redis.call('HINCRBY', whPrefix .. a, w, -1) <= 0 then redis.call('HDEL', whPrefix .. a, w) end
    end
  end
end
-- Attempts of dispatchers that died mid-way stop counting; this job's own earlier entry too.
for _, m in ipairs(redis.call('ZRANGEBYSCORE', active, '-inf', now - maxAge, 'LIMIT', 0, 20)) do forget(m) end
forget(member)
redis.call('ZREMRANGEBYSCORE', slowKey, '-inf', now)
redis.call('ZREMRANGEBYSCORE', limitedKey, '-inf', now)
redis.call('ZREMRANGEBYSCORE', reservedKey, '-inf', now)

local whKey = whPrefix .. A
local capacity = tonumber(redis.call('GET', capKey) or '0')
if capacity < localCap then capacity = localCap end
local total = redis.call('ZCARD', active)
local activeA = tonumber(redis.call('HGET', accounts, A) or '0')
local activeW = tonumber(redis.call('HGET', whKey, W) or '0')
local nAcc = redis.call('HLEN', accounts)
if activeA == 0 then nAcc = nAcc + 1 end
local nWh = redis.call('HLEN', whKey)
if activeW == 0 then nWh = nWh + 1 end
local reserve = math.max(1, math.floor(capacity / 8))
local fairA = capacity / nAcc
local fairW = math.max(1, fairA / nWh)
local belowShare = activeA < fairA and activeW < fairW
local slow = redis.call('ZSCORE', slowKey, W) ~= false
local admit
if slow then admit = belowShare and total < capacity - reserve
else admit = total < capacity - reserve or belowShare end
if not admit then
  -- A reserved turn that cannot be taken now is given up: turns are never used late, so that
  -- two attempts never come closer than the interval.
  redis.call('DEL', slotKey)
  redis.call('ZREM', reservedKey, member)
  return {0, 'share', now + holdMs}
end

if interval > 0 then
  local slot = tonumber(redis.call('GET', slotKey) or '-1')
  if slot >= 0 and slot > now + 2 then return {0, 'rate_limit', slot} end
  if slot >= 0 then
    redis.call('DEL', slotKey)
    redis.call('ZREM', reservedKey, member)
  else
    local tat = tonumber(redis.call('GET', rateKey) or '0')
    if tat > now then
      local ttl = math.ceil(tat - now + interval + 60000)
      redis.call('SET', rateKey, tostring(tat + interval), 'PX', ttl)
      redis.call('SET', slotKey, tostring(tat), 'PX', ttl)
      redis.call('ZADD', limitedKey, tat + interval, W)
      redis.call('ZADD', reservedKey, tat, member)
      return {0, 'rate_limit', math.ceil(tat)}
    end
    redis.call('SET', rateKey, tostring(now + interval), 'PX', math.ceil(interval + 60000))
  end
end

redis.call('ZADD', active, now, member)
redis.call('HINCRBY', accounts, A, 1)
redis.call('HINCRBY', whKey, W, 1)
return {1}
`;

const RELEASE = `
local active, accounts, slowKey = KEYS[1], KEYS[2], KEYS[3]
local member, W, A, slowUntil, whPrefix = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
if redis.call('ZREM', active, member) == 1 then
  if redis.call('HINCRBY', accounts, A, -1) <= 0 then redis.call('HDEL', accounts, A) end
  if redis.call('HINCRBY', whPrefix .. A, W, -1) <= 0 then redis.call('HDEL', whPrefix .. A, W) end
end
if slowUntil > 0 then redis.call('ZADD', slowKey, slowUntil, W) else redis.call('ZREM', slowKey, W) end
return 1
`;

const HEARTBEAT = `
local workers, capacities, capKey = KEYS[1], KEYS[2], KEYS[3]
local now, id, concurrency, ttl = tonumber(ARGV[1]), ARGV[2], ARGV[3], tonumber(ARGV[4])
redis.call('ZADD', workers, now + ttl, id)
redis.call('HSET', capacities, id, concurrency)
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', workers, '-inf', now)) do redis.call('HDEL', capacities, gone) end
redis.call('ZREMRANGEBYSCORE', workers, '-inf', now)
local sum = 0
for _, c in ipairs(redis.call('HVALS', capacities)) do sum = sum + tonumber(c) end
redis.call('SET', capKey, sum, 'PX', ttl)
redis.call('PEXPIRE', workers, ttl)
redis.call('PEXPIRE', capacities, ttl)
return sum
`;

type Scripted = RedisClient & {
  schedulerAdmit(...args: (string | number)[]): Promise<[number, string?, number?]>;
  schedulerRelease(...args: (string | number)[]): Promise<number>;
  schedulerHeartbeat(...args: (string | number)[]): Promise<number>;
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
  /** Tells the others that this dispatcher (`id`) lives with its slots, for `ttlMs`. */
  heartbeat(id: string, ttlMs: number): Promise<number>;
  state(): Promise<AdmissionState>;
}

/** How long a job held back for its share waits before it asks again, in ms: 100 ms doubling to 2 s (5 s when slow). */
export function holdDelayMs(holds: number): number {
  return Math.min(2_000, 100 * 2 ** Math.min(5, Math.max(0, holds)));
}

export function createAdmissionControl(options: AdmissionOptions): AdmissionControl {
  const redis = options.redis as Scripted;
  const k = (name: string) => `${options.keyPrefix}:sched:${name}`;
  if (typeof redis.schedulerAdmit !== "function") {
    redis.defineCommand("schedulerAdmit", { numberOfKeys: 8, lua: ADMIT });
    redis.defineCommand("schedulerRelease", { numberOfKeys: 3, lua: RELEASE });
    redis.defineCommand("schedulerHeartbeat", { numberOfKeys: 3, lua: HEARTBEAT });
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
        now,
        memberOf(input),
        input.webhookId,
        input.accountId,
        options.maxAttemptMs,
        options.localConcurrency,
        input.rateLimit ? rateIntervalMs(input.rateLimit) : 0,
        holdDelayMs(input.holds),
        k("webhooks:"),
      );
      if (admitted === 1) return { admitted: true };
      return { admitted: false, reason: reason as HoldReason, retryAt: Number(retryAt) };
    },
    async release(input) {
      const slowUntil = input.durationMs > options.slowAttemptMs ? Date.now() + slowMemoryMs : 0;
      await redis.schedulerRelease(k("active"), k("accounts"), k("slow"), memberOf(input), input.webhookId, input.accountId, slowUntil, k("webhooks:"));
    },
    heartbeat(id, ttlMs) {
      return redis.schedulerHeartbeat(k("workers"), k("capacities"), k("capacity-sum"), Date.now(), id, options.localConcurrency, ttlMs);
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
