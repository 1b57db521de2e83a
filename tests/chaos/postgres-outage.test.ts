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
 * Issue 4, item 8 (PostgreSQL), and issue 33, item 4 ("a result is never re-sent because only its
 * record failed"): PostgreSQL unreachable for a while, with deliveries under way.
 *
 * A dispatcher and an API reach PostgreSQL through a TCP proxy the test cuts. In the first test
 * the cut comes while the receiver holds its answer to retry 1: the dispatcher gets the 2xx but
 * cannot record it. It must neither crash nor send the attempt again: it keeps the outcome and
 * writes it once PostgreSQL is back (the attempt's lease, renewed by its dispatcher's heartbeat,
 * outlives an outage shorter than the visibility timeout). The receiver gets retry 1 once, the
 * deliveries log has it once, without gaps. (Before the delivery core, the job was postponed and
 * retry 1 made again after the outage: the receiver got it twice.) The API answers /readyz and
 * ingest with 503 during the outage and recovers by itself.
 *
 * In the second test the outage outlasts the visibility timeout, with an attempt in flight, a
 * retry coming due and an event accepted meanwhile (by an API whose link was not cut): nothing is
 * lost, and each is delivered once when PostgreSQL is back.
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

  test("a 2xx answered while PostgreSQL is cut off is kept and recorded once it is back, never sent again; the dispatcher survives", async () => {
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

    // Retry 1 was answered 200 during the outage; the dispatcher could not record it, and keeps
    // its outcome (it logs so at warn level) instead of making the attempt again.
    await hr.receiver.waitFor((a) => emailArrivals(a, "/outage").length >= 2, HOLD_MS + 2_000);
    await waitForOutput(dispatcher, /could not record an attempt; its outcome is kept/, OUTAGE_MS + 5_000);
    expect(dispatcher.running()).toBe(true);
    expect(await rowsOf()).toEqual([[0, "initial", 500, null]]);
    expect((await stack.api("GET", `/v1/events/${eventId}`)).body.status).toBe("pending");

    // The outage lasts OUTAGE_MS (or as long as the checks above took, if longer).
    await new Promise((r) => setTimeout(r, Math.max(0, cutAt + OUTAGE_MS - Date.now())));
    expect(dispatcher.running()).toBe(true);
    proxy.restore();

    // Caught up: retry 1 recorded once, as answered; no gap. The receiver got it once.
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
    // The work ended with that record: nothing of it is left to claim, so nothing can send it again.
    const [{ id: destinationId }] = await stack.prisma.destination.findMany({ where: { eventId }, select: { id: true } });
    expect((await stack.pool.query("SELECT count(*)::int AS n FROM work_items WHERE work_id = $1", [destinationId])).rows[0].n).toBe(0);
    const arrivals = emailArrivals(hr.receiver.arrivals, "/outage");
    expect(arrivals.map((a) => [a.status, a.duplicate])).toEqual([
      [500, false],
      [200, false],
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

  test("an outage longer than the visibility timeout: the attempt in flight, a retry that came due and an event accepted meanwhile are each delivered once when PostgreSQL is back", async () => {
    // Only this test's dispatcher.
    await killAll();
    const LONG_OUTAGE_MS = 5_000;
    const VISIBILITY_MS = 1_000;
    const LONG_RETRY_MS = 2_000;
    let cutAt = 0;
    const hr = await startHookReceiver(stack, (a, nth) => {
      if (a.event === "webhook.test") return {};
      if (a.path === "/due" && nth === 1) return { status: 500 };
      if (a.path === "/in-flight" && nth === 1) {
        proxy.cut();
        cutAt = Date.now();
        return { delayMs: 500 };
      }
      return {};
    });
    const acct = await stack.newAccount();
    const due = await createHook(acct, hr, "/due", ["message.delivered"]);
    const inFlight = await createHook(acct, hr, "/in-flight", ["message.sent"]);
    const during = await createHook(acct, hr, "/during", ["message.opened"]);
    const dispatcher = startDispatcher("dispatcher-long-outage", {
      DATABASE_URL: databaseUrlVia(proxy.port),
      DATABASE_POOL_SIZE: "2",
      QUEUE_PREFIX: stack.prefix,
      DISPATCHER_VISIBILITY_TIMEOUT_MS: String(VISIBILITY_MS),
      DELIVERY_RETRY_DELAYS_MS: [LONG_RETRY_MS, LONG_RETRY_MS, LONG_RETRY_MS].join(","),
      DELIVERY_TIMEOUT_MS: "5000",
    });
    const post = async (eventType: string) => {
      const posted = await acct.api("POST", "/v1/events", { event_type: eventType, data: sampleData(eventType) });
      expect(posted.status).toBe(201);
      return posted.body.event_id as string;
    };
    const rowsOf = async (eventId: string) =>
      (await deliveryRows(acct, { event_id: eventId })).map((r) => [r.attempt, r.trigger, r.response_status]);

    // A retry waits for its delay: the initial attempt failed and was recorded.
    const dueId = await post("message.delivered");
    await waitUntil(
      () => rowsOf(dueId),
      (rows) => rows.length === 1,
      30_000,
    );
    const failedAt = emailArrivals(hr.receiver.arrivals, "/due")[0].receivedAt;
    // An attempt in flight when PostgreSQL goes away (its answer comes during the outage).
    const inFlightId = await post("message.sent");
    await waitUntil(
      async () => cutAt,
      (t) => t > 0,
      30_000,
      10,
    );
    // Accepted during the outage, by the API whose link to PostgreSQL works.
    const duringId = await post("message.opened");
    await waitForOutput(dispatcher, /could not record an attempt; its outcome is kept/, LONG_OUTAGE_MS);
    expect(await rowsOf(inFlightId)).toEqual([]);

    // The outage outlasts the visibility timeout several times (and the retry's due time).
    await new Promise((r) => setTimeout(r, Math.max(0, cutAt + LONG_OUTAGE_MS - Date.now())));
    expect(cutAt + LONG_OUTAGE_MS).toBeGreaterThan(failedAt + LONG_RETRY_MS);
    expect(dispatcher.running()).toBe(true);
    proxy.restore();

    for (const eventId of [dueId, inFlightId, duringId]) {
      const detail = await waitUntil(
        () => acct.api("GET", `/v1/events/${eventId}`),
        (r) => r.body.status !== "pending",
        30_000,
      );
      expect(detail.body.status).toBe("delivered");
    }
    expect(await rowsOf(dueId)).toEqual([
      [0, "initial", 500],
      [1, "retry", 200],
    ]);
    expect(await rowsOf(inFlightId)).toEqual([[0, "initial", 200]]);
    expect(await rowsOf(duringId)).toEqual([[0, "initial", 200]]);
    // Nothing is left to claim, and each attempt reached its receiver once.
    expect(
      (await stack.pool.query("SELECT count(*)::int AS n FROM work_items WHERE webhook_id = ANY($1)", [[due.id, inFlight.id, during.id]]))
        .rows[0].n,
    ).toBe(0);
    expect(emailArrivals(hr.receiver.arrivals, "/due").map((a) => a.status)).toEqual([500, 200]);
    expect(emailArrivals(hr.receiver.arrivals, "/in-flight").map((a) => a.status)).toEqual([200]);
    expect(emailArrivals(hr.receiver.arrivals, "/during").map((a) => a.status)).toEqual([200]);
    expect(dispatcher.running()).toBe(true);
  });
});
