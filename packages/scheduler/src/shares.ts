import { setNewest } from "@mailhooks/bounded-map";

/**
 * One dispatcher's own bookkeeping of the share rule (admission.ts states the rule;
 * docs/scheduler.md explains it): the attempts running on its slots, by webhook and by account,
 * the slow marks it knows, and the jobs of slow webhooks it held back. In memory only: it dies
 * with the process whose attempts it counts, so nothing is left to repair after a crash. Every
 * map is bounded (a dispatcher's memory is shared by every account).
 */

/**
 * The reserve R on top of a dispatcher's `concurrency` slots, for webhooks that have had little
 * (docs/scheduler.md): an eighth, at least one. The worker runs up to concurrency + R attempts.
 */
export function reserveSlots(concurrency: number): number {
  return Math.max(1, Math.floor(concurrency / 8));
}

/**
 * The worker slots (BullMQ concurrency) of a dispatcher with `concurrency` slots: C + R slots for
 * attempts (admission never runs more), and R more that only fetch (or hold a fast webhook's job
 * waiting for a slot: admission.ts). A fetched job asks for a slot;
 * one refused goes back to the queue. Each job of a webhook at its share must be fetched and
 * refused once before a job behind it is reached, so with every attempt slot taken, the free
 * worker slots are how a newcomer's job is reached at all: with one left (25 new webhooks of one
 * account hanging, C = 16), another account's jobs waited up to 900 ms behind their refusals.
 */
export function workerSlots(concurrency: number): number {
  return concurrency + 2 * reserveSlots(concurrency);
}

/** An attempt running on this dispatcher. */
interface Running {
  webhookId: string;
  accountId: string;
  startedAt: number;
  /** It took a reserve slot (C attempts ran when it started): it counts toward its account's reserve share while it runs. */
  reserve: boolean;
}

const MAX_SLOW_MARKS = 50_000;
const MAX_HELD_PER_WEBHOOK = 128;
const MAX_HELD = 20_000;

export interface ShareLedger {
  /** Attempts running here now. */
  readonly running: number;
  /** The share rule for this dispatcher's slots; true: the attempt may take a slot. */
  hasShare(webhookId: string, accountId: string, slow: boolean): boolean;
  /** Counts an admitted attempt from `now` (ms); one that finds C running takes a reserve slot. */
  start(jobId: string, webhookId: string, accountId: string, now: number): void;
  /** The attempt of `jobId` ended (or asks again): it no longer counts. Unknown ids are ignored. */
  forget(jobId: string): void;
  /** Marked slow until after `now`, or an attempt of it here has run longer than slowAttemptMs. */
  isSlow(webhookId: string, now: number): boolean;
  /** The webhooks with an attempt running here for longer than slowAttemptMs at `now` (ms). */
  runningLong(now: number): Set<string>;
  /** When (ms) the webhook's oldest attempt running here started; undefined when none runs here. */
  oldestRunning(webhookId: string): number | undefined;
  /** Until when (ms) the webhook is marked slow here, if it is. */
  slowMark(webhookId: string): number | undefined;
  markSlow(webhookId: string, until: number): void;
  clearSlow(webhookId: string): void;
  /** Drops the slow marks that ended by `now`. */
  expireSlowMarks(now: number): void;
  /** Remembers a job of a slow webhook held back here (to the end of its webhook's line). */
  hold(webhookId: string, jobId: string): void;
  unhold(webhookId: string, jobId: string): void;
  /** Takes the held jobs of a webhook to wake, oldest first: one (for the one slot that freed), or `all`. */
  wake(webhookId: string, all: boolean): string[];
}

