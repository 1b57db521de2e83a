import { callApi } from "../support/api-call.js";
import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";
import { createHook, startHookReceiver } from "../support/hooks.js";
import { endChaosFile, freePort, startApiProcess, startDispatcher, waitForOutput } from "./support/processes.js";

/**
 * Replicas share the work (issues "Accepted means delivered" and "Fast and flat"): two API
 * processes and two dispatcher processes on one database and one Redis take 10,000 events (a
 * hundred batches, alternately to each API); every unit of work is claimed once (the relays'
 * webhook_work_claimed_total add up to the units: a unit is claimed again only when its lease
 * expires, and none may here, with the default 20 s visibility timeout), each delivered once (one
 * attempt row per destination, no job run twice: the attempt counters add up too), and none is
 * lost: the work queue is empty at the end.
 */
const EVENTS = 10_000;

async function metric(port: number, pattern: RegExp): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return [...text.matchAll(new RegExp(pattern.source, "gm"))].reduce((sum, m) => sum + Number(m[1]), 0);
}

describe("two APIs and two dispatchers", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ dispatcher: false });
  });
  afterAll(() => endChaosFile(stack));

  test(`${EVENTS} events: claimed once, delivered once each, none lost`, async () => {
    const acct = await stack.newAccount();
    const hr = await startHookReceiver(stack);
    const hook = await createHook(acct, hr, "/replicas", ["message.sent"]);
    const apiPorts = [await freePort(), await freePort()];
    const metricsPorts = [await freePort(), await freePort()];
    const apis = apiPorts.map((port, i) =>
      startApiProcess(`api-${i}`, { PORT: String(port), QUEUE_PREFIX: stack.prefix, LOG_LEVEL: "info", RATE_LIMIT_PER_MINUTE: "0" }),
    );
    const dispatchers = metricsPorts.map((port, i) =>
      startDispatcher(`dispatcher-${i}`, { METRICS_PORT: String(port), QUEUE_PREFIX: stack.prefix, LOG_LEVEL: "info" }),
    );
    await Promise.all([
      ...apis.map((a) => waitForOutput(a, "api listening")),
      ...dispatchers.map((d) => waitForOutput(d, "dispatcher started")),
    ]);

    const ids: string[] = [];
    for (let batch = 0; batch < EVENTS / 100; batch++) {
      const res = await callApi(`http://127.0.0.1:${apiPorts[batch % 2]}`, acct.apiKey, "POST", "/v1/events/batch", {
        events: Array.from({ length: 100 }, () => ({ event_type: "message.sent", data: sampleData("message.sent") })),
      });
      expect(res.status).toBe(201);
      ids.push(...res.body.data.map((e: { event_id: string }) => e.event_id));
    }
    // 1 test event + one per event; counted cheaply at each arrival.
    await hr.receiver.waitFor((a) => a.length >= EVENTS + 1, 240_000);
    await waitUntil(
      () => stack.prisma.event.count({ where: { accountId: acct.accountId, status: "delivered" } }),
      (n) => n === EVENTS,
      30_000,
      250,
    );

    const arrivals = hr.receiver.arrivals.filter((a) => a.path === "/replicas" && a.event === "message.sent");
    expect(arrivals).toHaveLength(EVENTS);
    expect(new Set(arrivals.map((a) => a.messageId)).size).toBe(EVENTS);
    expect(arrivals.every((a) => a.verified)).toBe(true);
    const rows = await stack.pool.query(
      "SELECT count(*)::int AS n, count(DISTINCT destination_id)::int AS d FROM deliveries WHERE webhook_id = $1 AND trigger = 'initial'",
      [hook.id],
    );
    expect(rows.rows[0]).toEqual({ n: EVENTS, d: EVENTS });
    expect((await stack.pool.query("SELECT count(*)::int AS n FROM work_items WHERE queue_prefix = $1", [stack.prefix])).rows[0].n).toBe(0);

    const claimed = await Promise.all(metricsPorts.map((port) => metric(port, /^webhook_work_claimed_total (\d+)/)));
    const attempts = await Promise.all(metricsPorts.map((port) => metric(port, /^webhook_delivery_attempts_total\{[^}]*\} (\d+)/)));
    console.log(`replicas: claimed ${claimed.join(" + ")}, attempts ${attempts.join(" + ")} (dispatcher 0 + 1)`);
    expect(claimed[0] + claimed[1]).toBe(EVENTS + 1);
    expect(attempts[0] + attempts[1]).toBe(EVENTS + 1);
    expect(Math.min(...attempts)).toBeGreaterThan(0);
  }, 400_000);
});
