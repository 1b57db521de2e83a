import type pg from "pg";
import type { DispatcherConfig } from "@mailhooks/config";
import { startListener } from "@mailhooks/db";
import type { Logger } from "@mailhooks/logger";
import {
  claimWork,
  failWithoutAttempt,
  forgetDispatcher,
  heartbeat,
  publishNotices,
  releaseWork,
  WORK_CHANNEL,
  type ClaimPass,
  type LeasedWork,
} from "@mailhooks/delivery-state";
import { DeliveryAddError, type ClaimedWork, type DeliveryQueue } from "@mailhooks/queue";
import type { DispatcherMetrics } from "./metrics.js";

/**
 * How long a claim may wait for the deployment's claim lock or hold it, in ms (its
 * lock_timeout, statement_timeout and idle_in_transaction_session_timeout). A claim takes
 * milliseconds on a working database; a relay whose process froze mid-claim holds the other
 * relays back this long at most, since PostgreSQL then ends its session and the lock with it.
 */
export const CLAIM_TIMEOUT_MS = 5_000;

/** What a notification names instead of a webhook when notices were written (the notices_notify trigger). */
const NOTICES_PAYLOAD = "!notices";

/** The longest pause between two tries after a claim or a push failed, in ms. */
const MAX_BACKOFF_MS = 5_000;

export interface RelayOptions {
  pool: pg.Pool;
  databaseUrl: string;
  queue: DeliveryQueue;
  queuePrefix: string;
  /** This dispatcher: its id, its slots (DISPATCHER_CONCURRENCY) and reserve slots (reserveSlots). */
  dispatcherId: string;
  slots: number;
  reserve: number;
  /** DISPATCHER_VISIBILITY_TIMEOUT_MS: the heartbeat renews leases every third of it. */
  visibilityTimeoutMs: number;
  /** The leases of the work this dispatcher's worker runs now (the heartbeat renews them). */
  running: () => LeasedWork[];
  logger: Logger;
  metrics: DispatcherMetrics;
}

export interface Relay {
  /** Makes the relay claim now. */
  wake: () => void;
  /**
   * An attempt ended here, so room freed: the relay claims now if its last pass left work waiting
   * for room (or one in progress does); otherwise nothing waits for that room.
   */
  ended: () => void;
  /**
   * Claims nothing more and takes this dispatcher's slots out of the deployment's, but goes on
   * renewing the leases of what the worker still runs (a shutdown's drain).
   */
  drain: () => void;
  /** Stops after the pass in progress and forgets this dispatcher. */
  close: () => Promise<void>;
}

/**
 * The relay of one dispatcher (docs/scheduler.md): the loop that claims work and hands it to the
 * deliveries queue. A pass runs the claim (@mailhooks/delivery-state claimWork: the one decision,
 * under the deployment's claim lock), then adds one job per claimed unit of work to its lane, after
 * the claim committed and without waiting for Redis before the next pass; should Redis refuse them,
 * their leases are given back at once. The relay passes again
 * as soon as something may have changed: work notified on WORK_CHANNEL (a LISTEN connection of its
 * own, which reconnects by itself; after each reconnection every webhook with waiting work is looked
 * for, since notifications were lost meanwhile), work ended on this dispatcher while the last
 * claim left due work without room (`ended`), or the
 * time the last claim named (a retry or a rate_limit turn coming due, a lease expiring). Notices
 * (operational events to make, notified on the same channel) are made into events first. Its
 * heartbeat (this dispatcher's slots, and the leases of what its worker runs) is sent at least
 * every third of the visibility timeout, from the same loop.
 */
