import type pg from "pg";
import { pendingWorkAfter, requeueWork, type PendingWork, type WorkKind } from "@mailhooks/delivery-state";
import type { DeliveryQueue, RedisClient } from "@mailhooks/queue";
import { POSTPONED_MARK } from "../worker.js";

/**
 * The safety net between PostgreSQL and Redis: finds pending work of this deployment whose job
 * is gone (Redis flushed, failed over, evicted, restarted without persistence) or was given up
 * after an outage (POSTPONED_MARK), and puts it back in the outbox at the right attempt number
 * and due time (a destination lost mid-retry resumes at its next retry, due its retry delay
 * after the last recorded attempt). Each kind is walked in keyset order from a cursor kept in
 * Redis, `batchSize` rows per run, wrapping around at the end, so a backlog of live jobs never
 * hides a lost one. Returns how many were queued again.
 */
export interface SweepOptions {
  pool: pg.Pool;
  redis: RedisClient;
  queue: DeliveryQueue;
  queuePrefix: string;
  retryDelaysMs: readonly number[];
  /** Rows younger than this (ms) are left to the relay. */
  afterMs: number;
  batchSize?: number;
}

const KINDS: WorkKind[] = ["delivery", "replay", "test-delivery"];

export async function sweepLostWork(options: SweepOptions): Promise<number> {
  let queued = 0;
  for (const kind of KINDS) queued += await sweepKind(options, kind);
  return queued;
}

async function sweepKind(options: SweepOptions, kind: WorkKind): Promise<number> {
  const batchSize = options.batchSize ?? 1_000;
  const cursorKey = options.queue.queue.toKey(`sweep-cursor:${kind}`);
  const cursor = (await options.redis.get(cursorKey)) ?? "";
  const rows = await pendingWorkAfter(options.pool, kind, options.queuePrefix, cursor, new Date(Date.now() - options.afterMs), batchSize);
  const lost = await lostOnes(options, rows);
  const jobs = lost.map((row) => ({ id: row.id, data: jobData(options, kind, row) }));
  const queued = await requeueWork(options.pool, kind, options.queuePrefix, jobs);
  // A full batch goes on from its last row next time; a short one means the end: start over.
  await options.redis.set(cursorKey, rows.length === batchSize ? rows[rows.length - 1].id : "");
  return queued;
}

/** The rows whose job does not exist, or failed with POSTPONED_MARK (that job is removed). */
async function lostOnes(options: SweepOptions, rows: PendingWork[]): Promise<PendingWork[]> {
  if (rows.length === 0) return [];
  const pipeline = options.redis.pipeline();
  for (const row of rows) pipeline.hget(options.queue.queue.toKey(row.id), "failedReason").exists(options.queue.queue.toKey(row.id));
  const replies = (await pipeline.exec()) ?? [];
  const lost: PendingWork[] = [];
  for (const [i, row] of rows.entries()) {
    const [failedErr, failedReason] = replies[2 * i] ?? [];
    const [existsErr, exists] = replies[2 * i + 1] ?? [];
    if (failedErr || existsErr) continue;
    if (exists === 0) lost.push(row);
    else if (typeof failedReason === "string" && failedReason.startsWith(POSTPONED_MARK)) {
      await options.queue.queue.remove(row.id);
      lost.push(row);
    }
  }
  return lost;
}

function jobData(options: SweepOptions, kind: WorkKind, row: PendingWork): Record<string, unknown> {
  if (kind === "replay") return { replayId: row.id };
  if (kind === "test-delivery") return { testDeliveryId: row.id };
  // Past the last retry (its job vanished before it could end the destination): one more
  // attempt is queued, which ends it either way.
  const firstAttempt = Math.min(row.attempts, options.retryDelaysMs.length);
  const delay = row.attempts > 0 ? options.retryDelaysMs[row.attempts - 1] : undefined;
  const notBefore = row.lastAttemptAt && delay !== undefined ? row.lastAttemptAt.getTime() + delay : undefined;
  return { destinationId: row.id, ...(firstAttempt > 0 ? { firstAttempt } : {}), ...(notBefore ? { notBefore } : {}) };
}
