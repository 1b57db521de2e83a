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
 * Its attempt's lease (docs/scheduler.md) is renewed by its heartbeat while it lives, so another
 * running dispatcher leaves the attempt alone; once it is dead nobody renews the lease, which
 * expires within the visibility timeout (DISPATCHER_VISIBILITY_TIMEOUT_MS, short here by
 * configuration), and the other dispatcher's next claim takes the work over and makes the attempt
 * again. Delivery is at least once: the receiver may get the same envelope twice (it de-duplicates
 * by event + messageId). The killed attempt wrote nothing, so it is not counted: the deliveries
 * log shows the attempts whose outcome is known, numbered without gaps.
 */
/** The longest the first request is held: the test ends the hold as soon as A is killed. Long
 * enough for a second dispatcher to start meanwhile (a few seconds on a quiet machine, much more
 * when the machine is loaded). */
const HOLD_MS = 30_000;
const VISIBILITY_MS = 2_000;
/** After the visibility timeout: a claim (the relay wakes at the lease's expiry), the job, a TLS handshake, on a loaded machine. */
const TAKEOVER_ROOM_MS = 3_000;

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
      DISPATCHER_VISIBILITY_TIMEOUT_MS: String(VISIBILITY_MS),
      DELIVERY_TIMEOUT_MS: String(HOLD_MS + 10_000),
    };
    const a = startDispatcher("dispatcher-a", env);
    // A has the request in flight: the receiver got it and holds its answer.
    await waitUntil(
      async () => inFlight,
      (t) => t > 0,
      30_000,
      10,
    );
    const [{ id: destinationId }] = await stack.prisma.destination.findMany({ where: { eventId }, select: { id: true } });
    const leaseOf = async () =>
      (
        await stack.pool.query<{ lease: number; until_ms: number }>(
          "SELECT lease, (extract(epoch FROM leased_until) * 1000)::float8 AS until_ms FROM work_items WHERE work_id = $1",
          [destinationId],
        )
      ).rows[0];
    const claimed = await leaseOf();
    // A second replica starts and is ready (its worker is connected to the queue).
    const b = startDispatcher("dispatcher-b", env);
    await waitUntil(
      () => deliveries.getWorkersCount(),
      (n) => n >= 2,
      20_000,
    );
    // While A lives, its heartbeat renews the lease past its first expiry, and B's claims (each
    // of which ends the expired leases it sees) leave the attempt alone.
    await waitUntil(
      async () => (await stack.pool.query<{ ms: number }>("SELECT (extract(epoch FROM now()) * 1000)::float8 AS ms")).rows[0].ms,
      (now) => now > claimed.until_ms + VISIBILITY_MS,
      30_000,
      100,
    );
    const renewed = await leaseOf();
    expect(renewed.lease).toBe(claimed.lease);
    expect(renewed.until_ms).toBeGreaterThan(claimed.until_ms + VISIBILITY_MS);
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
    // The takeover came once A was dead and its lease had expired, not before, and within the
    // visibility timeout of the kill (A's last renewal came before it), plus a claim.
    expect(second.receivedAt).toBeGreaterThan(killed.at);
    expect(second.receivedAt - killed.at).toBeLessThan(VISIBILITY_MS + TAKEOVER_ROOM_MS);

    // One attempt in the log: B's, the initial one (the killed try consumed no attempt).
    const rows = await deliveryRows(acct, { event_id: eventId });
    expect(rows.map((r) => [r.attempt, r.trigger, r.response_status, r.error])).toEqual([[0, "initial", 200, null]]);
    expect(b.running()).toBe(true);

    // Nothing more comes: the work ended with its row, and B's claims find nothing to take over.
    expect(await leaseOf()).toBeUndefined();
    await expect(hr.receiver.waitFor((all) => emailArrivals(all, "/crash").length > 2, 2 * VISIBILITY_MS)).rejects.toThrow(TIMED_OUT);
    expect(await deliveryRows(acct, { event_id: eventId })).toHaveLength(1);
  });
});
