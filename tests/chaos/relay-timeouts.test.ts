import { Queue } from "bullmq";
import type { Redis } from "ioredis";
import { createRedisConnection, QUEUE_NAMES } from "@mailhooks/queue";
import { verify } from "@mailhooks/verify";
import { testRedisUrl } from "../support/env.js";
import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";
import { at, createHook, deliveryRows, emailArrivals, startHookReceiver, type CreatedHook, type HookReceiver } from "../support/hooks.js";
import { killAll, removeMaintenanceQueue, startDispatcher, type ServiceProcess } from "./support/processes.js";
import { startTcpProxy, type TcpProxy } from "./support/tcp-proxy.js";

/**
 * The outbox relay claims rows with FOR UPDATE and holds their locks in an open transaction
 * while it adds their jobs to Redis. That wait is bounded: when the relay's Redis stops
 * answering (a frozen server, a half-open link), the relay gives up the batch (its Redis
 * commands time out) and rolls back; when the relay itself stops (its process frozen, its host
 * gone), PostgreSQL ends its transaction (idle_in_transaction_session_timeout). Either way the
 * rows go back to the other dispatchers' relays and the work arrives, signed, once.
 *
 * Dispatcher A reaches Redis through a TCP proxy that the test freezes (connections stay open,
 * nothing passes); dispatcher B reaches it directly. Both have short relay timeouts, by
 * configuration: RELAY_PUSH_TIMEOUT_MS (10 s by default) and RELAY_LOCK_TIMEOUT_MS (15 s).
 */
const EVENTS = 3;
const PUSH_TIMEOUT_MS = 2_000;
const LOCK_TIMEOUT_MS = 3_000;
/** RELAY_LOCK_TIMEOUT_MS and some room for a busy machine. */
const LOCK_BOUND_MS = LOCK_TIMEOUT_MS + 15_000;

