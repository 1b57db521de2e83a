import { randomUUID } from "node:crypto";
import { Queue, QueueEvents } from "bullmq";
import { ensurePayloadPartitions, purgeExpiredPayloads } from "@mailhooks/delivery-state";
import { getLogger } from "@mailhooks/logger";
import { createRedisConnection, RETIRED_MAINTENANCE_JOBS, type RedisClient } from "@mailhooks/queue";
import { startMaintenance } from "../../apps/dispatcher/src/maintenance.js";
import { createDispatcherMetrics } from "../../apps/dispatcher/src/metrics.js";
import { backdateEvent } from "../support/backdate.js";
import { testRedisUrl } from "../support/env.js";
import { scratchDatabase, type ScratchDatabase } from "../chaos/support/database.js";
import { sampleData, startStack, waitUntil, type Account, type Stack } from "../support/stack.js";

/**
 * Retention (docs/api.md, "Events", spec "Event record"): payloads live in day partitions and
 * expire by dropping whole partitions; metadata, deliveries and audit entries stay; the
 * dispatcher's maintenance registers one BullMQ job scheduler however many replicas start, and
 * its job really purges.
 *
 * Other test files purge too (with a 90-day window), concurrently and on the same database: the
 * "old" events here are 31 days old with a 30-day window, out of their reach.
 */

const DAY = 86_400_000;

describe("retention", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "100,100,100", DELIVERY_TIMEOUT_MS: "2000" } });
  });
  afterAll(() => stack.close());

  async function postEvent(acct: Account, eventType = "message.sent"): Promise<string> {
    const res = await acct.api("POST", "/v1/events", { event_type: eventType, data: sampleData(eventType) });
    expect(res.status).toBe(201);
    return res.body.event_id;
  }

  test("purgeExpiredPayloads drops the day partitions past the window: payloads gone, metadata, deliveries and audit entries kept", async () => {
    const acct = await stack.newAccount();
    let secret: string | undefined;
    const receiver = await stack.startReceiver({ secretFor: () => secret });
    const hook = await acct.api("POST", "/v1/webhooks", { url: receiver.url("/r"), events: ["message.sent"] });
    expect(hook.status).toBe(201);
    secret = hook.body.secret;

    const old: string[] = [];
    for (let i = 0; i < 7; i++) old.push(await postEvent(acct));
    const newer = [await postEvent(acct), await postEvent(acct)];
    for (const id of [...old, ...newer])
      await waitUntil(
        () => acct.api("GET", `/v1/events/${id}`),
        (r) => r.body.status === "delivered",
      );
    const replay = await acct.api("POST", `/v1/events/${old[0]}/replay`);
    expect(replay.status).toBe(202);
    await waitUntil(
      () => acct.api("GET", `/v1/audit-log?event_id=${old[0]}`),
      (r) => r.body.data.length === 1,
    );
    const payloadBefore = (await acct.api("GET", `/v1/events/${old[3]}`)).body.payload;
    expect(payloadBefore).not.toBeNull();

    const deliveriesBefore = await stack.prisma.delivery.count({ where: { accountId: acct.accountId } });
    const auditBefore = await stack.prisma.auditEntry.count({ where: { accountId: acct.accountId } });
    expect(deliveriesBefore).toBe(1 + 9 + 1); // test event, one per event, the replay
    expect(auditBefore).toBe(1);

    // The old events as if they had come 31 days ago (their payload rows move to that day's
    // partition), one newer event 29 days ago.
    const now = new Date();
    await ensurePayloadPartitions(stack.pool, now, 14, new Date(now.getTime() - 40 * DAY));
    const moveTo = (id: string, at: Date) => backdateEvent(stack.pool, id, at, acct.accountId);
    const oldDay = new Date(now.getTime() - 31 * DAY);
    for (let i = 0; i < old.length; i++) await moveTo(old[i], new Date(oldDay.getTime() - i));
    await moveTo(newer[0], new Date(now.getTime() - 29 * DAY));
    const partitionOf = async (id: string) =>
      (await stack.pool.query("SELECT tableoid::regclass::text AS p FROM event_payloads WHERE event_id = $1", [id])).rows[0]?.p ?? null;
    const oldPartition = `event_payloads_${oldDay.toISOString().slice(0, 10).replaceAll("-", "")}`;
    expect(await partitionOf(old[0])).toBe(oldPartition);

    const purged = await purgeExpiredPayloads(stack.pool, 30, now);
    // Whole days go: that of the old events, not that of the 29-day-old one.
    expect(purged.droppedPartitions).toContain(oldPartition);
    expect(await partitionOf(old[0])).toBeNull();
    expect(await partitionOf(newer[0])).not.toBeNull();
    expect((await stack.pool.query("SELECT to_regclass($1) AS t", [oldPartition])).rows[0].t).toBeNull();
    expect(purged.purgedBefore.getTime()).toBeGreaterThan(now.getTime() - 31 * DAY);
    expect(purged.purgedBefore.getTime()).toBeLessThanOrEqual(now.getTime() - 29 * DAY);

    // Through the API: metadata stays, the payload is gone, the destination and its attempts stay.
    const detail = await acct.api("GET", `/v1/events/${old[3]}`);
    expect(detail.status).toBe(200);
    expect(detail.body).toMatchObject({
      event_id: old[3],
      event_type: "message.sent",
      status: "delivered",
      payload: null,
      payload_retained: false,
    });
    expect(detail.body.message_id).toBe(payloadBefore.data.messageId);
    expect(detail.body.destinations).toEqual([{ webhook_id: hook.body.id, url: hook.body.url, status: "delivered", attempts: 1 }]);
    const replayed = await acct.api("GET", `/v1/events/${old[0]}`);
    expect(replayed.body.destinations[0].attempts).toBe(2);
    for (const id of newer) {
      const kept = await acct.api("GET", `/v1/events/${id}`);
      expect(kept.body.payload_retained).toBe(true);
      expect(kept.body.payload).not.toBeNull();
    }
    const listed = await acct.api("GET", "/v1/events?limit=100");
    const retained = Object.fromEntries(listed.body.data.map((e: any) => [e.event_id, e.payload_retained]));
    expect(retained).toEqual(Object.fromEntries([...old.map((id) => [id, false]), ...newer.map((id) => [id, true])]));

    expect(await stack.prisma.event.count({ where: { accountId: acct.accountId } })).toBe(9);
    expect(await stack.prisma.delivery.count({ where: { accountId: acct.accountId } })).toBe(deliveriesBefore);
    expect(await stack.prisma.auditEntry.count({ where: { accountId: acct.accountId } })).toBe(auditBefore);
    const audit = await acct.api("GET", `/v1/audit-log?event_id=${old[0]}`);
    expect(audit.body.data).toEqual([expect.objectContaining({ event_id: old[0], response_status: 200 })]);
    const rows = await acct.api("GET", `/v1/deliveries?event_id=${old[0]}`);
    expect(rows.body.data.map((r: any) => r.trigger).sort()).toEqual(["initial", "replay"]);
    expect((await acct.api("GET", `/v1/deliveries?event_id=${old[3]}`)).body.data).toHaveLength(1);
    const gone = await acct.api("POST", `/v1/events/${old[3]}/replay`);
    expect([gone.status, gone.body.error.code]).toEqual([410, "payload_expired"]);

    // A second run finds nothing more to drop; the coming days' partitions exist.
    expect((await purgeExpiredPayloads(stack.pool, 30, now)).droppedPartitions).toEqual([]);
    const ahead = `event_payloads_${new Date(now.getTime() + 14 * DAY).toISOString().slice(0, 10).replaceAll("-", "")}`;
    expect((await stack.pool.query("SELECT to_regclass($1) AS t", [ahead])).rows[0].t).toBe(ahead);
  });
});

