import type pg from "pg";
import {
  decideAfterAttempt,
  failWithoutAttempt,
  lastAttempt,
  pendingWorkAfter,
  requeueWork,
  type PendingWork,
  type WorkKind,
} from "@mailhooks/delivery-state";
import { WORK_JOB_NAMES, workJobData, type DeliveryQueue, type RedisClient } from "@mailhooks/queue";
import { POSTPONED_TOO_OFTEN } from "../worker.js";

/**
 * The safety net between PostgreSQL and Redis: finds pending work of this deployment whose job
 * is gone (Redis flushed, failed over, evicted, restarted without persistence) or was given up
 * after an outage (its data says POSTPONED_TOO_OFTEN), and puts it back in the outbox at the right attempt number
 * and due time (a destination lost mid-retry resumes at its next retry, due its retry delay
 * after the last recorded attempt). Pending work whose job failed for good (any other failed
 * job: a poison job whose worker could not end its work) is ended `failed`, never sent again.
 * Each kind is walked in keyset order from a cursor kept in Redis, `batchSize` rows at a time,
 * wrapping around at the end, so a backlog of live jobs never hides a lost one: one batch per
 * kind per run, or, with `timeBudgetMs`, batch after batch (the kinds in turn) until every kind
 * reached its end or the budget is spent. A kind that fails does not stop the others. Returns
 * how many were queued again.
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
  /** How long a run may go on taking further batches, in ms (0 or absent: one batch per kind). */
  timeBudgetMs?: number;
  /** Told of a kind whose batch failed (the run goes on with the others); without it, the run
   * throws the first such error once every kind was tried. */
  onKindError?: (kind: WorkKind, error: unknown) => void;
  /** Told of the work ended `failed` because its job had failed for good. */
  onEnded?: (kind: WorkKind, ids: string[]) => void;
}

export async function sweepLostWork(options: SweepOptions): Promise<number> {
  const deadline = Date.now() + (options.timeBudgetMs ?? 0);
  let queued = 0;
  let firstError: { error: unknown } | null = null;
  let open = [...WORK_JOB_NAMES];
  do {
    const next: WorkKind[] = [];
    for (const kind of open) {
      try {
        const batch = await sweepBatch(options, kind);
        queued += batch.queued;
        if (!batch.atEnd) next.push(kind);
      } catch (error) {
        if (options.onKindError) options.onKindError(kind, error);
        else firstError ??= { error };
      }
    }
    open = next;
  } while (open.length > 0 && Date.now() < deadline);
  if (firstError) throw firstError.error;
  return queued;
}

/** One batch of `kind` from its cursor; `atEnd` when it reached the last row (the cursor starts over). */
async function sweepBatch(options: SweepOptions, kind: WorkKind): Promise<{ queued: number; atEnd: boolean }> {
  const batchSize = options.batchSize ?? 1_000;
  const cursorKey = options.queue.queue.toKey(`sweep-cursor:${kind}`);
  const cursor = (await options.redis.get(cursorKey)) ?? "";
  const rows = await pendingWorkAfter(options.pool, kind, options.queuePrefix, cursor, new Date(Date.now() - options.afterMs), batchSize);
  const { lost, failedForGood } = await sortOut(options, rows);
  for (const row of failedForGood) await failWithoutAttempt(options.pool, kind, row.id);
  if (failedForGood.length > 0)
    options.onEnded?.(
      kind,
      failedForGood.map((row) => row.id),
    );
  const jobs = lost.map((row) => ({ id: row.id, data: jobData(options, kind, row) }));
  const queued = await requeueWork(options.pool, kind, options.queuePrefix, jobs);
  // A full batch goes on from its last row next time; a short one means the end: start over.
  const atEnd = rows.length < batchSize;
  await options.redis.set(cursorKey, atEnd ? "" : rows[rows.length - 1].id);
  return { queued, atEnd };
}

/**
 * Sorts pending rows by their job: none (lost), given up as POSTPONED_TOO_OFTEN (lost too: that job
 * is removed), failed otherwise (failed for good: BullMQ never runs it again, so its work must
 * end), or alive (waiting, delayed, active: left alone).
 */
async function sortOut(options: SweepOptions, rows: PendingWork[]): Promise<{ lost: PendingWork[]; failedForGood: PendingWork[] }> {
  const lost: PendingWork[] = [];
  const failedForGood: PendingWork[] = [];
  if (rows.length === 0) return { lost, failedForGood };
  const failedKey = options.queue.queue.keys.failed;
  const pipeline = options.redis.pipeline();
  for (const row of rows)
    pipeline.exists(options.queue.queue.toKey(row.id)).zscore(failedKey, row.id).hget(options.queue.queue.toKey(row.id), "data");
  const replies = (await pipeline.exec()) ?? [];
  for (const [i, row] of rows.entries()) {
    const [[existsErr, exists] = [], [failedErr, failedScore] = [], [dataErr, data] = []] = replies.slice(3 * i, 3 * i + 3);
    if (existsErr || failedErr || dataErr) continue;
    if (exists === 0) lost.push(row);
    else if (failedScore === null || failedScore === undefined) continue;
    else if (gaveUpOf(data) === POSTPONED_TOO_OFTEN) {
      await options.queue.queue.remove(row.id);
      lost.push(row);
    } else failedForGood.push(row);
  }
  return { lost, failedForGood };
}

/** The `gaveUp` field of a job's data as Redis holds it (JSON), if any. */
function gaveUpOf(data: unknown): unknown {
  if (typeof data !== "string") return undefined;
  try {
    return (JSON.parse(data) as { gaveUp?: unknown } | null)?.gaveUp;
  } catch {
    return undefined;
  }
}

/**
 * The data of the job that resumes `row`: its work's id and, for work with attempts recorded (a
 * destination lost mid-retry), the attempt that follows the last recorded one and when it is due
 * (decideAfterAttempt: the failed attempt's end plus its retry delay). Work past its last retry
 * (its job vanished before it could end it) gets one more attempt, at the last attempt's number:
 * that attempt is recorded already, so it is not sent again and its outcome ends the work.
 */
function jobData(options: SweepOptions, kind: WorkKind, row: PendingWork): Record<string, unknown> {
  const data = workJobData(kind, row.id);
  if (row.attempts === 0) return data;
  // Still pending: its last recorded attempt did not deliver it.
  const next = decideAfterAttempt(options.retryDelaysMs, row.attempts - 1, "failed", row.lastAttemptAt ?? new Date(0));
  if (next.next === "retry") return { ...data, firstAttempt: next.attempt, ...(row.lastAttemptAt ? { notBefore: next.at.getTime() } : {}) };
  const last = lastAttempt(options.retryDelaysMs);
  return last > 0 ? { ...data, firstAttempt: last } : data;
}
