import type { PrismaClient } from "@mailhooks/db";
import type { DeliveryQueue } from "@mailhooks/queue";

/**
 * The safety net between PostgreSQL and Redis: a destination is committed before its job is
 * queued, so an API process that dies in between (or a Redis that lost its data) leaves a
 * pending destination without a job. This finds pending destinations that still have no attempt
 * `afterMs` after they were created and queues them again. The job id is the destination id,
 * so a destination whose job is merely waiting in a backlog is not queued twice; one whose job
 * failed for good (it never made an attempt) is queued afresh. Returns how many were queued.
 */
export async function sweepDestinations(prisma: PrismaClient, queue: DeliveryQueue, afterMs: number, batchSize = 1_000): Promise<number> {
  const cutoff = new Date(Date.now() - afterMs);
  const rows = await prisma.$queryRaw<{ id: string }[]>`
    SELECT d.id FROM destinations d
     WHERE d.status = 'pending' AND d.created_at < ${cutoff}
       AND NOT EXISTS (SELECT 1 FROM deliveries x WHERE x.destination_id = d.id)
     ORDER BY d.created_at LIMIT ${batchSize}`;
  let queued = 0;
  for (const { id } of rows) {
    const state = await queue.queue.getJobState(id);
    if (state === "failed") await queue.queue.remove(id);
    else if (state !== "unknown") continue;
    await queue.addDeliveries([{ destinationId: id }]);
    queued++;
  }
  return queued;
}