/**
 * On a database of its own: these tests move the retention horizon back in time and detach a
 * partition, which other files (sharing the test database) must never see.
 */
describe("retention on a database of its own", () => {
  let db: ScratchDatabase;
  let stack: Stack;
  beforeAll(async () => {
    db = await scratchDatabase("retention");
    stack = await startStack({ env: { DATABASE_URL: db.url, DELIVERY_RETRY_DELAYS_MS: "100,100,100", DELIVERY_TIMEOUT_MS: "2000" } });
  });
  afterAll(async () => {
    await stack?.close();
    await db?.drop();
  });

  async function postEvent(acct: Account): Promise<string> {
    const res = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(res.status).toBe(201);
    return res.body.event_id;
  }

  test("an event whose day has no partition yet is still accepted (the partition is made on the spot)", async () => {
    const acct = await stack.newAccount();
    const today = `event_payloads_${new Date().toISOString().slice(0, 10).replaceAll("-", "")}`;
    // Only tests may do this: a missing partition for today (the maintenance job never ran).
    const detached = `${today}_detached_${randomUUID().slice(0, 8)}`;
    await stack.pool.query(`ALTER TABLE event_payloads DETACH PARTITION "${today}"`);
    await stack.pool.query(`ALTER TABLE "${today}" RENAME TO "${detached}"`);
    try {
      const id = await postEvent(acct);
      expect((await acct.api("GET", `/v1/events/${id}`)).body.payload_retained).toBe(true);
    } finally {
      // Put the detached rows back (other files' events of today) and drop the spare table.
      await stack.pool.query(`INSERT INTO event_payloads SELECT * FROM "${detached}" ON CONFLICT DO NOTHING`);
      await stack.pool.query(`DROP TABLE "${detached}"`);
    }
  });

  /**
   * The maintenance queue of a prefix of its own (`name`-uuid), as the maintenance tests drive it:
   * `connect` opens a Redis connection (each a maintenance process's own), `queue` and
   * `queueEvents` watch the queue, `options` are startMaintenance's but the connection (retention
   * over `retentionDays`), `closers` run first at `end`, which then empties the queue and quits
   * every connection.
   */
  function maintenanceHarness(name: string, retentionDays: number) {
    const prefix = `${name}-${randomUUID()}`;
    const connections: RedisClient[] = [];
    const connect = () => {
      const c = createRedisConnection(testRedisUrl(), "worker");
      connections.push(c);
      return c;
    };
    const queue = new Queue("maintenance", { connection: connect(), prefix });
    const queueEvents = new QueueEvents("maintenance", { connection: connect(), prefix });
    const closers: (() => Promise<void>)[] = [];
    const options = {
      pool: stack.pool,
      metrics: createDispatcherMetrics(),
      retentionDays,
      logger: getLogger("test-maintenance"),
      prefix,
    };
    const end = async () => {
      for (const close of closers.reverse()) await close();
      await queueEvents.close();
      await queue.obliterate({ force: true });
      await queue.close();
      for (const c of connections) await c.quit().catch(() => undefined);
    };
    return { connect, queue, queueEvents, closers, options, end };
  }

  test("startMaintenance registers one 'retention' job scheduler whatever the number of replicas, and its job purges", async () => {
    const { connect, queue, queueEvents, closers, options, end } = maintenanceHarness("test-maint", 90);
    try {
      await queueEvents.waitUntilReady();
      const completed: { jobId: string; at: number }[] = [];
      const failed: string[] = [];
      queueEvents.on("completed", ({ jobId }) => completed.push({ jobId, at: Date.now() }));
      queueEvents.on("failed", ({ jobId, failedReason }) => failed.push(`${jobId}: ${failedReason}`));

      // An event far older than the window (100 years, so that no other file's event is in reach).
      const acct = await stack.newAccount();
      const eventId = await postEvent(acct);
      // An event (and its payload) from 100 days ago, with a 90-day window.
      const old = new Date(Date.now() - 100 * DAY);
      await backdateEvent(stack.pool, eventId, old);
      expect((await acct.api("GET", `/v1/events/${eventId}`)).body.payload_retained).toBe(true);

      const first = await startMaintenance({ ...options, everyMs: 200, connection: connect() });
      closers.push(first.close);
      const second = await startMaintenance({ ...options, everyMs: 200, connection: connect() });
      closers.push(second.close);

      const schedulers = await queue.getJobSchedulers();
      expect(schedulers.map((s) => s.key).sort()).toEqual(["idempotency-purge", "retention"]);
      expect(schedulers.find((s) => s.key === "retention")).toMatchObject({ key: "retention", name: "retention", every: 200 });
      expect(await queue.getJobSchedulersCount()).toBe(2);

      const detail = await waitUntil(
        () => acct.api("GET", `/v1/events/${eventId}`),
        (r) => r.body.payload_retained === false,
        10_000,
      );
      expect(detail.body.payload).toBeNull();
      await waitUntil(
        async () => completed.filter((c) => /retention/.test(c.jobId)).length,
        (n) => n >= 1,
        5_000,
      );
      expect(failed).toEqual([]);

      // One scheduler, so one run per period, not one per replica (bounded watch of 1 s).
      const from = Date.now();
      await new Promise((r) => setTimeout(r, 1000));
      const runs = completed.filter((c) => /retention/.test(c.jobId) && c.at >= from && c.at < from + 1000).length;
      expect(runs).toBeGreaterThanOrEqual(1);
      expect(runs).toBeLessThanOrEqual(7);
      expect(await queue.getJobSchedulersCount()).toBe(2);
      expect(failed).toEqual([]);
    } finally {
      await end();
    }
  });

  test("startMaintenance removes the job schedulers earlier versions left (the sweeper, the queue tables' VACUUM) with their next runs", async () => {
    const { connect, queue, queueEvents, closers, options, end } = maintenanceHarness("test-retired", 36_500);
    try {
      await queueEvents.waitUntilReady();
      const ran: string[] = [];
      queueEvents.on("completed", ({ jobId }) => ran.push(jobId));
      queueEvents.on("failed", ({ jobId }) => ran.push(jobId));
      // What a dispatcher of an earlier version left in Redis: its schedulers, each with its next run delayed.
      for (const retired of RETIRED_MAINTENANCE_JOBS)
        await queue.upsertJobScheduler(
          retired,
          { every: 60_000, startDate: Date.now() + 30_000 },
          { name: retired, opts: { removeOnComplete: true } },
        );
      const retiredJobs = async () =>
        (await queue.getJobs(["delayed", "wait", "prioritized"])).filter((job) => RETIRED_MAINTENANCE_JOBS.some((r) => job.name === r));
      expect((await queue.getJobSchedulers()).map((s) => s.key).sort()).toEqual([...RETIRED_MAINTENANCE_JOBS].sort());
      expect(await retiredJobs()).toHaveLength(RETIRED_MAINTENANCE_JOBS.length);

      const started = await startMaintenance({ ...options, connection: connect() });
      closers.push(started.close);
      expect((await queue.getJobSchedulers()).map((s) => s.key).sort()).toEqual(["idempotency-purge", "retention"]);
      expect(await retiredJobs()).toEqual([]);
      // What runs is retention and the purge, nothing else.
      await waitUntil(
        async () => ran.filter((id) => /retention|idempotency-purge/.test(id)).length,
        (n) => n >= 2,
        10_000,
      );
      expect(ran.filter((id) => !/retention|idempotency-purge/.test(id))).toEqual([]);
    } finally {
      await end();
    }
  });
});
