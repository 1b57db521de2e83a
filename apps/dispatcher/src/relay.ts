import type pg from "pg";
import { startListener } from "@mailhooks/db";
import type { Logger } from "@mailhooks/logger";
import { OUTBOX_CHANNEL, relayOutbox, type OutboxRow } from "@mailhooks/delivery-state";
import type { DeliveryQueue } from "@mailhooks/queue";
import type { DispatcherMetrics } from "./metrics.js";

/**
 * The outbox relay (STYLE.md habit 11): moves what requests committed into BullMQ. It wakes at
 * once on the outbox trigger's NOTIFY for its own QUEUE_PREFIX (a dedicated LISTEN connection,
 * opened again when it drops) and also polls every `pollIntervalMs`, so nothing waits long for a
 * notification that was missed. Batches are claimed with FOR UPDATE SKIP LOCKED: any number of
 * dispatchers relay side by side, each row once. While Redis is unreachable a batch rolls back
 * and is tried again with a growing pause (up to 5 s); nothing is lost.
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
  logger: Logger;
  metrics: DispatcherMetrics;
}

export interface Relay {
  /** Makes the relay look at the outbox now. */
  wake: () => void;
  /** Stops after the batch in progress. */
  close: () => Promise<void>;
}

export function startRelay(options: RelayOptions): Relay {
  const batchSize = options.batchSize ?? 500;
  let stopped = false;
  let pending = true;
  let wakeUp: (() => void) | null = null;
  const wake = () => {
    pending = true;
    wakeUp?.();
  };

  /** Adds a claimed batch; rows no worker could run are logged and dropped with the batch. */
  const push = async (rows: OutboxRow[]) => {
    const now = Date.now();
    const jobs = rows.flatMap((row) => {
      try {
        return [options.queue.toBulkJob(row, now)];
      } catch (error) {
        options.logger.error("outbox row cannot be queued; dropped", { outboxId: row.id, jobName: row.jobName, jobId: row.jobId, error: (error as Error).message });
        options.metrics.jobsFailed.inc({ job: row.jobName, reason: "invalid_outbox_row" });
        return [];
      }
    });
    await options.queue.addJobs(jobs);
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
      try {
        for (;;) {
          const relayed = await relayOutbox(options.pool, options.queuePrefix, batchSize, push);
          if (relayed > 0) options.metrics.relayed.inc(relayed);
          if (relayed < batchSize || stopped) break;
        }
        failures = 0;
      } catch (error) {
        failures++;
        if (failures === 1 || failures % 20 === 0) options.logger.warn("outbox relay failed; retrying", { error: (error as Error).message, failures });
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
    close: async () => {
      stopped = true;
      wakeUp?.();
      await loop;
      await listener.close();
    },
  };
}