export function startRelay(options: RelayOptions): Relay {
  const notified = new Set<string>();
  let rediscover = true;
  /** Notices (operational events to make) were written: make their events before the next claim. */
  let notices = true;
  /** The last push failed: claim nothing more until Redis answers again (others claim meanwhile). */
  let redisFailed = false;
  let stopped = false;
  let wanted = true;
  let wakeUp: (() => void) | null = null;
  let draining = false;
  const wake = () => {
    wanted = true;
    wakeUp?.();
  };
  /** The last pass left due work without room; and whether an attempt ended during the pass in progress. */
  let waiting = true;
  let endedDuringPass = false;
  const beatEveryMs = options.visibilityTimeoutMs / 3;
  const dispatcher = {
    id: options.dispatcherId,
    queuePrefix: options.queuePrefix,
    slots: options.slots,
    reserve: options.reserve,
    visibilityTimeoutMs: options.visibilityTimeoutMs,
  };
  let lastBeat = -Infinity;

  /** Adds of claimed work still on their way to Redis. */
  const adding = new Set<Promise<void>>();
  /**
   * Adds the jobs of claimed work without holding the next pass back (the claim has committed:
   * nothing of the pass waits for Redis). Should Redis refuse them, their leases are given back at
   * once and the relay passes again, first waiting for Redis to answer.
   */
  const push = (work: ClaimedWork[]) => {
    const added = options.queue.add(work).then(
      () => void options.metrics.claimed.inc(work.length),
      async (error: Error) => {
        redisFailed = true;
        const notAdded = error instanceof DeliveryAddError ? [...error.notAdded] : work;
        options.logger.warn("could not queue claimed work; its leases are given back", { error: error.message, units: notAdded.length });
        await releaseWork(options.pool, notAdded).catch((release: Error) =>
          options.logger.warn("could not give claimed work back; its leases expire", { error: release.message }),
        );
        wake();
      },
    );
    adding.add(added);
    void added.finally(() => adding.delete(added));
  };

  /** One pass: claim, push, end what kept killing its holders. Throws what the claim threw. */
  const pass = async (): Promise<ClaimPass> => {
    if (draining || performance.now() - lastBeat >= beatEveryMs) {
      await heartbeat(options.pool, draining ? { ...dispatcher, slots: 0, reserve: 0 } : dispatcher, options.running());
      lastBeat = performance.now();
    }
    if (draining) return { claimed: [], poisoned: [], nextInMs: null, more: false, waiting: false };
    if (notices) {
      // One batch per pass, so that a backlog of notices neither holds the claim back nor outlasts
      // the heartbeat; a failure leaves them for the next pass and does not stop the claim.
      notices = false;
      try {
        const published = await publishNotices(options.pool, options.queuePrefix);
        for (const [kind, count] of Object.entries(published.made)) options.metrics.operationalEvents.inc({ kind }, count);
        if (published.more) {
          notices = true;
          wanted = true;
        }
      } catch (error) {
        notices = true;
        options.logger.warn("could not make operational events of notices; the next pass tries again", { error: (error as Error).message });
      }
    }
    // Before the notified webhooks are taken: a ping that throws leaves them for the next pass.
    if (redisFailed) {
      await options.queue.ping();
      redisFailed = false;
    }
    const heard = [...notified];
    notified.clear();
    const again = rediscover;
    rediscover = false;
    let claimed: ClaimPass;
    try {
      claimed = await claimWork(options.pool, {
        queuePrefix: options.queuePrefix,
        notified: heard,
        rediscover: again,
        visibilityTimeoutMs: options.visibilityTimeoutMs,
        lockTimeoutMs: CLAIM_TIMEOUT_MS,
      });
    } catch (error) {
      for (const id of heard) notified.add(id);
      rediscover ||= again;
      throw error;
    }
    if (claimed.claimed.length > 0) push(claimed.claimed);
    for (const work of claimed.poisoned) {
      options.logger.error("work whose leases kept expiring (it kills its dispatchers) ended failed", work);
      options.metrics.jobsFailed.inc({ job: work.kind, reason: "expired" });
      await failWithoutAttempt(options.pool, work.kind, work.workId);
    }
    return claimed;
  };

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        wakeUp = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      wakeUp = done;
    });

  const loop = (async () => {
    let failures = 0;
    while (!stopped) {
      wanted = false;
      let pauseMs: number;
      try {
        endedDuringPass = false;
        const result = await pass();
        failures = 0;
        waiting = result.waiting;
        if (result.more || (waiting && endedDuringPass)) wanted = true;
        pauseMs = Math.min(result.nextInMs ?? Infinity, lastBeat + beatEveryMs - performance.now());
      } catch (error) {
        failures++;
        if (failures === 1 || failures % 20 === 0)
          options.logger.warn("relay pass failed; trying again", { error: (error as Error).message, failures });
        pauseMs = Math.min(MAX_BACKOFF_MS, 50 * 2 ** failures);
      }
      if (!wanted && !stopped) await sleep(Math.max(0, pauseMs));
    }
  })();

  const listener = startListener({
    databaseUrl: options.databaseUrl,
    channels: [WORK_CHANNEL],
    onNotification: (_channel, payload) => {
      const space = payload.indexOf(" ");
      if (space < 0 || payload.slice(0, space) !== options.queuePrefix) return;
      const subject = payload.slice(space + 1);
      if (subject === NOTICES_PAYLOAD) notices = true;
      else notified.add(subject);
      wake();
    },
    onConnect: () => {
      rediscover = true;
      notices = true;
      wake();
    },
  });

  return {
    wake,
    ended: () => {
      endedDuringPass = true;
      if (waiting) wake();
    },
    drain: () => {
      draining = true;
      wake();
    },
    close: async () => {
      stopped = true;
      wakeUp?.();
      await loop;
      await Promise.all(adding);
      await listener.close();
      await forgetDispatcher(options.pool, options.dispatcherId).catch(() => undefined);
    },
  };
}

/**
 * The relay of a dispatcher configured by `config` (apps/dispatcher/src/main.ts, and the tests'
 * in-process dispatchers): which settings feed it is written here once.
 */
export function startConfiguredRelay(
  config: DispatcherConfig,
  wiring: Pick<RelayOptions, "pool" | "queue" | "dispatcherId" | "running" | "logger" | "metrics"> & { queuePrefix?: string },
): Relay {
  return startRelay({
    ...wiring,
    databaseUrl: config.DATABASE_URL,
    queuePrefix: wiring.queuePrefix ?? config.QUEUE_PREFIX,
    slots: config.DISPATCHER_CONCURRENCY,
    reserve: reserveSlots(config.DISPATCHER_CONCURRENCY),
    visibilityTimeoutMs: config.DISPATCHER_VISIBILITY_TIMEOUT_MS,
  });
}

/**
 * The reserve slots of a dispatcher with `slots` slots: an eighth of them, at least one, run by a
 * worker of their own beside the slots' (a lane of their own); the reserve goes only to webhooks
 * holding nothing (@mailhooks/scheduler decide), so that their first attempt never waits for the others'.
 */
export function reserveSlots(slots: number): number {
  return Math.max(1, Math.floor(slots / 8));
}
