import type { PrismaClient } from "@mailhooks/db";

/**
 * Retention (spec "Event record": payload retained 90 days): removes the payload of events
 * created more than `retentionDays` ago, `batchSize` rows per statement so that no transaction
 * grows with the backlog. Metadata, deliveries and audit entries stay. Returns how many
 * payloads were removed.
 */
export async function purgeExpiredPayloads(prisma: PrismaClient, retentionDays: number, batchSize = 1_000, now = new Date()): Promise<number> {
  const cutoff = new Date(now.getTime() - retentionDays * 86_400_000);
  let total = 0;
  for (;;) {
    const removed = await prisma.$executeRaw`
      UPDATE events SET payload = NULL, payload_purged_at = ${now}
       WHERE id IN (SELECT id FROM events
                     WHERE created_at < ${cutoff} AND payload IS NOT NULL
                     ORDER BY created_at LIMIT ${batchSize}
                     FOR UPDATE SKIP LOCKED)`;
    total += removed;
    if (removed < batchSize) return total;
  }
}
