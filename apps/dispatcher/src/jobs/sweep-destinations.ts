import type { PrismaClient } from "@mailhooks/db";
import type { DeliveryQueue } from "@mailhooks/queue";

/**
 * The safety net between PostgreSQL and Redis. A destination is committed before its job is
 * queued, so an API process that dies in between leaves a pending destination without a job;
 * a Redis that lost its data (no persistence, failover) loses jobs too, retries included. This
 * finds pending destinations that are overdue (no attempt `afterMs` after creation, or no
 * attempt for longer than the longest retry delay plus the receiver's deadline and `afterMs`)
 * and whose job is gone, and queues them again at their next attempt number. The job id is the
 * destination id: a destination whose job is merely waiting in a backlog is left alone.
 * Returns how many were queued.
 */
export interface SweepOptions {
  afterMs: number;
  /** DELIVERY_RETRY_DELAYS_MS and DELIVERY_TIMEOUT_MS: how long a live job may stay silent. */
  retryDelaysMs: readonly number[];
  timeoutMs: number;
  batchSize?: number;
}

export async function sweepDestinations(prisma: PrismaClient, queue: DeliveryQueue, options: SweepOptions): Promise<number> {
  const now = Date.now();
  const created = new Date(now - options.afterMs);
  const silent = new Date(now - (Math.max(...options.retryDelaysMs) + options.timeoutMs + options.afterMs));
  const rows = await prisma.$queryRaw<{ id: string; attempts: number }[]>`
    SELECT d.id, count(x.id)::int AS attempts
      FROM destinations d
      LEFT JOIN deliveries x ON x.destination_id = d.id AND x.trigger IN ('initial', 'retry')
     WHERE d.status = 'pending' AND d.created_at < ${created}
     GROUP BY d.id, d.created_at
    HAVING count(x.id) = 0 OR max(x.created_at) < ${silent}
     ORDER BY d.created_at LIMIT ${options.batchSize ?? 1_000}`;
  let queued = 0;
  for (const { id, attempts } of rows) {
    const state = await queue.queue.getJobState(id);
    if (state === "failed") await queue.queue.remove(id);
    else if (state !== "unknown") continue;
    // Past the last retry (its job vanished before it could end the destination): one more
    // attempt is queued, which ends it either way.
    const firstAttempt = Math.min(attempts, options.retryDelaysMs.length);
    await queue.addDeliveries([{ destinationId: id, firstAttempt }]);
    queued++;
  }
  return queued;
}
