import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Queue } from "bullmq";
import { apiConfigSchema, loadConfig, secretKeysOf } from "@mailhooks/config";
import { createKeyring, parseKeys } from "@mailhooks/secrets";
import { createDatabase, type Database } from "@mailhooks/db";
import { createRedisConnection, QUEUE_NAMES, type RedisClient } from "@mailhooks/queue";
import { createApp } from "../../apps/api/src/app.js";
import { startKeyAccess } from "../../apps/api/src/key-access.js";
import { callApi } from "../support/api-call.js";
import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";
import { createHook, deliveryRows, emailArrivals, expectError, startHookReceiver } from "../support/hooks.js";
import { testDatabaseUrl, testRedisUrl } from "../support/env.js";
import { databaseUrlVia, killAll, removeMaintenanceQueue, startDispatcher, waitForOutput } from "./support/processes.js";
import { startTcpProxy, type TcpProxy } from "./support/tcp-proxy.js";

/**
 * Issue 4, item 8 (PostgreSQL): PostgreSQL unreachable for a while, with a delivery under way.
 *
 * A dispatcher and an API reach PostgreSQL through a TCP proxy the test cuts for OUTAGE_MS, right
 * while the receiver holds its answer to retry 1. The dispatcher gets the 2xx but cannot record
 * it; it must neither crash nor count the attempt: the job is postponed without consuming an
 * attempt and, once PostgreSQL is back, retry 1 is made again (so the receiver sees it twice:
 * at-least-once) and recorded once. The deliveries log stays 0..n without gaps. The API answers
 * /readyz and ingest with 503 during the outage and recovers by itself.
 */
const RETRY_MS = 500;
const HOLD_MS = 1_000;
const OUTAGE_MS = 3_000;

