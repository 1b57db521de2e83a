/**
 * The scheduler's Lua scripts (packages/scheduler/src/admission.ts runs them; docs/scheduler.md
 * explains the rule). Each runs atomically in Redis, so that dispatchers never both take the last
 * share. Every key lives under the deployment's prefix (one hash slot on a Redis Cluster).
 */

/**
 * Lua: `forget(m)` takes the running attempt `m` ("<jobId>|<webhookId>|<accountId>") out of the
 * counts, if it is there. Needs `active`, `accounts`, `hooks` and `whPrefix` in scope.
 */
const FORGET = `
-- Per account and per webhook, the attempts running, by start time (started:a:<A>, started:w:<W>).
local function forget(m)
  if redis.call('ZREM', active, m) == 1 then
    local _, _, w, a = string.find(m, '^[^|]*|([^|]*)|([^|]*)$')
    if a then
      if redis.call('HINCRBY', accounts, a, -1) <= 0 then redis.call('HDEL', accounts, a) end
      if redis.call('HINCRBY', whPrefix .. a, w, -1) <= 0 then redis.call('HDEL', whPrefix .. a, w) end
      if redis.call('HINCRBY', hooks, w, -1) <= 0 then redis.call('HDEL', hooks, w) end
      redis.call('ZREM', whPrefix .. 'started:a:' .. a, m)
      redis.call('ZREM', whPrefix .. 'started:w:' .. w, m)
    end
  end
end
`;

/** Admits an attempt or holds it back (see admission.ts for the rule); one atomic step. */
export const ADMIT = `
local active, accounts, slowKey, capKey, rateKey, slotKey, limitedKey, reservedKey, hooks = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local now, member, W, A = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
local maxAge, localCap, interval, holdMs, whPrefix, slowHoldMs, slowMs = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9], tonumber(ARGV[10]), tonumber(ARGV[11])

${FORGET}-- Attempts of dispatchers that died mid-way stop counting; this job's own earlier entry too.
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
-- The webhooks running now, this one included if it runs: a newcomer's share is C / (N + 1).
local running = redis.call('HLEN', hooks)
local reserve = math.max(1, math.floor(capacity / 8))
local fairA = capacity / nAcc
local fairW = math.max(1, fairA / nWh)
-- Slow: marked so by an attempt that ended after slowMs, or an attempt of it running longer now.
local oldest = redis.call('ZRANGE', whPrefix .. 'started:w:' .. W, 0, 0, 'WITHSCORES')
local slow = (oldest[2] ~= nil and tonumber(oldest[2]) < now - slowMs) or redis.call('ZSCORE', slowKey, W) ~= false
-- The account's attempts that are not (yet) slow: only those keep its other webhooks from the reserve.
local quickA = redis.call('ZCOUNT', whPrefix .. 'started:a:' .. A, now - slowMs, '+inf')
local admit
if slow then admit = total < capacity - reserve and activeA < fairA and activeW < fairW
else
  admit = total < capacity - reserve
    or (activeW < math.max(1, capacity / (running + 1)) and quickA < math.max(1, capacity / (nAcc + 1)))
end
if not admit then
  -- A reserved turn that cannot be taken now is given up: turns are never used late, so that
  -- two attempts never come closer than the interval.
  redis.call('DEL', slotKey)
  redis.call('ZREM', reservedKey, member)
  redis.call('LREM', whPrefix .. 'rate-waiting:' .. W, 0, string.match(member, '^[^|]*'))
  if slow then
    -- Woken by the end of one of its webhook's attempts (RELEASE), or at the latest then.
    local heldKey = whPrefix .. 'held:' .. W
    local jobId = string.match(member, '^[^|]*')
    redis.call('LREM', heldKey, 0, jobId)
    redis.call('RPUSH', heldKey, jobId)
    redis.call('PEXPIRE', heldKey, 600000)
    return {0, 'share', now + slowHoldMs}
  end
  return {0, 'share', now + holdMs}
end

if interval > 0 then
  local slot = tonumber(redis.call('GET', slotKey) or '-1')
  if slot >= 0 and slot > now + 2 then return {0, 'rate_limit', slot} end
  if slot >= 0 then
    redis.call('DEL', slotKey)
    redis.call('ZREM', reservedKey, member)
    redis.call('LREM', whPrefix .. 'rate-waiting:' .. W, 0, string.match(member, '^[^|]*'))
  else
    local tat = tonumber(redis.call('GET', rateKey) or '0')
    if tat > now then
      local ttl = math.ceil(tat - now + interval + 60000)
      redis.call('SET', rateKey, tostring(tat + interval), 'PX', ttl)
      redis.call('SET', slotKey, tostring(tat), 'PX', ttl)
      redis.call('ZADD', limitedKey, tat + interval, W)
      redis.call('ZADD', reservedKey, tat, member)
      -- Who waits for a turn, and at which interval: a lifted or changed limit gives them back.
      local waitingKey = whPrefix .. 'rate-waiting:' .. W
      redis.call('RPUSH', waitingKey, string.match(member, '^[^|]*'))
      redis.call('PEXPIRE', waitingKey, ttl)
      redis.call('HSET', whPrefix .. 'rate-interval', W, tostring(interval))
      return {0, 'rate_limit', math.ceil(tat)}
    end
    redis.call('SET', rateKey, tostring(now + interval), 'PX', math.ceil(interval + 60000))
  end
end

redis.call('ZADD', active, now, member)
redis.call('HINCRBY', accounts, A, 1)
redis.call('HINCRBY', whKey, W, 1)
redis.call('HINCRBY', hooks, W, 1)
redis.call('ZADD', whPrefix .. 'started:a:' .. A, now, member)
redis.call('ZADD', whPrefix .. 'started:w:' .. W, now, member)
return {1}
`;

/** An admitted attempt ended: frees its slot, marks or clears its webhook slow, wakes held jobs. */
export const RELEASE = `
local active, accounts, slowKey, hooks = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local member, W, A, slowUntil, whPrefix = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
${FORGET}
forget(member)
if slowUntil > 0 then redis.call('ZADD', slowKey, slowUntil, W) else redis.call('ZREM', slowKey, W) end
-- A slot of this webhook is free: the job of it held back longest may ask again now.
return redis.call('LPOP', whPrefix .. 'held:' .. W, 2) or {}
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

/** A dispatcher announces its slots; the sum of the live ones is the capacity C. */
export const HEARTBEAT = `
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
