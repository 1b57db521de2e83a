import { Queue } from "bullmq";
import pg from "pg";
import { dispatcherConfigSchema, loadConfig } from "@mailhooks/config";
import { createPool, migrate, MIGRATIONS_DIR } from "@mailhooks/db";
import { createRedisConnection, QUEUE_NAMES, type RedisClient } from "@mailhooks/queue";
import { testRedisUrl } from "../support/env.js";
import { startInProcessDispatcher, type InProcessDispatcher } from "../support/delivery-worker.js";
import { createHook, deliveryRows, startHookReceiver, type HookReceiver } from "../support/hooks.js";
import { sampleData, startStack, waitUntil, type Account, type Stack } from "../support/stack.js";
import { startPrivatePostgres, type PrivatePostgres } from "./support/private-postgres.js";
import { endChaosFile, killAll, startDispatcher } from "./support/processes.js";
import { startTcpProxy, type TcpProxy } from "./support/tcp-proxy.js";
import { LOOPBACK_TARGETS } from "@mailhooks/url-policy";

/**
 * Issue 18, item 6 (crash-safe bookkeeping): the relay's commit lost in a PostgreSQL crash.
 *
 * The relay claims outbox rows (deletes them, writes one webhook_leases row per job, adds the
 * jobs to BullMQ) in a transaction that commits with `synchronous_commit = off`
 * (packages/delivery-state/src/outbox.ts). Its comment says losing that commit is harmless: the
 * rows come back and are queued again under the same job ids, a no-op for a job still in Redis,
 * and an attempt recorded for one of them would have flushed the commit first. Nothing made that
 * loss happen, so nothing checked what follows it: an attempt in flight across the crash is
 * recorded after it, by a job that is still in Redis or, with `removeOnComplete`, already gone
 * when its row is queued again.
 *
 * A private PostgreSQL (never the shared one) runs with a WAL writer that wakes every 10 s, no
 * background writer and no timed checkpoint, so that only a committing backend writes WAL; the
 * test SIGSTOPs the WAL writer, lets the relay claim an event whose first request the receiver
 * holds, then SIGKILLs a backend and the WAL writer: PostgreSQL recovers from the WAL on disk,
 * which ends before the relay's commit. The outbox row back and the lease gone after recovery
 * prove the commit really was asynchronous (with a synchronous one this precondition fails).
 * The dispatcher's link to PostgreSQL goes through a TCP proxy, cut before the crash and restored
 * when the test says, so that the test decides which comes first after recovery:
 * - the relay queues the row again while its job still runs (a no-op in Redis), then the attempt
 *   ends;
 * - the attempt ends first (its job removed from Redis), then the relay queues the row again,
 *   which makes a new job under the same id.
 * Either way what a user sees must be right: the event `delivered`, one deliveries-log row,
 * neither an outbox row nor a lease left for it within DISPATCHER_LOCK_DURATION_MS plus the
 * stalled interval, and the webhook's next event delivered (its job limit is 1, so a lease left
 * behind would hold it back).
 */
const LOCK_MS = 2_000;
const STALLED_MS = 1_000;
/** The dispatchers' settings, shortened as an operator would set them. */
const DISPATCHER_ENV = {
  DISPATCHER_LOCK_DURATION_MS: String(LOCK_MS),
  DISPATCHER_STALLED_INTERVAL_MS: String(STALLED_MS),
  // One job per webhook in Redis: a lease wrongly left behind would keep its next event in the outbox.
  DISPATCHER_WEBHOOK_JOB_LIMIT: "1",
  // The held request lasts as long as the crash and the recovery take; it must not time out.
  DELIVERY_TIMEOUT_MS: "120000",
  DATABASE_POOL_SIZE: "3",
  WEBHOOK_AUTO_DISABLE_AFTER_HOURS: "0",
};