describe("a relay holding claimed outbox rows", () => {
  let stack: Stack;
  let proxy: TcpProxy;
  let redis: Redis;
  let deliveries: Queue;
  beforeAll(async () => {
    stack = await startStack({ dispatcher: false });
    const direct = new URL(testRedisUrl());
    proxy = await startTcpProxy({ host: direct.hostname, port: Number(direct.port || 6379) });
    redis = createRedisConnection(testRedisUrl(), "worker") as Redis;
    deliveries = new Queue(QUEUE_NAMES.deliveries, { connection: redis, prefix: stack.prefix });
  });
  afterAll(async () => {
    await killAll();
    await proxy?.close();
    if (stack) await removeMaintenanceQueue(stack.prefix);
    await deliveries?.close();
    await redis?.quit().catch(() => undefined);
    await stack?.close();
  });

  const env = (redisUrl: string) => ({
    QUEUE_PREFIX: stack.prefix,
    REDIS_URL: redisUrl,
    RELAY_POLL_INTERVAL_MS: "50",
    RELAY_PUSH_TIMEOUT_MS: String(PUSH_TIMEOUT_MS),
    RELAY_LOCK_TIMEOUT_MS: String(LOCK_TIMEOUT_MS),
    // A job a frozen dispatcher was running is taken over within seconds, not 15 s.
    DISPATCHER_LOCK_DURATION_MS: "2000",
    DISPATCHER_STALLED_INTERVAL_MS: "1000",
  });
  const viaProxy = () => `redis://127.0.0.1:${proxy.port}`;

  /** Outbox rows of the stack, and how many of them no transaction holds locked. */
  async function outboxRows(): Promise<{ total: number; free: number }> {
    const client = await stack.pool.connect();
    try {
      await client.query("BEGIN");
      const total = (await client.query("SELECT count(*)::int AS n FROM outbox WHERE queue_prefix = $1", [stack.prefix])).rows[0]
        .n as number;
      // FOR KEY SHARE conflicts with the relay's FOR UPDATE only; SKIP LOCKED counts what is free.
      const free = (
        await client.query("SELECT count(*)::int AS n FROM (SELECT id FROM outbox WHERE queue_prefix = $1 FOR KEY SHARE SKIP LOCKED) x", [
          stack.prefix,
        ])
      ).rows[0].n as number;
      return { total, free };
    } finally {
      await client.query("ROLLBACK").catch(() => undefined);
      client.release();
    }
  }

  /** Starts dispatcher A behind the proxy and waits until it delivered a new hook's test event. */
  async function startA(
    name: string,
    path: string,
  ): Promise<{ a: ServiceProcess; hr: HookReceiver; hook: CreatedHook; acct: Awaited<ReturnType<Stack["newAccount"]>> }> {
    proxy.thaw();
    const a = startDispatcher(name, env(viaProxy()));
    const acct = await stack.newAccount();
    const hr = await startHookReceiver(stack);
    const hook = await createHook(acct, hr, path, ["message.sent"]);
    await hr.receiver.waitFor((all) => at(all, path, "webhook.test").length === 1, 30_000);
    return { a, hr, hook, acct };
  }

  /** Freezes A's link to Redis, posts EVENTS events, and waits until A holds all their rows locked. */
  async function postWhileFrozen(acct: Awaited<ReturnType<Stack["newAccount"]>>): Promise<string[]> {
    proxy.freeze();
    // One request, one transaction: A claims the rows in one batch.
    const events = Array.from({ length: EVENTS }, () => ({ event_type: "message.sent", data: sampleData("message.sent") }));
    const posted = await acct.api("POST", "/v1/events/batch", { events });
    expect(posted.status).toBe(201);
    const eventIds = (posted.body.data as { event_id: string }[]).map((e) => e.event_id);
    await waitUntil(outboxRows, (r) => r.total === EVENTS && r.free === 0, 10_000, 20);
    return eventIds;
  }

  async function expectDeliveredOnce(
    acct: Awaited<ReturnType<Stack["newAccount"]>>,
    hr: HookReceiver,
    hook: CreatedHook,
    path: string,
    eventIds: string[],
  ) {
    const arrivals = emailArrivals(hr.receiver.arrivals, path);
    expect(arrivals).toHaveLength(EVENTS);
    for (const arrival of arrivals)
      expect(
        verify(hook.secret, { "x-service-timestamp": arrival.timestamp, "x-service-signature": arrival.signature }, arrival.body, {
          now: new Date(arrival.receivedAt),
        }),
      ).toEqual(JSON.parse(arrival.body));
    for (const eventId of eventIds) {
      const detail = await waitUntil(
        () => acct.api("GET", `/v1/events/${eventId}`),
        (r) => r.body.status !== "pending",
        10_000,
      );
      expect(detail.body.destinations).toEqual([{ webhook_id: hook.id, url: hook.url, status: "delivered", attempts: 1 }]);
      expect((await deliveryRows(acct, { event_id: eventId })).map((r) => [r.trigger, r.attempt, r.response_status])).toEqual([
        ["initial", 0, 200],
      ]);
    }
    expect(await outboxRows()).toEqual({ total: 0, free: 0 });
  }

  test("whose Redis stops answering lets them go: another dispatcher relays them while the link stays frozen", async () => {
    const { a, hr, hook, acct } = await startA("dispatcher-a", "/frozen-redis");
    const eventIds = await postWhileFrozen(acct);
    const frozenAt = Date.now();
    // B, on a working link, is kept out only as long as A holds the rows.
    startDispatcher("dispatcher-b", env(testRedisUrl()));
    await hr.receiver.waitFor((all) => emailArrivals(all, "/frozen-redis").length >= EVENTS, LOCK_BOUND_MS);
    console.log(`relayed by the other dispatcher ${Date.now() - frozenAt} ms after A's Redis froze`);
    await expectDeliveredOnce(acct, hr, hook, "/frozen-redis", eventIds);
    expect(a.running()).toBe(true);
  }, 90_000);

  test("whose process stops mid-batch (its host gone) loses them to PostgreSQL's timeout: another dispatcher relays them", async () => {
    await killAll();
    const { a, hr, hook, acct } = await startA("dispatcher-a2", "/frozen-relay");
    const eventIds = await postWhileFrozen(acct);
    // A stops dead while its transaction holds the rows: none of its own timers can fire now.
    a.child.kill("SIGSTOP");
    const stoppedAt = Date.now();
    expect((await outboxRows()).free).toBe(0);
    startDispatcher("dispatcher-b2", env(testRedisUrl()));
    await hr.receiver.waitFor((all) => emailArrivals(all, "/frozen-relay").length >= EVENTS, LOCK_BOUND_MS);
    console.log(`relayed by the other dispatcher ${Date.now() - stoppedAt} ms after A stopped`);
    await expectDeliveredOnce(acct, hr, hook, "/frozen-relay", eventIds);
    await waitUntil(
      () => deliveries.getJobCounts("wait", "prioritized", "delayed", "active"),
      (c) => c.wait + c.prioritized + c.delayed + c.active === 0,
      10_000,
    );
  }, 90_000);
});
