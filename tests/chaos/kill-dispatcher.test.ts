import { Queue } from "bullmq";
import { createRedisConnection, QUEUE_NAMES, type RedisClient } from "@mailhooks/queue";
import { verify } from "@mailhooks/verify";
import { testRedisUrl } from "../support/env.js";
import { sampleData, startStack, TIMED_OUT, waitUntil, type Stack } from "../support/stack.js";
import { createHook, deliveryRows, emailArrivals, startHookReceiver } from "../support/hooks.js";
import { endChaosFile, startDispatcher, waitForExit } from "./support/processes.js";

/**
 * Issue 4, item 7: a dispatcher killed with SIGKILL in the middle of a delivery loses nothing.
 *
 * Its job stays active in Redis with a lock nobody renews; once the lock expires
 * (DISPATCHER_LOCK_DURATION_MS) another dispatcher's stalled-job check
 * (DISPATCHER_STALLED_INTERVAL_MS) puts it back in the queue and makes the attempt again.
 * Delivery is at least once: the receiver may get the same envelope twice (it de-duplicates by
 * event + messageId). The killed attempt wrote nothing, so it is not counted: the deliveries log
 * shows the attempts whose outcome is known, numbered without gaps.
 */
/** The longest the first request is held: the test ends the hold as soon as A is killed. Long
 * enough for a second dispatcher to start meanwhile (a few seconds on a quiet machine, much more
 * when the machine is loaded). */
const HOLD_MS = 20_000;
const LOCK_MS = 2_000;
const STALLED_MS = 1_000;

describe("a dispatcher killed mid-delivery", () => {
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

  test("its in-flight delivery is taken over by another running dispatcher and delivered", async () => {
    const acct = await stack.newAccount();
    let inFlight = 0;
    let requests = 0;
    let endHold = () => {};
    const holdEnded = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, HOLD_MS);
      endHold = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    // The first email request is held until A is killed (HOLD_MS at most); the ones after are
    // answered at once.
    const hr = await startHookReceiver(stack, (a, nth) => {
      if (a.event === "webhook.test") return {};
      requests++;
      if (nth > 1) return {};
      inFlight = Date.now();
      return { hold: holdEnded };
    });
    const hook = await createHook(acct, hr, "/crash", ["message.sent"]);
    const posted = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(posted.status).toBe(201);
    const eventId = posted.body.event_id as string;

    const env = {
      QUEUE_PREFIX: stack.prefix,
      DISPATCHER_LOCK_DURATION_MS: String(LOCK_MS),
      DISPATCHER_STALLED_INTERVAL_MS: String(STALLED_MS),
      DELIVERY_TIMEOUT_MS: "30000",
    };
    const a = startDispatcher("dispatcher-a", env);
    // A has the request in flight: the receiver got it and holds its answer.
    await waitUntil(
      async () => inFlight,
      (t) => t > 0,
      30_000,
      10,
    );
    // A second replica starts and is ready (its worker is connected to the queue).
    const b = startDispatcher("dispatcher-b", env);
    await waitUntil(
      () => deliveries.getWorkersCount(),
      (n) => n >= 2,
      20_000,
    );
    // B's stalled checks leave a job alone while its dispatcher lives and renews its lock.
    await new Promise((r) => setTimeout(r, 2 * STALLED_MS)); // bounded absence check
    expect(requests).toBe(1);
    a.child.kill("SIGKILL");
    const killed = await waitForExit(a, 5_000);
    expect(killed.signal).toBe("SIGKILL");
    // The held answer reaches nobody now (A's connection died with it): the receiver records the
    // request, as it would once the hold ended.
    endHold();
    // Killed while the request was in flight, before A could record anything.
    expect(killed.at - inFlight).toBeLessThan(HOLD_MS);
    expect(await deliveryRows(acct, { event_id: eventId })).toEqual([]);

    // B's attempt is answered at once; A's held one was recorded when its hold ended.
    const arrivals = emailArrivals(await hr.receiver.waitFor((all) => emailArrivals(all, "/crash").length >= 2, 30_000), "/crash");
    const detail = await waitUntil(
      () => acct.api("GET", `/v1/events/${eventId}`),
      (r) => r.body.status !== "pending",
      20_000,
    );
    expect(detail.body.status).toBe("delivered");
    expect(detail.body.destinations).toEqual([{ webhook_id: hook.id, url: hook.url, status: "delivered", attempts: 1 }]);

    // The same envelope twice, each time signed right; the second one is a duplicate to the
    // receiver (it had accepted the first, whose answer never reached A).
    expect(arrivals).toHaveLength(2);
    for (const arrival of arrivals) {
      expect(arrival.body).toBe(JSON.stringify(detail.body.payload));
      expect(
        verify(hook.secret, { "x-service-timestamp": arrival.timestamp, "x-service-signature": arrival.signature }, arrival.body, {
          now: new Date(arrival.receivedAt),
        }),
      ).toEqual(JSON.parse(arrival.body));
    }
    const [first, second] = [...arrivals].sort((x, y) => x.receivedAt - y.receivedAt);
    expect([first.duplicate, second.duplicate]).toEqual([false, true]);
    // The takeover came once A was dead and its lock had expired, not before.
    expect(second.receivedAt).toBeGreaterThan(killed.at);

    // One attempt in the log: B's, the initial one (the killed try consumed no attempt).
    const rows = await deliveryRows(acct, { event_id: eventId });
    expect(rows.map((r) => [r.attempt, r.trigger, r.response_status, r.error])).toEqual([[0, "initial", 200, null]]);
    expect(b.running()).toBe(true);

    // Nothing more comes: B's stalled checks keep running and find nothing to take over.
    await expect(hr.receiver.waitFor((all) => emailArrivals(all, "/crash").length > 2, LOCK_MS + 2 * STALLED_MS)).rejects.toThrow(
      TIMED_OUT,
    );
    expect(await deliveryRows(acct, { event_id: eventId })).toHaveLength(1);
  });
});
