import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";
import { createHook, emailArrivals, startHookReceiver, type HookReceiver } from "../support/hooks.js";
import { killAll, startDispatcher } from "./support/processes.js";
import { createRedisConnection } from "@mailhooks/queue";
import { startRedisServer, type RedisServer } from "@mailhooks/processes";

/**
 * The delivery core's bookkeeping survives what kills its keepers (docs/scheduler.md): a
 * dispatcher SIGKILLed while it holds a hanging webhook's attempts, then a Redis flush. The dead
 * dispatcher's leases and its slots expire within the visibility timeout
 * (DISPATCHER_VISIBILITY_TIMEOUT_MS, short here by configuration), and leases whose jobs the flush
 * lost expire the same way, so no webhook is left believing it is busy and the deployment never
 * counts more leases than its live slots: the hanging webhook's backlog goes on being attempted
 * and a healthy webhook's events keep arriving.
 */
const VISIBILITY_MS = 2_000;
/** DISPATCHER_CONCURRENCY, and the reserve of one that goes with it (an eighth, at least one). */
const SLOTS = 8;
const RESERVE = 1;

describe("scheduler bookkeeping after a SIGKILL and a Redis flush", () => {
  let redisServer: RedisServer;
  let stack: Stack;
  let hr: HookReceiver;
  /** Requests the hanging endpoint has received (and holds). */
  let hangStarts = 0;

  beforeAll(async () => {
    redisServer = await startRedisServer({ appendOnly: true });
    stack = await startStack({ env: { REDIS_URL: redisServer.url }, dispatcher: false });
    hr = await startHookReceiver(stack, (a) => {
      if (a.event === "webhook.test" || a.path !== "/hang") return {};
      hangStarts++;
      return { delayMs: 60_000 };
    });
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
      DISPATCHER_CONCURRENCY: String(SLOTS),
      DISPATCHER_VISIBILITY_TIMEOUT_MS: String(VISIBILITY_MS),
      DELIVERY_TIMEOUT_MS: "2000",
      DELIVERY_RETRY_DELAYS_MS: "200,200,200",
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
    /** Live leases of the deployment: what it believes runs. */
    const leases = async () =>
      (
        await stack.pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM work_items WHERE queue_prefix = $1 AND leased_until > now()`,
          [stack.prefix],
        )
      ).rows[0].n;
    const healthyArrives = async () => {
      const data = sampleData("message.delivered");
      expect((await stack.api("POST", "/v1/events", { event_type: "message.delivered", data })).status).toBe(201);
      await hr.receiver.waitFor((all) => emailArrivals(all, "/healthy").some((a) => a.messageId === data.messageId), 20_000);
    };

    // A dispatcher takes the hanging webhook's work (every slot of it, alone) and hangs on it.
    const first = startDispatcher("dispatcher-1", env);
    await waitUntil(leases, (n) => n >= SLOTS, 30_000);
    await waitUntil(
      async () => hangStarts,
      (n) => n >= SLOTS,
      10_000,
    );
    first.child.kill("SIGKILL");
    const killedAt = Date.now();

    // Its replacement: the dead one's leases expire and its work is claimed again; both webhooks go on.
    startDispatcher("dispatcher-2", env);
    await healthyArrives();
    const before = await attemptsOfHanging();
    await waitUntil(attemptsOfHanging, (n) => n >= before + SLOTS, 60_000);
    // The dead dispatcher's slots are gone with its heartbeat: the leases are the live one's at most.
    expect(await leases()).toBeLessThanOrEqual(SLOTS + RESERVE);
    expect(Date.now() - killedAt).toBeLessThan(60_000);

    // Redis loses everything: the jobs claimed and not yet run. Their leases expire, the work is
    // claimed again, and both webhooks go on.
    const admin = createRedisConnection(redisServer.url, "worker");
    await admin.flushall();
    await admin.quit();
    await healthyArrives();
    const afterFlush = await attemptsOfHanging();
    await waitUntil(attemptsOfHanging, (n) => n >= afterFlush + SLOTS, 60_000);
    expect(await leases()).toBeLessThanOrEqual(SLOTS + RESERVE);
    await stack.api("DELETE", `/v1/webhooks/${hanging.id}`);
  }, 240_000);
});
