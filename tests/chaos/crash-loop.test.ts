import { createHmac, timingSafeEqual } from "node:crypto";
import { Queue } from "bullmq";
import { acceptEvents } from "@mailhooks/delivery-state";
import { createRedisConnection, QUEUE_NAMES, type RedisClient } from "@mailhooks/queue";
import { listenHttps, testCertificate } from "@mailhooks/receiver";
import { testRedisUrl } from "../support/env.js";
import { createHook, deliveryRows, emailArrivals, startHookReceiver } from "../support/hooks.js";
import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";
import {
  buildDispatcher,
  endChaosFile,
  processMemory,
  startBuiltDispatcher,
  startDispatcher,
  waitForExit,
  type ServiceProcess,
} from "./support/processes.js";

/**
 * Issue 17 item 2: big payloads put dispatchers in a crash loop, and the loop failed other work
 * without an attempt.
 * - Nothing ends because a dispatcher died: another account's work, in flight (held by a slow
 *   receiver) on a dispatcher killed with SIGKILL four times in a row, is claimed again each time
 *   its lease expires (DISPATCHER_VISIBILITY_TIMEOUT_MS, short here by configuration) and ends
 *   with real attempts. (Work ends `failed` only after MAX_EXPIRATIONS expirations:
 *   tests/chaos/stall-limit.test.ts.)
 * - Bytes in flight are bounded: 30 `message.received` webhooks of one account and one event of
 *   a 10 MiB envelope of plain text lines keep a dispatcher started as `npm run start:dispatcher`
 *   starts it (built, with its Node flags) under 150 MB RSS, and every destination is delivered.
 */
const VISIBILITY_MS = 2_000;
const KILLS = 4;
const MB = 1024 * 1024;

