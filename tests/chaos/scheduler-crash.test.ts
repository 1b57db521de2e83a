import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";
import { createHook, emailArrivals, startHookReceiver, type HookReceiver } from "../support/hooks.js";
import { killAll, startDispatcher } from "./support/processes.js";
import { createRedisConnection } from "@mailhooks/queue";
import { startRedisServer, type RedisServer } from "@mailhooks/processes";

/**
 * The fair scheduler's bookkeeping survives what kills its keepers (docs/scheduler.md): a
 * dispatcher SIGKILLed while it holds a hanging webhook's attempts, then a Redis flush. Leases
 * (PostgreSQL) and running attempts (Redis) of the dead are let go within
 * DISPATCHER_LOCK_DURATION_MS plus the stalled check (or the flush drops them), so no webhook is
 * left believing it is busy: the hanging webhook's backlog goes on being attempted and a healthy
 * webhook's events keep arriving.
 */
const LOCK_MS = 2_000;
const STALLED_MS = 1_000;

describe("scheduler bookkeeping after a SIGKILL and a Redis flush", () => {
  let redisServer: RedisServer;
  let stack: Stack;
  let hr: HookReceiver;

  beforeAll(async () => {
    redisServer = await startRedisServer({ appendOnly: true });
    stack = await startStack({ env: { REDIS_URL: redisServer.url }, dispatcher: false });
    hr = await startHookReceiver(stack, (a) => (a.event !== "webhook.test" && a.path === "/hang" ? { delayMs: 60_000 } : {}));
  }, 60_000);
  afterAll(async () => {
    await killAll();
    await stack?.close();
    await hr?.receiver.close().catch(() => undefined);
    await redisServer?.destroy();
  });

  test("every webhook's work goes on", async () => {
    const env = {
      REDIS_URL: redisServer.url,
      QUEUE_PREFIX: stack.prefix,
      DISPATCHER_CONCURRENCY: "8",
      DISPATCHER_WEBHOOK_JOB_LIMIT: "8",
      DISPATCHER_LOCK_DURATION_MS: String(LOCK_MS),
      DISPATCHER_STALLED_INTERVAL_MS: String(STALLED_MS),
      DELIVERY_TIMEOUT_MS: "2000",
      DELIVERY_RETRY_DELAYS_MS: "200,200,200",
      SWEEP_INTERVAL_MS: "1000",
      SWEEP_AFTER_MS: "1000",
      WEBHOOK_AUTO_DISABLE_AFTER_HOURS: "0",
    };
    const hanging = await createHook(stack, hr, "/hang", ["message.sent"]);
    await createHook(stack, hr, "/healthy", ["message.delivered"]);
    const batch = Array.from({ length: 200 }, () => ({ event_type: "message.sent", data: sampleData("message.sent") }));
    expect((await stack.api("POST", "/v1/events/batch", { events: batch })).status).toBe(201);

    const attemptsOfHanging = async () =>
      (
        await stack.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM deliveries WHERE webhook_id = $1 AND trigger <> 'test'`, [
          hanging.id,
        ])
      ).rows[0].n;
    const leases = async () =>
      (await stack.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_leases WHERE queue_prefix = $1`, [stack.prefix]))
        .rows[0].n;
    const healthyArrives = async () => {
      const data = sampleData("message.delivered");
      expect((await stack.api("POST", "/v1/events", { event_type: "message.delivered", data })).status).toBe(201);
      await hr.receiver.waitFor((all) => emailArrivals(all, "/healthy").some((a) => a.messageId === data.messageId), 20_000);
    };

    // A dispatcher takes the hanging webhook's jobs (its job limit of them) and hangs on them.
    const first = startDispatcher("dispatcher-1", env);
    await waitUntil(leases, (n) => n >= 8, 30_000);
    await new Promise((r) => setTimeout(r, 500));
    first.child.kill("SIGKILL");
    const killedAt = Date.now();

    // Its replacement: the dead one's jobs come back after their locks expire; the webhook's work goes on.
    startDispatcher("dispatcher-2", env);
    await healthyArrives();
    const before = await attemptsOfHanging();
    await waitUntil(attemptsOfHanging, (n) => n >= before + 8, 60_000);
    expect(await leases()).toBeLessThanOrEqual(8 + 2);
    expect(Date.now() - killedAt).toBeLessThan(60_000);

    // Redis loses everything: jobs, slow marks, rate_limit turns. The leases of the lost
    // jobs are dropped, the sweeper queues the work again, and both webhooks go on.
    const admin = createRedisConnection(redisServer.url, "worker");
    await admin.flushall();
    await admin.quit();
    await healthyArrives();
    const afterFlush = await attemptsOfHanging();
    await waitUntil(attemptsOfHanging, (n) => n >= afterFlush + 8, 60_000);
    expect(await leases()).toBeLessThanOrEqual(8 + 2);
    await stack.api("DELETE", `/v1/webhooks/${hanging.id}`);
  }, 240_000);
});
