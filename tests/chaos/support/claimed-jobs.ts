import { randomUUID } from "node:crypto";
import { claimWork, forgetDispatcher, heartbeat } from "@mailhooks/delivery-state";
import { createRedisConnection, DeliveryQueue, type ClaimedWork } from "@mailhooks/queue";
import { waitUntil } from "../../support/stack.js";

/** What claimIntoQueue needs of a stack (tests/support/stack.ts) or of anything like it. */
export interface Deployment {
  pool: Parameters<typeof claimWork>[0];
  /** QUEUE_PREFIX: its rows in PostgreSQL. */
  prefix: string;
  /** Its keys' prefix in Redis. */
  keyPrefix: string;
}

/**
 * A relay without a worker, for tests that need claimed work in Redis that nobody runs (what
 * every relay leaves there between its claim and its worker's fetch): it joins the deployment as a
 * dispatcher with `slots` slots (heartbeat), claims with the product's own claim (claimWork: the
 * one decision, every webhook with waiting work in the round) until `count` units are claimed, and
 * adds their jobs to the deliveries queue of `redisUrl`, as apps/dispatcher/src/relay.ts does once
 * its claim has committed. It then leaves the deployment (its slots go at once); the leases it took
 * stay live for `visibilityTimeoutMs`, renewed by nobody.
 * @returns the units of work claimed, with their leases (the jobs' ids are `<workId>-<lease>`)
 * @throws when `count` units were not claimed within 10 s
 */
export async function claimIntoQueue(
  deployment: Deployment,
  options: { count: number; visibilityTimeoutMs: number; redisUrl: string; slots?: number },
): Promise<ClaimedWork[]> {
  const dispatcher = {
    id: `test-relay-only-${randomUUID()}`,
    queuePrefix: deployment.prefix,
    slots: options.slots ?? 16,
    reserve: 0,
    visibilityTimeoutMs: options.visibilityTimeoutMs,
  };
  const connection = createRedisConnection(options.redisUrl, "producer");
  connection.on("error", () => undefined);
  const queue = new DeliveryQueue(connection, deployment.keyPrefix);
  const claimed: ClaimedWork[] = [];
  try {
    await waitUntil(
      async () => {
        await heartbeat(deployment.pool, dispatcher, []);
        const pass = await claimWork(deployment.pool, {
          queuePrefix: deployment.prefix,
          notified: [],
          rediscover: true,
          visibilityTimeoutMs: options.visibilityTimeoutMs,
          lockTimeoutMs: 5_000,
        });
        await queue.add(pass.claimed);
        claimed.push(...pass.claimed);
        return claimed.length;
      },
      (n) => n >= options.count,
      10_000,
    );
    return claimed;
  } finally {
    await forgetDispatcher(deployment.pool, dispatcher.id);
    await queue.close();
    await connection.quit().catch(() => connection.disconnect());
  }
}