describe("the relay's commit lost in a PostgreSQL crash", () => {
  let postgres: PrivatePostgres | undefined;
  let databaseUrl: string;
  /** The same database through `proxy`: the dispatchers' link, which the test cuts. */
  let proxiedUrl: string;
  let proxy: TcpProxy | undefined;
  let stack: Stack | undefined;
  let redis: RedisClient | undefined;
  let deliveries: Queue | undefined;
  const pools: pg.Pool[] = [];
  const inProcess: InProcessDispatcher[] = [];
  /** Ends every hold still pending, so that no request is left open at the end. */
  const releases: (() => void)[] = [];

  beforeAll(async () => {
    postgres = await startPrivatePostgres();
    databaseUrl = postgres.url("webhooks");
    await migrate(databaseUrl, MIGRATIONS_DIR);
    proxy = await startTcpProxy({ host: "127.0.0.1", port: postgres.port });
    const viaProxy = new URL(databaseUrl);
    viaProxy.port = String(proxy.port);
    proxiedUrl = viaProxy.toString();
    // The API (in-process) reaches PostgreSQL directly: the test ingests through it and reads with its pool.
    stack = await startStack({ env: { DATABASE_URL: databaseUrl }, dispatcher: false });
    redis = createRedisConnection(testRedisUrl(), "worker");
    deliveries = new Queue(QUEUE_NAMES.deliveries, { connection: redis, prefix: stack.keyPrefix });
  }, 120_000);

  // A test that failed half-way leaves the next one a working link and no request held.
  afterEach(() => {
    for (const release of releases.splice(0)) release();
    proxy?.restore();
  });
  afterAll(async () => {
    for (const release of releases) release();
    proxy?.restore();
    try {
      await endChaosFile(
        stack,
        async () => {
          for (const dispatcher of inProcess) await dispatcher.close();
        },
        () => Promise.all(pools.map((pool) => pool.end().catch(() => undefined))),
        () => deliveries?.close(),
        () => redis?.quit().catch(() => undefined),
        () => proxy?.close(),
      );
    } finally {
      await postgres?.stop();
    }
  }, 60_000);

  /** The test's view of an event's bookkeeping: its outbox rows and its leases. */
  const bookkeeping = async (destinationId: string): Promise<{ outbox: number; leases: number } | string> =>
    stack!.pool
      .query<{ outbox: number; leases: number }>(
        `SELECT (SELECT count(*) FROM outbox WHERE job_id = $1)::int AS outbox,
                (SELECT count(*) FROM webhook_leases WHERE work_id = $1)::int AS leases`,
        [destinationId],
      )
      .then(
        ({ rows }) => rows[0],
        // A connection of the pool killed by the crash, before the pool noticed.
        (error: Error) => error.message,
      );

  /** The event's detail once it is no longer pending. */
  const settled = (account: Account, eventId: string) =>
    waitUntil(
      () => account.api("GET", `/v1/events/${eventId}`),
      (r) => r.status === 200 && r.body.status !== "pending",
      30_000,
    );

  /** A receiver that holds the request of each message named by `hold` until released, and counts every request per message. */
  async function holdingReceiver(): Promise<{
    hr: HookReceiver;
    hold: (messageId: string) => { held: () => boolean; release: () => void };
    requests: (messageId: string) => number;
  }> {
    const holds = new Map<string, { promise: Promise<void>; held: boolean }>();
    const counts = new Map<string, number>();
    const hr = await startHookReceiver(stack!, (arrival) => {
      const id = arrival.messageId ?? "";
      counts.set(id, (counts.get(id) ?? 0) + 1);
      const hold = holds.get(id);
      if (!hold || hold.held) return {};
      hold.held = true;
      return { hold: hold.promise };
    });
    return {
      hr,
      hold: (messageId) => {
        let release = () => {};
        const hold = { promise: new Promise<void>((resolve) => (release = resolve)), held: false };
        holds.set(messageId, hold);
        releases.push(release);
        return { held: () => hold.held, release };
      },
      requests: (messageId) => counts.get(messageId) ?? 0,
    };
  }

  /** Posts an event to `account` and waits until it is no longer pending; returns its id and final status. */
  async function deliverEvent(account: Account, data = sampleData("message.sent")): Promise<{ eventId: string; status: string }> {
    const posted = await account.api("POST", "/v1/events", { event_type: "message.sent", data });
    expect(posted.status).toBe(201);
    const eventId = posted.body.event_id as string;
    return { eventId, status: (await settled(account, eventId)).body.status };
  }

  /**
   * With the WAL writer stopped, posts an event whose first request `receiver` holds; once the
   * relay's claim is visible and the request held, cuts the dispatchers' link, crashes PostgreSQL
   * and waits for its recovery. Asserts the claim was lost. Returns the event, its destination
   * (its job id), the held request's release and the claimed job's creation time in Redis.
   */
  async function loseTheRelaysClaim(
    account: Account,
    receiver: Awaited<ReturnType<typeof holdingReceiver>>,
  ): Promise<{ eventId: string; destinationId: string; messageId: string; release: () => void; jobTimestamp: number }> {
    const data = sampleData("message.sent");
    const messageId = data.messageId as string;
    const { held, release } = receiver.hold(messageId);
    // From here only a committing backend writes WAL: the ingest's synchronous commit does, the relay's claim does not.
    await postgres!.stopWalWriter();
    const posted = await account.api("POST", "/v1/events", { event_type: "message.sent", data });
    expect(posted.status).toBe(201);
    const eventId = posted.body.event_id as string;
    await waitUntil(async () => held(), Boolean, 30_000, 10);
    const { rows } = await stack!.pool.query<{ id: string }>("SELECT id FROM destinations WHERE event_id = $1", [eventId]);
    expect(rows).toHaveLength(1);
    const destinationId = rows[0].id;
    // The relay committed its claim (its row deleted, its lease written), as other sessions see it.
    expect(await bookkeeping(destinationId)).toEqual({ outbox: 0, leases: 1 });
    const job = await deliveries!.getJob(destinationId);
    expect(await job?.getState()).toBe("active");

    // The dispatchers stay away from PostgreSQL until the test has looked at what recovery left.
    proxy!.cut();
    await postgres!.crash();
    await waitUntil(
      () =>
        stack!.pool.query("SELECT 1").then(
          () => true,
          () => false,
        ),
      Boolean,
      30_000,
    );
    // The precondition: the crash lost the relay's commit. Its row is back, its lease gone.
    expect(
      await waitUntil(
        () => bookkeeping(destinationId),
        (b) => typeof b !== "string",
        10_000,
      ),
    ).toEqual({ outbox: 1, leases: 0 });
    return { eventId, destinationId, messageId, release, jobTimestamp: job!.timestamp };
  }

  /**
   * What a user must see once the event's attempt ended: delivered, one log row, neither its row
   * nor its lease left DISPATCHER_LOCK_DURATION_MS plus the stalled interval after `from` (when
   * the relay queued the row again; absent: when the event is seen delivered), the webhook free.
   */
  async function expectDeliveredOnce(
    account: Account,
    receiver: Awaited<ReturnType<typeof holdingReceiver>>,
    hook: { id: string; url: string },
    lost: { eventId: string; destinationId: string },
    from?: number,
  ): Promise<void> {
    const detail = await settled(account, lost.eventId);
    const deadline = (from ?? Date.now()) + LOCK_MS + STALLED_MS;
    expect(detail.body.status).toBe("delivered");
    expect(detail.body.destinations).toEqual([{ webhook_id: hook.id, url: hook.url, status: "delivered", attempts: 1 }]);
    expect((await deliveryRows(account, { event_id: lost.eventId })).map((r) => [r.attempt, r.trigger, r.response_status])).toEqual([
      [0, "initial", 200],
    ]);
    await waitUntil(
      () => bookkeeping(lost.destinationId),
      (b) => typeof b !== "string" && b.outbox === 0 && b.leases === 0,
      Math.max(0, deadline - Date.now()),
    );
    await waitUntil(
      () => deliveries!.getJob(lost.destinationId),
      (job) => job === undefined,
      10_000,
    );
    // The webhook is not left believing it is busy: its next event goes (job limit 1).
    const next = sampleData("message.sent");
    expect(await deliverEvent(account, next)).toMatchObject({ status: "delivered" });
    expect(receiver.requests(next.messageId as string)).toBe(1);
  }

  test("the row comes back while its job still runs: queued again as a no-op, delivered once", async () => {
    const account = await stack!.newAccount();
    const receiver = await holdingReceiver();
    const hook = await createHook(account, receiver.hr, "/running", ["message.sent"]);
    const dispatcher = startDispatcher("dispatcher", { ...DISPATCHER_ENV, DATABASE_URL: proxiedUrl, QUEUE_PREFIX: stack!.prefix });
    // The dispatcher runs and has done its start-up writes (payload partitions, maintenance) before the WAL writer stops.
    expect((await deliverEvent(account)).status).toBe("delivered");

    const lost = await loseTheRelaysClaim(account, receiver);
    expect(dispatcher.running()).toBe(true);
    proxy!.restore();
    // The relay queues the row again, and leases it again, while its job is active: the same job goes on.
    await waitUntil(
      () => bookkeeping(lost.destinationId),
      (b) => typeof b !== "string" && b.outbox === 0 && b.leases === 1,
      30_000,
    );
    const job = await deliveries!.getJob(lost.destinationId);
    expect({ state: await job?.getState(), timestamp: job?.timestamp }).toEqual({ state: "active", timestamp: lost.jobTimestamp });

    lost.release();
    await expectDeliveredOnce(account, receiver, hook, lost);
    // The re-queued job was the running one: one request in all.
    expect(receiver.requests(lost.messageId)).toBe(1);
    expect(dispatcher.running()).toBe(true);
  }, 180_000);

  test("the attempt ends before the row comes back: the new job under the same id sends nothing and frees the webhook", async () => {
    // The previous test's dispatcher process: this one's relay and worker are split below.
    await killAll();
    // A relay whose PostgreSQL is behind the proxy and a worker that reaches it directly, so that
    // the attempt is recorded while no relay can run. One dispatcher gets there too: after a
    // recovery its worker writes at once, while its relay waits for its LISTEN connection to come
    // back (1 s) or out its retry pause (up to 5 s).
    const config = (url: string) =>
      loadConfig(dispatcherConfigSchema, {
        ...DISPATCHER_ENV,
        DATABASE_URL: url,
        REDIS_URL: testRedisUrl(),
        QUEUE_PREFIX: stack!.prefix,
        ALLOW_PRIVATE_TARGETS: LOOPBACK_TARGETS,
        DISPATCHER_CONCURRENCY: "16",
      });
    const relayPool = createPool(proxiedUrl, 2);
    const workerPool = createPool(databaseUrl, 3);
    pools.push(relayPool, workerPool);
    const where = { queuePrefix: stack!.prefix, keyPrefix: stack!.keyPrefix };
    inProcess.push(startInProcessDispatcher(relayPool, config(proxiedUrl), { ...where, parts: "relay-only" }));
    inProcess.push(startInProcessDispatcher(workerPool, config(databaseUrl), { ...where, parts: "worker-only" }));

    const account = await stack!.newAccount();
    const receiver = await holdingReceiver();
    const hook = await createHook(account, receiver.hr, "/ended", ["message.sent"]);
    expect((await deliverEvent(account)).status).toBe("delivered");

    const lost = await loseTheRelaysClaim(account, receiver);
    lost.release();
    // The worker records the 2xx and its job ends (removed from Redis) while the row waits in the outbox.
    const detail = await settled(account, lost.eventId);
    expect(detail.body.status).toBe("delivered");
    await waitUntil(
      () => deliveries!.getJob(lost.destinationId),
      (job) => job === undefined,
      10_000,
    );
    expect(await bookkeeping(lost.destinationId)).toEqual({ outbox: 1, leases: 0 });

    proxy!.restore();
    // The relay takes the row: a lease, and a new job under the destination's id.
    await waitUntil(
      () => bookkeeping(lost.destinationId),
      (b) => typeof b !== "string" && b.outbox === 0,
      30_000,
    );
    await expectDeliveredOnce(account, receiver, hook, lost, Date.now());
    // At least once allows a second request here; the new job finds the destination delivered and sends none.
    expect(receiver.requests(lost.messageId)).toBe(1);
  }, 180_000);
});