describe("dispatchers that die", () => {
  let stack: Stack;
  let connection: RedisClient;
  let deliveries: Queue;
  beforeAll(async () => {
    stack = await startStack({ dispatcher: false });
    connection = createRedisConnection(testRedisUrl(), "worker");
    deliveries = new Queue(QUEUE_NAMES.deliveries, { connection, prefix: stack.prefix });
  });
  afterAll(() =>
    endChaosFile(
      stack,
      () => deliveries?.close(),
      () => connection?.quit().catch(() => undefined),
    ),
  );

  test(`work in flight on a dispatcher killed ${KILLS} times in a row is taken over each time and ends with real attempts, not failed`, async () => {
    const acct = await stack.newAccount();
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let isReleased = false;
    void released.then(() => (isReleased = true));
    // Every email request is held (a slow receiver) until the kills are over. The receiver
    // records a request once it answers; `sent` counts them as they come in.
    let sent = 0;
    const hr = await startHookReceiver(stack, (a) => {
      if (a.event === "webhook.test" || isReleased) return {};
      sent++;
      return { hold: released };
    });
    const hook = await createHook(acct, hr, "/slow", ["message.sent"]);
    const eventIds: string[] = [];
    for (let i = 0; i < 3; i++)
      eventIds.push((await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") })).body.event_id);
    const env = {
      QUEUE_PREFIX: stack.prefix,
      DISPATCHER_VISIBILITY_TIMEOUT_MS: String(VISIBILITY_MS),
      DELIVERY_TIMEOUT_MS: "60000",
    };

    for (let kill = 1; kill <= KILLS; kill++) {
      const dispatcher: ServiceProcess = startDispatcher(`dispatcher-${kill}`, env);
      // Its attempts are in flight: every destination's request reached the receiver once more.
      await waitUntil(
        async () => sent,
        (n) => n >= kill * eventIds.length,
        60_000,
        50,
      );
      dispatcher.child.kill("SIGKILL");
      expect((await waitForExit(dispatcher, 5_000)).signal).toBe("SIGKILL");
      // Nothing was recorded and nothing ended; each kill cost the work one expiration, no more.
      expect(await deliveryRows(acct, { webhook_id: hook.id }).then((rows) => rows.filter((r) => r.trigger !== "test"))).toEqual([]);
      const states = await Promise.all(eventIds.map(async (id) => (await acct.api("GET", `/v1/events/${id}`)).body.status));
      expect(states).toEqual(eventIds.map(() => "pending"));
      const { rows } = await stack.pool.query<{ expirations: number }>(
        "SELECT q.expirations FROM work_items q JOIN destinations d ON d.id = q.work_id WHERE d.event_id = ANY($1)",
        [eventIds],
      );
      expect(rows.map((r) => r.expirations)).toEqual(eventIds.map(() => kill - 1));
    }

    // The receiver answers again; one more dispatcher takes the work over and delivers it.
    release();
    startDispatcher("dispatcher-last", env);
    const details = await Promise.all(
      eventIds.map((id) =>
        waitUntil(
          () => acct.api("GET", `/v1/events/${id}`),
          (r) => r.body.status !== "pending",
          60_000,
          200,
        ),
      ),
    );
    for (const detail of details) {
      expect(detail.body.status).toBe("delivered");
      expect(detail.body.destinations).toEqual([{ webhook_id: hook.id, url: hook.url, status: "delivered", attempts: 1 }]);
      const rows = await deliveryRows(acct, { event_id: detail.body.event_id });
      expect(rows.map((r) => [r.trigger, r.attempt, r.response_status, r.error])).toEqual([["initial", 0, 200, null]]);
    }
    expect(emailArrivals(hr.receiver.arrivals, "/slow").length).toBeGreaterThanOrEqual(eventIds.length);
  }, 240_000);

  test("30 webhooks receiving one 10 MiB envelope keep a dispatcher (shipped flags) under 150 MB RSS, and every destination is delivered", async () => {
    await buildDispatcher();
    const acct = await stack.newAccount();
    const receiver = await startStreamingReceiver();
    try {
      // The receiver is this busy test process, hashing 300 MB: a generous deadline keeps slow
      // uploads from being retried (a retry would only add to what is measured).
      const dispatcher = startBuiltDispatcher("dispatcher-big", { QUEUE_PREFIX: stack.prefix, DELIVERY_TIMEOUT_MS: "120000" });
      let peak = 0;
      const timer = setInterval(() => {
        if (!dispatcher.running()) return;
        processMemory(dispatcher.pid).then(
          (m) => (peak = Math.max(peak, m.peak)),
          () => undefined,
        );
      }, 50);
      try {
        await waitUntil(
          () => deliveries.getWorkersCount(),
          (n) => n >= 1,
          30_000,
        );
        const hooks: string[] = [];
        for (let i = 0; i < 30; i++) {
          const created = await acct.api("POST", "/v1/webhooks", { url: receiver.url(`/big/${i}`), events: ["message.received"] });
          expect(created.status).toBe(201);
          receiver.secrets.set(`/big/${i}`, created.body.secret);
          hooks.push(created.body.id);
        }
        const line = "All work and no play makes a dispatcher run out of memory, once.\n"; // 65 bytes, 66 in JSON
        const body = line.repeat(Math.floor((10 * MB - 4096) / (line.length + 1)));
        const data = { ...sampleData("message.received"), body };
        const [event] = await acceptEvents(stack.pool, acct.accountId, stack.prefix, [
          { eventType: "message.received", data: data as never, occurredAt: new Date() },
        ]);
        const { rows } = await stack.pool.query<{ n: number }>(
          "SELECT octet_length(payload) AS n FROM event_payloads WHERE event_id = $1",
          [event.id],
        );
        expect(rows[0].n).toBeGreaterThan(10 * MB - 8192);
        expect(rows[0].n).toBeLessThanOrEqual(10 * MB);

        const detail = await waitUntil(
          () => acct.api("GET", `/v1/events/${event.id}`),
          (r) => r.body.status !== "pending" || !dispatcher.running(),
          180_000,
          500,
        );
        expect(dispatcher.running()).toBe(true);
        const final = await processMemory(dispatcher.pid);
        peak = Math.max(peak, final.peak);
        const attempts = await deliveryRows(acct, { event_id: event.id });
        console.log(
          `dispatcher peak RSS with 30 x 10 MiB deliveries: ${(peak / MB).toFixed(1)} MB; ${attempts.length} attempts (${
            attempts
              .filter((r) => r.error)
              .map((r) => r.error)
              .join(", ") || "no failure"
          })`,
        );
        expect(peak).toBeLessThan(150 * MB);
        expect(detail.body.status).toBe("delivered");
        expect(detail.body.destinations.map((d: { status: string }) => d.status)).toEqual(hooks.map(() => "delivered"));
        // Each webhook got the whole envelope, signed.
        const big = receiver.requests.filter((r) => r.eventId === event.id && r.verified && r.bytes === rows[0].n);
        expect([...new Set(big.map((r) => r.path))].sort()).toEqual(hooks.map((_, i) => `/big/${i}`).sort());
        dispatcher.child.kill("SIGTERM");
      } finally {
        clearInterval(timer);
      }
    } finally {
      await receiver.close();
    }
  }, 300_000);
});

/**
 * An HTTPS receiver that verifies each signature over the body as it streams in, keeping none
 * of it (the test process would otherwise hold 300 MB of envelopes), and answers 200.
 */
async function startStreamingReceiver() {
  const secrets = new Map<string, string>();
  const requests: { path: string; eventId: string | undefined; bytes: number; verified: boolean }[] = [];
  const listener = await listenHttps(
    testCertificate(),
    (req, res) => {
      const reqPath = req.url ?? "/";
      const secret = secrets.get(reqPath) ?? "";
      const mac = createHmac("sha256", Buffer.from(secret, "utf8")).update(`${String(req.headers["x-service-timestamp"])}.`);
      let bytes = 0;
      req.on("data", (chunk: Buffer) => {
        bytes += chunk.length;
        mac.update(chunk);
      });
      req.on("end", () => {
        const expected = Buffer.from(`sha256=${mac.digest("hex")}`);
        const got = Buffer.from(String(req.headers["x-service-signature"] ?? ""));
        const verified = secret !== "" && got.length === expected.length && timingSafeEqual(got, expected);
        requests.push({ path: reqPath, eventId: req.headers["x-service-event-id"] as string | undefined, bytes, verified });
        res.writeHead(verified ? 200 : 401).end();
      });
    },
    { keepAliveTimeoutMs: 60_000 },
  );
  return { secrets, requests, url: listener.url, close: listener.close };
}
