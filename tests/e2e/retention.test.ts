import { randomUUID } from "node:crypto";
import { Queue, QueueEvents } from "bullmq";
import type { Redis } from "ioredis";
import type { PrismaClient } from "@mailhooks/db";
import { getLogger } from "@mailhooks/logger";
import { createRedisConnection, DeliveryQueue } from "@mailhooks/queue";
import { purgeExpiredPayloads } from "../../apps/dispatcher/src/jobs/purge-payloads.js";
import { startMaintenance } from "../../apps/dispatcher/src/maintenance.js";
import { testRedisUrl } from "../support/env.js";
import { sampleData, startStack, waitUntil, type Account, type Stack } from "../support/stack.js";

/**
 * Retention (CONTRACT.md section 5, spec "Event record"): payloads past the window are removed in
 * bounded batches, metadata, deliveries and audit entries stay; the dispatcher's maintenance
 * registers one BullMQ job scheduler however many replicas start, and its job really purges.
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

  async function setCreatedAt(acct: Account, eventId: string, at: Date): Promise<void> {
    expect(await stack.prisma.$executeRaw`UPDATE events SET created_at = ${at} WHERE id = ${eventId} AND account_id = ${acct.accountId}`).toBe(1);
  }

  test("purgeExpiredPayloads removes the payloads past the window in bounded batches and keeps metadata, deliveries and audit entries", async () => {
    const acct = await stack.newAccount();
    let secret: string | undefined;
    const receiver = await stack.startReceiver({ secretFor: () => secret });
    const hook = await acct.api("POST", "/v1/webhooks", { url: receiver.url("/r"), events: ["message.sent"] });
    expect(hook.status).toBe(201);
    secret = hook.body.secret;

    const old: string[] = [];
    for (let i = 0; i < 7; i++) old.push(await postEvent(acct));
    const newer = [await postEvent(acct), await postEvent(acct)];
    for (const id of [...old, ...newer]) await waitUntil(() => acct.api("GET", `/v1/events/${id}`), (r) => r.body.status === "delivered");
    const replay = await acct.api("POST", `/v1/events/${old[0]}/replay`);
    expect(replay.status).toBe(202);
    await waitUntil(() => acct.api("GET", `/v1/audit-log?event_id=${old[0]}`), (r) => r.body.data.length === 1);
    const payloadBefore = (await acct.api("GET", `/v1/events/${old[3]}`)).body.payload;
    expect(payloadBefore).not.toBeNull();

    const deliveriesBefore = await stack.prisma.delivery.count({ where: { accountId: acct.accountId } });
    const auditBefore = await stack.prisma.auditEntry.count({ where: { accountId: acct.accountId } });
    expect(deliveriesBefore).toBe(1 + 9 + 1); // test event, one per event, the replay
    expect(auditBefore).toBe(1);

    const now = new Date();
    for (let i = 0; i < old.length; i++) await setCreatedAt(acct, old[i], new Date(now.getTime() - 31 * DAY - i));
    await setCreatedAt(acct, newer[0], new Date(now.getTime() - 29 * DAY));

    // Count the statements and the rows each one changed.
    const batches: number[] = [];
    const counting = {
      $executeRaw: async (strings: TemplateStringsArray, ...values: unknown[]) => {
        const n = await stack.prisma.$executeRaw(strings, ...values);
        batches.push(n);
        return n;
      },
    } as unknown as PrismaClient;
    const removed = await purgeExpiredPayloads(counting, 30, 3, now);

    const mine = await stack.prisma.event.findMany({ where: { accountId: acct.accountId }, select: { id: true, payload: true, payloadPurgedAt: true } });
    const purgedMine = mine.filter((e) => e.payloadPurgedAt?.getTime() === now.getTime()).map((e) => e.id);
    expect(purgedMine.sort()).toEqual([...old].sort());
    // Rows of other test files (if any were past 30 days at that moment) are counted too.
    const foreign = await stack.prisma.event.count({ where: { payloadPurgedAt: now, NOT: { accountId: acct.accountId } } });
    expect(removed).toBe(7 + foreign);
    for (const n of batches) expect(n).toBeLessThanOrEqual(3);
    expect(batches.reduce((a, b) => a + b, 0)).toBe(removed);
    expect(batches[batches.length - 1]).toBeLessThan(3);
    if (foreign === 0) expect(batches).toEqual([3, 3, 1]);

    for (const e of mine) {
      if (old.includes(e.id)) expect(e.payload).toBeNull();
      else expect(e.payload).not.toBeNull();
    }

    // Through the API: metadata stays, the payload is gone, the destination and its attempts stay.
    const detail = await acct.api("GET", `/v1/events/${old[3]}`);
    expect(detail.status).toBe(200);
    expect(detail.body).toMatchObject({ event_id: old[3], event_type: "message.sent", status: "delivered", payload: null, payload_retained: false });
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

    expect(await stack.prisma.delivery.count({ where: { accountId: acct.accountId } })).toBe(deliveriesBefore);
    expect(await stack.prisma.auditEntry.count({ where: { accountId: acct.accountId } })).toBe(auditBefore);
    const audit = await acct.api("GET", `/v1/audit-log?event_id=${old[0]}`);
    expect(audit.body.data).toEqual([expect.objectContaining({ event_id: old[0], response_status: 200 })]);
    const rows = await acct.api("GET", `/v1/deliveries?event_id=${old[0]}`);
    expect(rows.body.data.map((r: any) => r.trigger).sort()).toEqual(["initial", "replay"]);
    expect((await acct.api("GET", `/v1/deliveries?event_id=${old[3]}`)).body.data).toHaveLength(1);
    const gone = await acct.api("POST", `/v1/events/${old[3]}/replay`);
    expect([gone.status, gone.body.error.code]).toEqual([410, "payload_expired"]);

    // A second run finds nothing more of this account.
    await purgeExpiredPayloads(stack.prisma, 30, 3);
    const again = await stack.prisma.event.findMany({ where: { accountId: acct.accountId, payloadPurgedAt: { not: null } }, select: { id: true, payloadPurgedAt: true } });
    expect(again.map((e) => e.id).sort()).toEqual([...old].sort());
    for (const e of again) expect(e.payloadPurgedAt!.getTime()).toBe(now.getTime());
  });

  test("startMaintenance registers one 'retention' job scheduler whatever the number of replicas, and its job purges", async () => {
    const prefix = `test-maint-${randomUUID()}`;
    const url = testRedisUrl();
    const connections: Redis[] = [];
    const connect = () => {
      const c = createRedisConnection(url, "worker");
      connections.push(c);
      return c;
    };
    const queue = new Queue("maintenance", { connection: connect(), prefix });
    const queueEvents = new QueueEvents("maintenance", { connection: connect(), prefix });
    const closers: (() => Promise<void>)[] = [];
    try {
      await queueEvents.waitUntilReady();
      const completed: { jobId: string; at: number }[] = [];
      const failed: string[] = [];
      queueEvents.on("completed", ({ jobId }) => completed.push({ jobId, at: Date.now() }));
      queueEvents.on("failed", ({ jobId, failedReason }) => failed.push(`${jobId}: ${failedReason}`));

      // An event far older than the window (100 years, so that no other file's event is in reach).
      const acct = await stack.newAccount();
      const eventId = await postEvent(acct);
      await setCreatedAt(acct, eventId, new Date("1900-01-01T00:00:00.000Z"));
      expect((await acct.api("GET", `/v1/events/${eventId}`)).body.payload_retained).toBe(true);

      const deliveries = new DeliveryQueue(connect(), prefix, [1000, 1000, 1000]);
      closers.push(() => deliveries.close());
      const options = {
        deliveries,
        prisma: stack.prisma,
        retentionDays: 36_500,
        logger: getLogger("test-maintenance"),
        retentionEveryMs: 200,
        prefix,
        retryDelaysMs: [1000, 1000, 1000],
        timeoutMs: 1000,
        sweepEveryMs: 60_000,
        sweepAfterMs: 60_000,
      };
      const first = await startMaintenance({ ...options, connection: connect() });
      closers.push(first.close);
      const second = await startMaintenance({ ...options, connection: connect() });
      closers.push(second.close);

      const schedulers = await queue.getJobSchedulers();
      expect(schedulers.map((s) => s.key).sort()).toEqual(["retention", "sweep"]);
      expect(schedulers.find((s) => s.key === "retention")).toMatchObject({ key: "retention", name: "retention", every: 200 });
      expect(await queue.getJobSchedulersCount()).toBe(2);

      const detail = await waitUntil(() => acct.api("GET", `/v1/events/${eventId}`), (r) => r.body.payload_retained === false, 10_000);
      expect(detail.body.payload).toBeNull();
      await waitUntil(async () => completed.length, (n) => n >= 1, 5_000);
      expect(failed).toEqual([]);
      expect(completed.some((c) => /retention/.test(c.jobId))).toBe(true);

      // One scheduler, so one run per period, not one per replica (bounded watch of 1 s).
      const from = Date.now();
      await new Promise((r) => setTimeout(r, 1000));
      const runs = completed.filter((c) => /retention/.test(c.jobId) && c.at >= from && c.at < from + 1000).length;
      expect(runs).toBeGreaterThanOrEqual(1);
      expect(runs).toBeLessThanOrEqual(7);
      expect(await queue.getJobSchedulersCount()).toBe(2);
      expect(failed).toEqual([]);
    } finally {
      for (const close of closers) await close();
      await queueEvents.close();
      await queue.obliterate({ force: true });
      await queue.close();
      for (const c of connections) await c.quit().catch(() => undefined);
    }
  });
});