export function createShareLedger(options: { capacity: number; slowAttemptMs: number }): ShareLedger {
  const { capacity, slowAttemptMs } = options;
  const reserve = reserveSlots(capacity);
  const running = new Map<string, Running>();
  const byWebhook = new Map<string, Set<string>>();
  const byAccount = new Map<string, Set<string>>();
  /** Per account, its attempts running here that took a reserve slot. */
  const reserveHeld = new Map<string, number>();
  /** Per account, its webhooks with attempts running here and how many each. */
  const accountWebhooks = new Map<string, Map<string, number>>();
  /** Slow marks: webhook -> until (ms), this dispatcher's own and those learnt from Redis. */
  const slowUntil = new Map<string, number>();
  /** Jobs of slow webhooks held back here, oldest first: woken when a slot of theirs frees. */
  const held = new Map<string, Set<string>>();
  let heldCount = 0;

  const add = <K, V>(map: Map<K, Set<V>>, key: K, value: V) => {
    const set = map.get(key) ?? new Set<V>();
    set.add(value);
    map.set(key, set);
  };
  const remove = <K, V>(map: Map<K, Set<V>>, key: K, value: V) => {
    const set = map.get(key);
    if (set?.delete(value) && set.size === 0) map.delete(key);
  };
  const ledger: ShareLedger = {
    get running() {
      return running.size;
    },
    hasShare(webhookId, accountId, slow) {
      const total = running.size;
      const activeA = byAccount.get(accountId)?.size ?? 0;
      const activeW = byWebhook.get(webhookId)?.size ?? 0;
      const nAcc = accountWebhooks.size + (activeA === 0 ? 1 : 0);
      const nWh = (accountWebhooks.get(accountId)?.size ?? 0) + (activeW === 0 ? 1 : 0);
      const fairA = capacity / nAcc;
      if (slow) return total < capacity && activeA < fairA && activeW < Math.max(1, fairA / nWh);
      if (total < capacity) return true;
      if (total >= capacity + reserve) return false;
      const newcomerShare = Math.max(1, capacity / (byWebhook.size + 1));
      if (activeW >= newcomerShare) return false;
      // An account's share of the reserve counts its reserve attempts of any age: one whose new
      // webhooks all start hanging holds at most this share for their first deadline, and every
      // other account still finds the rest.
      const heldA = reserveHeld.get(accountId) ?? 0;
      const holders = reserveHeld.size + (heldA === 0 ? 1 : 0);
      return heldA < Math.max(1, reserve / (holders + 1));
    },
    start(jobId, webhookId, accountId, now) {
      ledger.unhold(webhookId, jobId);
      const inReserve = running.size >= capacity;
      if (inReserve) reserveHeld.set(accountId, (reserveHeld.get(accountId) ?? 0) + 1);
      running.set(jobId, { webhookId, accountId, startedAt: now, reserve: inReserve });
      add(byWebhook, webhookId, jobId);
      add(byAccount, accountId, jobId);
      const hooks = accountWebhooks.get(accountId) ?? new Map<string, number>();
      hooks.set(webhookId, (hooks.get(webhookId) ?? 0) + 1);
      accountWebhooks.set(accountId, hooks);
    },
    forget(jobId) {
      const r = running.get(jobId);
      if (!r) return;
      running.delete(jobId);
      if (r.reserve) {
        const heldA = reserveHeld.get(r.accountId)! - 1;
        if (heldA > 0) reserveHeld.set(r.accountId, heldA);
        else reserveHeld.delete(r.accountId);
      }
      remove(byWebhook, r.webhookId, jobId);
      remove(byAccount, r.accountId, jobId);
      const hooks = accountWebhooks.get(r.accountId)!;
      const n = hooks.get(r.webhookId)! - 1;
      if (n > 0) hooks.set(r.webhookId, n);
      else hooks.delete(r.webhookId);
      if (hooks.size === 0) accountWebhooks.delete(r.accountId);
    },
    isSlow(webhookId, now) {
      const until = slowUntil.get(webhookId);
      if (until !== undefined && until > now) return true;
      for (const jobId of byWebhook.get(webhookId) ?? []) if (running.get(jobId)!.startedAt < now - slowAttemptMs) return true;
      return false;
    },
    oldestRunning(webhookId) {
      // A Set iterates in insertion order, and attempts are started in time order: the first is the oldest.
      for (const jobId of byWebhook.get(webhookId) ?? []) return running.get(jobId)!.startedAt;
      return undefined;
    },
    runningLong(now) {
      const long = new Set<string>();
      for (const r of running.values()) if (r.startedAt < now - slowAttemptMs) long.add(r.webhookId);
      return long;
    },
    slowMark: (webhookId) => slowUntil.get(webhookId),
    markSlow(webhookId, until) {
      // The oldest marks go first when the map is full: at worst a webhook is learnt slow again.
      setNewest(slowUntil, webhookId, until, MAX_SLOW_MARKS);
    },
    clearSlow: (webhookId) => void slowUntil.delete(webhookId),
    expireSlowMarks(now) {
      for (const [webhookId, until] of slowUntil) if (until <= now) slowUntil.delete(webhookId);
    },
    hold(webhookId, jobId) {
      ledger.unhold(webhookId, jobId);
      const jobs = held.get(webhookId) ?? new Set<string>();
      if (jobs.size >= MAX_HELD_PER_WEBHOOK || heldCount >= MAX_HELD) return;
      jobs.add(jobId);
      heldCount++;
      held.set(webhookId, jobs);
    },
    unhold(webhookId, jobId) {
      const jobs = held.get(webhookId);
      if (!jobs?.delete(jobId)) return;
      heldCount--;
      if (jobs.size === 0) held.delete(webhookId);
    },
    wake(webhookId, all) {
      const jobs = held.get(webhookId);
      if (!jobs) return [];
      const woken = all ? [...jobs] : [...jobs].slice(0, 1);
      for (const jobId of woken) ledger.unhold(webhookId, jobId);
      return woken;
    },
  };
  return ledger;
}