describe("PostgreSQL unreachable during a delivery", () => {
  let stack: Stack;
  let proxy: TcpProxy;
  // An API whose PostgreSQL is behind the proxy.
  let proxiedDb: Database;
  let proxiedRedis: RedisClient;
  let proxiedQueue: Queue;
  let proxiedServer: Server;
  let proxiedKeys: ReturnType<typeof startKeyAccess>;
  let proxiedUrl: string;

  beforeAll(async () => {
    stack = await startStack({ dispatcher: false });
    const target = new URL(testDatabaseUrl());
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    const config = loadConfig(apiConfigSchema, {
      DATABASE_URL: databaseUrlVia(proxy.port),
      REDIS_URL: testRedisUrl(),
      QUEUE_PREFIX: stack.prefix,
      DATABASE_POOL_SIZE: "2",
      PORT: "0",
    });
    proxiedDb = createDatabase(config.DATABASE_URL, config.DATABASE_POOL_SIZE);
    proxiedRedis = createRedisConnection(config.REDIS_URL, "producer");
    proxiedRedis.on("error", () => undefined);
    proxiedQueue = new Queue(QUEUE_NAMES.deliveries, { connection: proxiedRedis, prefix: stack.prefix });
    proxiedKeys = startKeyAccess(proxiedDb.prisma, config.DATABASE_URL);
    proxiedServer = await new Promise((resolve) => {
      const s = createApp({
        pool: proxiedDb.pool,
        prisma: proxiedDb.prisma,
        redis: proxiedRedis,
        queue: proxiedQueue,
        config,
        keys: proxiedKeys.keys,
        keyring: createKeyring(parseKeys(secretKeysOf(config))),
      }).listen(0, "127.0.0.1", () => resolve(s));
    });
    proxiedUrl = `http://127.0.0.1:${(proxiedServer.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await killAll();
    if (stack) await removeMaintenanceQueue(stack.prefix);
    proxy?.restore();
    if (proxiedServer) await new Promise((resolve) => proxiedServer.close(resolve));
    await proxiedQueue?.close();
    await proxiedRedis?.quit().catch(() => undefined);
    await proxiedKeys?.close();
    await proxiedDb?.close();
    await proxy?.close();
    await stack?.close();
  });

  /** A call to the API behind the proxy; its answers (the 503s above all) are checked against the OpenAPI document. */
  const proxied = (method: string, path: string, body?: unknown) => callApi(proxiedUrl, stack.apiKey, method, path, body);

  test("the dispatcher survives, records no attempt it could not record, and catches up", async () => {
    let cutAt = 0;
    // Retry 1 (the second email request) is held; PostgreSQL goes away as it arrives.
    const hr = await startHookReceiver(stack, (a, nth) => {
      if (a.event === "webhook.test") return {};
      if (nth === 1) return { status: 500 };
      if (nth === 2) {
        proxy.cut();
        cutAt = Date.now();
        return { delayMs: HOLD_MS };
      }
      return {};
    });
    const hook = await createHook(stack, hr, "/outage", ["message.sent"]);
    expect((await proxied("GET", "/readyz")).status).toBe(200);

    const dispatcher = startDispatcher("dispatcher", {
      DATABASE_URL: databaseUrlVia(proxy.port),
      DATABASE_POOL_SIZE: "2",
      QUEUE_PREFIX: stack.prefix,
      DELIVERY_RETRY_DELAYS_MS: [RETRY_MS, RETRY_MS, RETRY_MS].join(","),
      DELIVERY_TIMEOUT_MS: "5000",
    });
    const posted = await stack.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(posted.status).toBe(201);
    const eventId = posted.body.event_id as string;
    const rowsOf = async () =>
      (await deliveryRows(stack, { event_id: eventId })).map((r) => [r.attempt, r.trigger, r.response_status, r.error]);

    await waitUntil(
      async () => cutAt,
      (t) => t > 0,
      30_000,
      10,
    );
    // During the outage: the API says so, and accepts nothing.
    const ready = await proxied("GET", "/readyz");
    expect(ready.status).toBe(503);
    expect(ready.body.checks).toEqual({ postgres: "unavailable", redis: "ok" });
    expectError(await proxied("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") }), 503, "unavailable");

    // Retry 1 was answered 200 during the outage; the dispatcher could not record it and
    // postponed the job (it logs so at warn level) instead of counting it.
    await hr.receiver.waitFor((a) => emailArrivals(a, "/outage").length >= 2, HOLD_MS + 2_000);
    await waitUntil(
      async () => (dispatcher.output().match(/attempt postponed/g) ?? []).length,
      (n) => n >= 2,
      OUTAGE_MS + 5_000,
    );
    expect(dispatcher.running()).toBe(true);
    expect(await rowsOf()).toEqual([[0, "initial", 500, null]]);
    expect((await stack.api("GET", `/v1/events/${eventId}`)).body.status).toBe("pending");

    // The outage lasts OUTAGE_MS (or as long as the checks above took, if longer).
    await new Promise((r) => setTimeout(r, Math.max(0, cutAt + OUTAGE_MS - Date.now())));
    expect(dispatcher.running()).toBe(true);
    proxy.restore();

    // Caught up: retry 1 made again and recorded once; no gap, no attempt counted for the
    // postponements. The receiver got retry 1 twice and knows the second one as a duplicate.
    const detail = await waitUntil(
      () => stack.api("GET", `/v1/events/${eventId}`),
      (r) => r.body.status !== "pending",
      20_000,
    );
    expect(detail.body.status).toBe("delivered");
    expect(detail.body.destinations).toEqual([{ webhook_id: hook.id, url: hook.url, status: "delivered", attempts: 2 }]);
    expect(await rowsOf()).toEqual([
      [0, "initial", 500, null],
      [1, "retry", 200, null],
    ]);
    const arrivals = emailArrivals(hr.receiver.arrivals, "/outage");
    expect(arrivals.map((a) => [a.status, a.duplicate])).toEqual([
      [500, false],
      [200, false],
      [200, true],
    ]);
    expect(new Set(arrivals.map((a) => a.body)).size).toBe(1);

    // The API is ready again and the dispatcher takes new work at once.
    await waitUntil(
      () => proxied("GET", "/readyz"),
      (r) => r.status === 200,
      10_000,
    );
    const next = await proxied("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(next.status).toBe(201);
    const nextDetail = await waitUntil(
      () => stack.api("GET", `/v1/events/${next.body.event_id}`),
      (r) => r.body.status !== "pending",
      10_000,
    );
    expect(nextDetail.body.status).toBe("delivered");
    expect(await deliveryRows(stack, { event_id: next.body.event_id })).toHaveLength(1);
    expect(dispatcher.running()).toBe(true);
  });

  test("an outage longer than DISPATCHER_MAX_POSTPONES allows: the job is given up, and the sweeper delivers the still-pending work once PostgreSQL is back", async () => {
    // Only this test's dispatcher, which postpones once at most.
    await killAll();
    let cutAt = 0;
    const hr = await startHookReceiver(stack, (a, nth) => {
      if (a.event === "webhook.test") return {};
      if (nth === 1) {
        proxy.cut();
        cutAt = Date.now();
        return { delayMs: 500 };
      }
      return {};
    });
    const acct = await stack.newAccount();
    const hook = await createHook(acct, hr, "/give-up", ["message.sent"]);
    const dispatcher = startDispatcher("dispatcher-give-up", {
      DATABASE_URL: databaseUrlVia(proxy.port),
      DATABASE_POOL_SIZE: "2",
      QUEUE_PREFIX: stack.prefix,
      DISPATCHER_MAX_POSTPONES: "1",
      SWEEP_INTERVAL_MS: "1000",
      SWEEP_AFTER_MS: "1000",
      DELIVERY_TIMEOUT_MS: "5000",
    });
    const posted = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    const eventId = posted.body.event_id as string;
    await waitUntil(
      async () => cutAt,
      (t) => t > 0,
      30_000,
      10,
    );
    // Postponed once (1 s), then given up: the job fails with its mark; the work stays pending.
    await waitForOutput(dispatcher, /postponed too often/, 15_000);
    expect((await stack.api("GET", `/v1/events/${eventId}`)).status).toBe(404); // another account's
    expect((await acct.api("GET", `/v1/events/${eventId}`)).body.status).toBe("pending");
    proxy.restore();

    const detail = await waitUntil(
      () => acct.api("GET", `/v1/events/${eventId}`),
      (r) => r.body.status !== "pending",
      20_000,
    );
    expect(detail.body.status).toBe("delivered");
    expect(detail.body.destinations).toEqual([{ webhook_id: hook.id, url: hook.url, status: "delivered", attempts: 1 }]);
    // At least once: the receiver saw the attempt that could not be recorded, and the sweeper's.
    expect(emailArrivals(hr.receiver.arrivals, "/give-up").length).toBeGreaterThanOrEqual(2);
    expect((await deliveryRows(acct, { event_id: eventId })).map((r) => [r.attempt, r.trigger, r.response_status])).toEqual([
      [0, "initial", 200],
    ]);
    expect(dispatcher.running()).toBe(true);
  });
});
