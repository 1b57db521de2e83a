/**
 * The scheduler's Lua scripts for what must be shared by every dispatcher of a deployment: the
 * `rate_limit` turns (docs/api.md, "Webhooks"; packages/scheduler/src/admission.ts runs them,
 * docs/scheduler.md explains the rule). Each runs atomically in Redis, so that two dispatchers
 * never take the same turn. Every key lives under the deployment's prefix (one hash slot on a
 * Redis Cluster). Shares of the slots are not here: each dispatcher counts its own, in memory.
 */

/**
 * Gives job ARGV[2] of webhook ARGV[3] its rate_limit turn (GCRA, one turn per ARGV[4] ms):
 * returns {1} when its turn is now, or {0, 'rate_limit', at} with the time of the turn reserved
 * for it (asked again before then, it gets the same turn).
 */
export const RATE_TURN = `
local rateKey, slotKey, limitedKey, reservedKey, waitingKey, intervals = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local now, jobId, W, interval = tonumber(ARGV[1]), ARGV[2], ARGV[3], tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', limitedKey, '-inf', now)
redis.call('ZREMRANGEBYSCORE', reservedKey, '-inf', now)
local slot = tonumber(redis.call('GET', slotKey) or '-1')
if slot >= 0 and slot > now + 2 then return {0, 'rate_limit', slot} end
if slot >= 0 then
  redis.call('DEL', slotKey)
  redis.call('ZREM', reservedKey, jobId)
  redis.call('LREM', waitingKey, 0, jobId)
  return {1}
end
local tat = tonumber(redis.call('GET', rateKey) or '0')
if tat > now then
  local ttl = math.ceil(tat - now + interval + 60000)
  redis.call('SET', rateKey, tostring(tat + interval), 'PX', ttl)
  redis.call('SET', slotKey, tostring(tat), 'PX', ttl)
  redis.call('ZADD', limitedKey, tat + interval, W)
  redis.call('ZADD', reservedKey, tat, jobId)
  -- Who waits for a turn, and at which interval: a lifted or changed limit gives them back.
  redis.call('RPUSH', waitingKey, jobId)
  redis.call('PEXPIRE', waitingKey, ttl)
  redis.call('HSET', intervals, W, tostring(interval))
  return {0, 'rate_limit', math.ceil(tat)}
end
redis.call('SET', rateKey, tostring(now + interval), 'PX', math.ceil(interval + 60000))
return {1}
`;

/**
 * Job ARGV[1] gives up the turn reserved for it (its share held it back when the turn came):
 * turns are never used late, so that two attempts never come closer than the interval.
 */
export const FORFEIT_TURN = `
local slotKey, reservedKey, waitingKey = KEYS[1], KEYS[2], KEYS[3]
if redis.call('DEL', slotKey) == 1 then
  redis.call('ZREM', reservedKey, ARGV[1])
  redis.call('LREM', waitingKey, 0, ARGV[1])
end
return 0
`;

/** Drops a webhook's rate_limit turns and returns its waiting jobs (the limit was lifted or changed). */
export const LIFT = `
local rateKey, waitingKey, limitedKey, intervals = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local W, turnPrefix = ARGV[1], ARGV[2]
local jobs = redis.call('LRANGE', waitingKey, 0, -1)
for _, jobId in ipairs(jobs) do redis.call('DEL', turnPrefix .. jobId) end
redis.call('DEL', rateKey, waitingKey)
redis.call('ZREM', limitedKey, W)
redis.call('HDEL', intervals, W)
return jobs
`;
