import http from "node:http";
import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";
import { createHook, deliveryRows, emailArrivals, startHookReceiver } from "../support/hooks.js";
import { endChaosFile, freePort, startApiProcess, startDispatcher, waitForExit, waitForOutput } from "./support/processes.js";

/**
 * Issue 4, item 9: SIGTERM drains in-flight work within a bound and exits 0.
 *
 * The dispatcher stops claiming (its slots leave the deployment at once), lets every attempt in
 * flight finish and be recorded (an attempt lasts at most DELIVERY_TIMEOUT_MS, then one database
 * write) with its lease renewed meanwhile, and exits 0; past DELIVERY_TIMEOUT_MS + 10 s it gives
 * up with exit code 1. Work it had not claimed stays in the work queue for the next dispatcher. The
 * API stops accepting connections, answers the requests it is in the middle of, and exits 0.
 */
const HOLD_MS = 1_500;
const DELIVERY_TIMEOUT_MS = 5_000;

describe("graceful shutdown", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ dispatcher: false });
  });
  afterAll(() => endChaosFile(stack));

  test("SIGTERM lets the dispatcher finish and record its in-flight attempt, then exit 0", async () => {
    const acct = await stack.newAccount();
    let inFlight = 0;
    const hr = await startHookReceiver(stack, (a, nth) => {
      if (a.event === "webhook.test") return {};
      if (nth === 1) inFlight = Date.now();
      return nth === 1 ? { delayMs: HOLD_MS } : {};
    });
    const hook = await createHook(acct, hr, "/drain", ["message.sent"]);
    const first = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(first.status).toBe(201);

    // LOG_LEVEL=info: the test waits for the dispatcher's own "draining" line.
    const env = { QUEUE_PREFIX: stack.prefix, DELIVERY_TIMEOUT_MS: String(DELIVERY_TIMEOUT_MS), LOG_LEVEL: "info" };
    const dispatcher = startDispatcher("dispatcher", env);
    await waitUntil(
      async () => inFlight,
      (t) => t > 0,
      30_000,
      10,
    );
    const signalledAt = Date.now();
    dispatcher.child.kill("SIGTERM");
    await waitForOutput(dispatcher, "draining in-flight deliveries", 5_000);

    // An event posted while it drains is not taken by the stopping dispatcher.
    const second = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(second.status).toBe(201);

    const exit = await waitForExit(dispatcher, DELIVERY_TIMEOUT_MS + 10_000 + 2_000);
    expect({ code: exit.code, signal: exit.signal }).toEqual({ code: 0, signal: null });
    expect(exit.at - signalledAt).toBeLessThan(DELIVERY_TIMEOUT_MS + 10_000);
    // It waited for the answer: it exited after the receiver answered, not before.
    const answered = emailArrivals(hr.receiver.arrivals, "/drain");
    expect(answered).toHaveLength(1);
    expect(answered[0].status).toBe(200);
    expect(exit.at).toBeGreaterThanOrEqual(inFlight + HOLD_MS);

    // Recorded before the exit: the first event is delivered, with its one attempt.
    const detail = await acct.api("GET", `/v1/events/${first.body.event_id}`);
    expect(detail.body.status).toBe("delivered");
    expect(detail.body.destinations).toEqual([{ webhook_id: hook.id, url: hook.url, status: "delivered", attempts: 1 }]);
    const rows = await deliveryRows(acct, { event_id: first.body.event_id });
    expect(rows.map((r) => [r.attempt, r.trigger, r.response_status, r.error])).toEqual([[0, "initial", 200, null]]);
    // The second one was left in the work queue, never claimed; the stopped dispatcher's slots are gone.
    expect((await acct.api("GET", `/v1/events/${second.body.event_id}`)).body.status).toBe("pending");
    expect(await deliveryRows(acct, { event_id: second.body.event_id })).toEqual([]);
    const { rows: waiting } = await stack.pool.query(
      "SELECT q.lease, q.leased_until FROM work_items q JOIN destinations d ON d.id = q.work_id WHERE d.event_id = $1",
      [second.body.event_id],
    );
    expect(waiting).toEqual([{ lease: 0, leased_until: null }]);
    expect((await stack.pool.query("SELECT count(*)::int AS n FROM dispatchers WHERE queue_prefix = $1", [stack.prefix])).rows[0].n).toBe(
      0,
    );

    // The next dispatcher delivers it.
    startDispatcher("dispatcher-next", { ...env, LOG_LEVEL: "warn" });
    const next = await waitUntil(
      () => acct.api("GET", `/v1/events/${second.body.event_id}`),
      (r) => r.body.status !== "pending",
      30_000,
    );
    expect(next.body.status).toBe("delivered");
    expect(emailArrivals(hr.receiver.arrivals, "/drain")).toHaveLength(2);
  });

  test("SIGTERM lets the API answer the request it is reading, then exit 0", async () => {
    const acct = await stack.newAccount();
    const port = await freePort();
    const api = startApiProcess("api", { PORT: String(port), QUEUE_PREFIX: stack.prefix, LOG_LEVEL: "info" });
    await waitForOutput(api, "api listening", 30_000);
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);

    // A request in progress when SIGTERM arrives: the server has read its headers (it answered
    // `100 Continue`), its body is not sent yet.
    const body = JSON.stringify({ event_type: "message.sent", data: sampleData("message.sent") });
    const req = http.request({
      host: "127.0.0.1",
      port,
      path: "/v1/events",
      method: "POST",
      headers: {
        authorization: `Bearer ${acct.apiKey}`,
        "content-type": "application/json",
        "content-length": Buffer.byteLength(body),
        expect: "100-continue",
      },
    });
    const continued = new Promise<void>((resolve) => req.once("continue", () => resolve()));
    const response = new Promise<{ status: number; body: any; connection: string | undefined }>((resolve, reject) => {
      req.on("error", reject);
      req.on("response", (res) => {
        let text = "";
        res.on("data", (c) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text), connection: res.headers.connection }));
      });
    });
    req.flushHeaders();
    await continued;

    const signalledAt = Date.now();
    api.child.kill("SIGTERM");
    await waitForOutput(api, '"stopping"', 5_000);
    // No new connection is accepted any more.
    await expect(fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(2_000) })).rejects.toThrow();
    req.end(body);
    const answer = await response;
    expect(answer.status).toBe(201);
    // ...telling the (keep-alive) client that the connection closes, so it cannot hold the server.
    expect(answer.connection).toBe("close");
    const exit = await waitForExit(api, 15_000);
    expect({ code: exit.code, signal: exit.signal }).toEqual({ code: 0, signal: null });
    expect(exit.at - signalledAt).toBeLessThan(3_000);
    // The event it accepted while stopping is stored.
    expect((await acct.api("GET", `/v1/events/${answer.body.event_id}`)).status).toBe(200);
  });

  test("SIGTERM answers a waiting pull of a listen webhook at once (empty), then exits 0", async () => {
    const acct = await stack.newAccount();
    const port = await freePort();
    const api = startApiProcess("api-pull", { PORT: String(port), QUEUE_PREFIX: stack.prefix, LOG_LEVEL: "info" });
    await waitForOutput(api, "api listening", 30_000);
    const call = (method: string, path: string, body?: unknown) =>
      fetch(`http://127.0.0.1:${port}${path}`, {
        method,
        headers: { authorization: `Bearer ${acct.apiKey}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    const hook = (await (await call("POST", "/v1/webhooks", { url: null, mode: "listen", events: ["message.sent"] })).json()) as {
      id: string;
    };
    const [test] = ((await (await call("GET", `/v1/webhooks/${hook.id}/pending`)).json()) as { data: { delivery_id: string }[] }).data;
    expect((await call("POST", `/v1/webhooks/${hook.id}/pending/${test.delivery_id}`, { status: 200, duration_ms: 1 })).status).toBe(200);
    const before = (await stack.pool.query("SELECT last_pulled_at FROM webhooks WHERE id = $1", [hook.id])).rows[0].last_pulled_at;

    const pulling = call("GET", `/v1/webhooks/${hook.id}/pending?wait=30`);
    // It waits once this pull was stamped.
    await waitUntil(
      async () => (await stack.pool.query("SELECT last_pulled_at FROM webhooks WHERE id = $1", [hook.id])).rows[0].last_pulled_at,
      (at) => at.getTime() !== before.getTime(),
    );
    const signalledAt = Date.now();
    api.child.kill("SIGTERM");
    const answer = await pulling;
    expect(answer.status).toBe(200);
    expect(((await answer.json()) as { data: unknown[] }).data).toEqual([]);
    const exit = await waitForExit(api, 15_000);
    expect({ code: exit.code, signal: exit.signal }).toEqual({ code: 0, signal: null });
    expect(exit.at - signalledAt).toBeLessThan(3_000);
  });
});
