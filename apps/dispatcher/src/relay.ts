import type pg from "pg";
import type { DispatcherConfig } from "@mailhooks/config";
import { startListener } from "@mailhooks/db";
import type { Logger } from "@mailhooks/logger";
import { OUTBOX_CHANNEL, relayOutbox, type OutboxRow, type RejectedRow, type WebhookClasses } from "@mailhooks/delivery-state";
import type { DeliveryQueue } from "@mailhooks/queue";
import type { DispatcherMetrics } from "./metrics.js";

/**
 * The least time, in ms, from the start of a relay pass to one woken by room (Relay.room: a
 * lease ended on this dispatcher while the relay held work back). New work
 * (OUTBOX_CHANNEL) wakes the relay at once. Room comes with nearly every batch of attempts: for a
 * fast webhook that is hundreds of passes a second of a few jobs each, while its queue (up to
 * fastWebhookJobLimit jobs) loses a few dozen jobs in these 20 ms.
 */
export const RELAY_ROOM_WAKE_MS = 20;
/**
 * How long, in ms, a relay reuses the scheduler's slow and fast marks (`webhookClasses`) instead of
 * asking Redis again before a pass: asking costs a round trip on an event's way (at most 20 a
 * second this way), and a webhook new to a burst holds only the job limit (16) until the relay
 * sees its fast mark, made within its first 8 quick attempts: with 250 ms, a quick run's burst and
 * fan-out lost 3 to 14 % to that wait (bench/README.md).
 */
export const RELAY_CLASSES_MAX_AGE_MS = 50;

/**
 * The outbox relay (CONTRIBUTING.md, Habits 10): moves what requests committed into BullMQ. It wakes at
 * once on the outbox trigger's NOTIFY for its own QUEUE_PREFIX (a dedicated LISTEN connection,
 * opened again when it drops) and also polls every `pollIntervalMs`, so nothing waits long for a
 * notification that was missed. Batches are claimed with FOR UPDATE SKIP LOCKED: any number of
 * dispatchers relay side by side, each row once. The relay is the first half of the fair
 * scheduler (docs/scheduler.md): a webhook gets at most its job limit in the queue (`webhookJobLimit`, more when fast), the
 * rest of its work waits in the outbox, and its jobs are added in turns with every other
 * webhook's (their position is their priority). A lease ended by this dispatcher wakes the relay
 * too when its last pass held work back (`room`, at most every RELAY_ROOM_WAKE_MS): in process,
 * not by a notification, and without looking at the outbox for each ended lease (endLeasesCte of
 * @mailhooks/delivery-state says why). While Redis is unreachable a batch rolls back
 * and is tried again with a growing pause (up to 5 s); nothing is lost.
 *
 * A claimed batch holds its rows' locks in an open transaction while Redis is asked, so that
 * wait is bounded twice: `pushTimeoutMs` here (besides the command timeout of the relay's Redis
 * connection), and, should this process freeze or its host die, PostgreSQL itself ends the
 * transaction after `lockTimeoutMs` idle (idle_in_transaction_session_timeout): either way the
 * rows go back to the other relays. A row no worker could run (invalid data, an unknown job name)
 * is not queued: its work is ended `failed` in the same transaction, logged with the row's id and
 * counted (webhook_jobs_failed_total{reason="invalid_outbox_row"}).
 */
export interface RelayOptions {
  pool: pg.Pool;
  databaseUrl: string;
  queue: DeliveryQueue;
  queuePrefix: string;
  /** How often to look for rows without a notification, in ms. */
  pollIntervalMs: number;
  /** Rows per claim (one addBulk each). */
  batchSize?: number;
  /** Jobs one webhook may hold in the queue (DISPATCHER_WEBHOOK_JOB_LIMIT); the rest waits in the outbox. */
  webhookJobLimit: number;
  /**
   * The webhooks the scheduler marked fast now (they get a larger job limit) and slow (not
   * larger, even when marked fast too); none when absent. Read at most every RELAY_CLASSES_MAX_AGE_MS.
   */
  webhookClasses?: () => Promise<WebhookClasses>;
  /** How long adding a batch to Redis may take before it is rolled back, in ms
   * (RELAY_PUSH_TIMEOUT_MS; a healthy Redis takes milliseconds). */
  pushTimeoutMs: number;
  /** How long a claimed batch may hold its row locks before PostgreSQL ends the transaction, in ms
   * (RELAY_LOCK_TIMEOUT_MS, greater than pushTimeoutMs). */
  lockTimeoutMs: number;
  logger: Logger;
  metrics: DispatcherMetrics;
}

export interface Relay {
  /** Makes the relay look at the outbox now. */
  wake: () => void;
  /**
   * Says that leases ended: when the last pass held work back (a webhook at its job limit with more
   * waiting), the relay looks again within RELAY_ROOM_WAKE_MS; else this costs nothing.
   */
  room: () => void;
  /** Stops after the batch in progress. */
  close: () => Promise<void>;
}

export function startRelay(options: RelayOptions): Relay {
  const batchSize = options.batchSize ?? 500;
  const { pushTimeoutMs, lockTimeoutMs } = options;
  let stopped = false;
  let pending = true;
  let wakeUp: (() => void) | null = null;
  const wake = () => {
    pending = true;
    wakeUp?.();
  };
  let classesRead: { at: number; classes: WebhookClasses } | null = null;
  /** The slow and fast marks, read again when older than RELAY_CLASSES_MAX_AGE_MS; none while Redis fails. */
  const currentClasses = async (): Promise<WebhookClasses> => {
    if (!options.webhookClasses) return { slow: [], fast: [] };
    if (classesRead && Date.now() - classesRead.at < RELAY_CLASSES_MAX_AGE_MS) return classesRead.classes;
    const classes = await options.webhookClasses().catch(() => undefined);
    if (!classes) return { slow: [], fast: [] };
    classesRead = { at: Date.now(), classes };
    return classes;
  };
  let passStartedAt = 0;
  let roomTimer: NodeJS.Timeout | undefined;
  /**
   * Whether the last pass left a webhook's work waiting for room (RelayPass.heldBack): only then
   * is an ended lease worth a pass. True until a pass says otherwise. Ends of leases heard during
   * a pass are kept for its end, since that pass may be the one that finds work held back.
   */
  let heldBack = true;
  let passing = false;
  let roomDuringPass = false;
  /** Wakes the relay for room: at once when the last pass started RELAY_ROOM_WAKE_MS ago or more, else then. */
  const wakeForRoom = () => {
    if (roomTimer) return;
    const wait = passStartedAt + RELAY_ROOM_WAKE_MS - Date.now();
    if (wait <= 0) return wake();
    roomTimer = setTimeout(() => {
      roomTimer = undefined;
      wake();
    }, wait);
  };

  /** Adds a claimed batch within pushTimeoutMs; returns the rows no worker could run. */
  const push = async (rows: OutboxRow[]): Promise<RejectedRow[]> => {
    const now = Date.now();
    const rejected: RejectedRow[] = [];
    const jobs = rows.flatMap((row) => {
      try {
        return [options.queue.toBulkJob(row, now)];
      } catch (error) {
        rejected.push({ row, reason: (error as Error).message });
        return [];
      }
    });
    await withTimeout(options.queue.addJobs(jobs), pushTimeoutMs, "Redis did not take the relayed batch in time");
    return rejected;
  };

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        wakeUp = null;
        resolve();
      }, ms);
      wakeUp = () => {
        clearTimeout(timer);
        wakeUp = null;
        resolve();
      };
    });

  const loop = (async () => {
    let failures = 0;
    while (!stopped) {
      pending = false;
      passStartedAt = Date.now();
      passing = true;
      roomDuringPass = false;
      try {
        for (;;) {
          const classes = await currentClasses();
          const {
            claimed,
            rejected,
            heldBack: leftWaiting,
          } = await relayOutbox(options.pool, options.queuePrefix, batchSize, push, { lockTimeoutMs }, options.webhookJobLimit, classes);
          for (const { row, reason } of rejected) {
            options.logger.error("outbox row cannot be queued; its work ended failed", {
              outboxId: row.id,
              jobName: row.jobName,
              jobId: row.jobId,
              error: reason,
            });
            options.metrics.jobsFailed.inc({ job: row.jobName, reason: "invalid_outbox_row" });
          }
          if (claimed > rejected.length) options.metrics.relayed.inc(claimed - rejected.length);
          heldBack = leftWaiting;
          if (claimed < batchSize || stopped) break;
        }
        failures = 0;
        passing = false;
        if (roomDuringPass && heldBack) wakeForRoom();
      } catch (error) {
        heldBack = true;
        passing = false;
        failures++;
        if (failures === 1 || failures % 20 === 0)
          options.logger.warn("outbox relay failed; retrying", { error: (error as Error).message, failures });
        await sleep(Math.min(5_000, 100 * 2 ** failures));
        continue;
      }
      if (!pending && !stopped) await sleep(options.pollIntervalMs);
    }
  })();

  // The LISTEN connection: any notification for this prefix wakes the loop; notifications sent
  // while it was not listening are gone, so it looks at the outbox each time it (re)connects.
  const listener = startListener({
    databaseUrl: options.databaseUrl,
    channels: [OUTBOX_CHANNEL],
    onNotification: (_channel, payload) => {
      if (payload === options.queuePrefix) wake();
    },
    onConnect: wake,
  });

  return {
    wake,
    room: () => {
      if (passing) roomDuringPass = true;
      else if (heldBack) wakeForRoom();
    },
    close: async () => {
      stopped = true;
      clearTimeout(roomTimer);
      wakeUp?.();
      await loop;
      await listener.close();
    },
  };
}

/**
 * The relay of a dispatcher configured by `config` (apps/dispatcher/src/main.ts, and the tests'
 * in-process dispatchers): which settings feed it (DATABASE_URL, QUEUE_PREFIX unless
 * `wiring.queuePrefix` names another, RELAY_POLL_INTERVAL_MS, RELAY_PUSH_TIMEOUT_MS,
 * RELAY_LOCK_TIMEOUT_MS, DISPATCHER_WEBHOOK_JOB_LIMIT) is written here once.
 */
export function startConfiguredRelay(
  config: DispatcherConfig,
  wiring: Pick<RelayOptions, "pool" | "queue" | "webhookClasses" | "logger" | "metrics"> & { queuePrefix?: string },
): Relay {
  return startRelay({
    ...wiring,
    databaseUrl: config.DATABASE_URL,
    queuePrefix: wiring.queuePrefix ?? config.QUEUE_PREFIX,
    pollIntervalMs: config.RELAY_POLL_INTERVAL_MS,
    pushTimeoutMs: config.RELAY_PUSH_TIMEOUT_MS,
    lockTimeoutMs: config.RELAY_LOCK_TIMEOUT_MS,
    webhookJobLimit: config.DISPATCHER_WEBHOOK_JOB_LIMIT,
  });
}

/** `promise`, or a rejection with `message` after `ms`. */
function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${message} (${ms} ms)`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
