import { verify } from "@mailhooks/verify";
import { callApi } from "../support/api-call.js";
import { sampleData, startStack, TIMED_OUT, waitUntil, type Account, type Stack } from "../support/stack.js";
import {
  at,
  closedPort,
  createHook,
  deliveryRows,
  emailArrivals,
  envelopeOf,
  eventOf,
  expectValidation,
  startHookReceiver,
} from "../support/hooks.js";

/**
 * Retries, failures and the test event (docs/api.md, "Retries"; spec "States and transitions").
 * The retry schedule and the receiver's deadline are shortened through the environment only.
 */
const DELAYS = [300, 600, 900];
const TIMEOUT_MS = 800;
/** Upper slack on a retry's start: queue promotion, a database write, a TLS handshake. */
const MARGIN_MS = 1500;

describe("retries and failures", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: DELAYS.join(","), DELIVERY_TIMEOUT_MS: String(TIMEOUT_MS) } });
  });
  afterAll(() => stack.close());

  // Each test runs in an account of its own: an event fans out to every webhook of its account.
  let acct: Account;
  beforeEach(async () => {
    acct = await stack.newAccount();
  });

  const postEvent = async (eventType = "message.sent") => {
    const res = await acct.api("POST", "/v1/events", { event_type: eventType, data: sampleData(eventType) });
    expect(res.status).toBe(201);
    return res.body.event_id as string;
  };
  const eventDetail = (eventId: string) => acct.api("GET", `/v1/events/${eventId}`);
  const rowsOf = (eventId: string) => deliveryRows(acct, { event_id: eventId });

  test("an always-500 endpoint gets the initial attempt and exactly 3 retries, spaced by the delays, then fails", async () => {
    const hr = await startHookReceiver(stack, (a) => (a.event === "webhook.test" ? {} : { status: 500 }));
    const hook = await createHook(acct, hr, "/always-500", ["message.sent"]);
    const eventId = await postEvent();

    const arrivals = emailArrivals(await hr.receiver.waitFor((a) => emailArrivals(a, "/always-500").length >= 4, 15_000), "/always-500");
    const detail = await waitUntil(
      () => eventDetail(eventId),
      (r) => r.body.status !== "pending",
    );
    expect(detail.body.status).toBe("failed");
    expect(detail.body.destinations).toEqual([{ webhook_id: hook.id, url: hook.url, status: "failed", attempts: 4 }]);

    // Every attempt carries the same envelope bytes.
    expect(new Set(arrivals.map((a) => a.body)).size).toBe(1);
    expect(JSON.stringify(detail.body.payload)).toBe(arrivals[0].body);
    for (let i = 1; i < 4; i++) {
      const gap = arrivals[i].receivedAt - arrivals[i - 1].receivedAt;
      expect(gap).toBeGreaterThanOrEqual(DELAYS[i - 1]);
      expect(gap).toBeLessThan(DELAYS[i - 1] + MARGIN_MS);
    }

    const rows = await rowsOf(eventId);
    expect(rows.map((r) => [r.attempt, r.trigger, r.response_status, r.error])).toEqual([
      [0, "initial", 500, null],
      [1, "retry", 500, null],
      [2, "retry", 500, null],
      [3, "retry", 500, null],
    ]);
    for (const r of rows) expect(r).toMatchObject({ event_id: eventId, webhook_id: hook.id, url: hook.url });

    // No 5th attempt: it would have come at most the last delay + margin after the 4th.
    await expect(hr.receiver.waitFor((a) => emailArrivals(a, "/always-500").length > 4, 1_200)).rejects.toThrow(TIMED_OUT);
    expect(await rowsOf(eventId)).toHaveLength(4);
  });

  test("a 2xx on retry 2 stops the retries and delivers", async () => {
    const hr = await startHookReceiver(stack, (a, nth) => (a.event === "webhook.test" ? {} : { status: nth < 3 ? 500 : 200 }));
    const hook = await createHook(acct, hr, "/third-time", ["message.sent"]);
    const eventId = await postEvent();

    await hr.receiver.waitFor((a) => emailArrivals(a, "/third-time").length >= 3, 15_000);
    const detail = await waitUntil(
      () => eventDetail(eventId),
      (r) => r.body.status !== "pending",
    );
    expect(detail.body.status).toBe("delivered");
    expect(detail.body.destinations).toEqual([{ webhook_id: hook.id, url: hook.url, status: "delivered", attempts: 3 }]);

    const rows = await rowsOf(eventId);
    expect(rows.map((r) => [r.attempt, r.trigger, r.response_status, r.error])).toEqual([
      [0, "initial", 500, null],
      [1, "retry", 500, null],
      [2, "retry", 200, null],
    ]);
    // Retry 3 would have come DELAYS[2] after the success.
    await expect(hr.receiver.waitFor((a) => emailArrivals(a, "/third-time").length > 3, DELAYS[2] + 300)).rejects.toThrow(TIMED_OUT);
    expect(await rowsOf(eventId)).toHaveLength(3);
  });

  test("a receiver slower than DELIVERY_TIMEOUT_MS is a timeout (no status) and is retried", async () => {
    const hr = await startHookReceiver(stack, (a, nth) =>
      a.event === "webhook.test" ? {} : nth === 1 ? { delayMs: TIMEOUT_MS + 1_000 } : {},
    );
    const hook = await createHook(acct, hr, "/slow", ["message.sent"]);
    const eventId = await postEvent();

    const detail = await waitUntil(
      () => eventDetail(eventId),
      (r) => r.body.status !== "pending",
      15_000,
    );
    expect(detail.body.status).toBe("delivered");
    const rows = await rowsOf(eventId);
    expect(rows.map((r) => [r.attempt, r.trigger, r.response_status, r.error])).toEqual([
      [0, "initial", null, "timeout"],
      [1, "retry", 200, null],
    ]);
    expect(rows[0].duration_ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect(rows[0].duration_ms).toBeLessThan(TIMEOUT_MS + 1_000);
    expect(detail.body.destinations).toEqual([{ webhook_id: hook.id, url: hook.url, status: "delivered", attempts: 2 }]);
  });

  test("a 302 is a failure recorded with its status, and its Location is never followed", async () => {
    const hr: Awaited<ReturnType<typeof startHookReceiver>> = await startHookReceiver(stack, (a) =>
      a.event === "webhook.test" ? {} : { status: 302, headers: { location: hr.url("/redirect-target") } },
    );
    const hook = await createHook(acct, hr, "/redirecting", ["message.sent"]);
    // The target would verify a followed request: the same secret is known there.
    hr.secrets.set("/redirect-target", hook.secret);
    const eventId = await postEvent();

    const detail = await waitUntil(
      () => eventDetail(eventId),
      (r) => r.body.status !== "pending",
      15_000,
    );
    expect(detail.body.status).toBe("failed");
    const rows = await rowsOf(eventId);
    expect(rows.map((r) => [r.attempt, r.trigger, r.response_status, r.error])).toEqual([
      [0, "initial", 302, null],
      [1, "retry", 302, null],
      [2, "retry", 302, null],
      [3, "retry", 302, null],
    ]);
    expect(emailArrivals(hr.receiver.arrivals, "/redirecting")).toHaveLength(4);
    expect(at(hr.receiver.arrivals, "/redirect-target")).toHaveLength(0);
  });

  test("only absolute https:// URLs are accepted at registration", async () => {
    const cases: unknown[] = [
      { url: "http://localhost/hooks", events: ["message.sent"] },
      { url: "ftp://example.com/hooks", events: ["message.sent"] },
      { url: "/hooks/relative", events: ["message.sent"] },
      { url: "example.com/hooks", events: ["message.sent"] },
      { events: ["message.sent"] },
    ];
    for (const body of cases) {
      const res = await acct.api("POST", "/v1/webhooks", body);
      expectValidation(res, "url");
    }
    const webhooks = await stack.prisma.webhook.count({
      where: {
        accountId: acct.accountId,
        url: { in: ["http://localhost/hooks", "ftp://example.com/hooks", "/hooks/relative", "example.com/hooks"] },
      },
    });
    expect(webhooks).toBe(0);
  });

  test("connection refused is a connection_error (no status) and is retried", async () => {
    const url = `https://localhost:${await closedPort()}/nobody`;
    const created = await acct.api("POST", "/v1/webhooks", { url, events: ["message.sent"] });
    expect(created.status).toBe(201);
    const eventId = await postEvent();

    const rows = await waitUntil(
      () => rowsOf(eventId),
      (r) => r.length >= 2,
      15_000,
    );
    expect(rows.slice(0, 2).map((r) => [r.attempt, r.trigger, r.response_status, r.error])).toEqual([
      [0, "initial", null, "connection_error"],
      [1, "retry", null, "connection_error"],
    ]);
    const testRows = await waitUntil(
      () => deliveryRows(acct, { webhook_id: created.body.id }).then((r) => r.filter((x) => x.trigger === "test")),
      (r) => r.length === 1,
    );
    expect(testRows[0]).toMatchObject({ response_status: null, error: "connection_error", event_id: null });
  });

  test("a receiver that cannot verify the signature answers 401: recorded and retried", async () => {
    const hr = await startHookReceiver(stack, undefined, { secretFor: () => "whsec_not-the-webhook-secret" });
    const hook = await createHook(acct, hr, "/wrong-secret", ["message.sent"]);
    const eventId = await postEvent();

    const rows = await waitUntil(
      () => rowsOf(eventId),
      (r) => r.length >= 2,
      15_000,
    );
    expect(rows.slice(0, 2).map((r) => [r.attempt, r.trigger, r.response_status, r.error])).toEqual([
      [0, "initial", 401, null],
      [1, "retry", 401, null],
    ]);
    const emails = await hr.receiver.waitFor((a) => emailArrivals(a, "/wrong-secret").length >= 2);
    for (const a of emailArrivals(emails, "/wrong-secret")) {
      expect(a.verified).toBe(false);
      expect(a.status).toBe(401);
      // The signature was right for the webhook's own secret.
      expect(
        verify(hook.secret, { "x-service-timestamp": a.timestamp, "x-service-signature": a.signature }, a.body, {
          now: new Date(a.receivedAt),
        }),
      ).toEqual(JSON.parse(a.body));
    }
  });

  test("a new webhook gets exactly one webhook.test event, logged with trigger test and no event", async () => {
    const hr = await startHookReceiver(stack);
    const before = Math.floor(Date.now() / 1000);
    const hook = await createHook(acct, hr, "/test-event", ["message.opened"]);

    const arrivals = at(await hr.receiver.waitFor((a) => at(a, "/test-event").length >= 1), "/test-event");
    const arrival = arrivals[0];
    const envelope = envelopeOf(arrival);
    expect(Number.isInteger(envelope.timestamp)).toBe(true);
    expect(envelope.timestamp).toBeGreaterThanOrEqual(before);
    expect(envelope.timestamp).toBeLessThanOrEqual(Math.floor(Date.now() / 1000));
    // Exact bytes: compact, keys in this order.
    expect(arrival.body).toBe(
      JSON.stringify({ event: "webhook.test", timestamp: envelope.timestamp, data: { webhookId: hook.id, url: hook.url } }),
    );
    expect(
      verify(hook.secret, { "x-service-timestamp": arrival.timestamp, "x-service-signature": arrival.signature }, arrival.body, {
        now: new Date(arrival.receivedAt),
      }),
    ).toEqual(JSON.parse(arrival.body));

    const rows = await waitUntil(
      () => deliveryRows(acct, { webhook_id: hook.id }),
      (r) => r.length >= 1,
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ event_id: null, webhook_id: hook.id, url: hook.url, trigger: "test", attempt: 0, error: null });
    // 200 unless the test event beat the test to learning the secret (then the receiver said 401).
    expect(rows[0].response_status).toBe(arrival.status);
    // The test event is not an email event: not stored as one, not listed under /v1/events.
    expect(await stack.prisma.event.count({ where: { accountId: acct.accountId } })).toBe(0);
    const listed = await acct.api("GET", "/v1/events");
    expect(listed.status).toBe(200);
    expect(listed.body).toEqual({ data: [], next_cursor: null });
    expect(at(hr.receiver.arrivals, "/test-event")).toHaveLength(1);
  });

  test("a failing test event is not retried", async () => {
    const hr = await startHookReceiver(stack, () => ({ status: 500 }), { secretFor: () => undefined });
    const created = await acct.api("POST", "/v1/webhooks", { url: hr.url("/test-fails"), events: ["message.sent"] });
    expect(created.status).toBe(201);

    await hr.receiver.waitFor((a) => at(a, "/test-fails").length >= 1);
    const rows = await waitUntil(
      () => deliveryRows(acct, { webhook_id: created.body.id }),
      (r) => r.length >= 1,
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ trigger: "test", attempt: 0, event_id: null, response_status: 404, error: null });
    expect(eventOf(at(hr.receiver.arrivals, "/test-fails")[0])).toBe("webhook.test");
    // A retry would have come after the first delay.
    await expect(hr.receiver.waitFor((a) => at(a, "/test-fails").length > 1, DELAYS[0] + 900)).rejects.toThrow(TIMED_OUT);
    expect(await deliveryRows(acct, { webhook_id: created.body.id })).toHaveLength(1);
  });

  test("an event fans out to every enabled webhook subscribed to its kind, and only to those", async () => {
    const hr = await startHookReceiver(stack);
    const sentOnly = await createHook(acct, hr, "/fan/sent", ["message.sent"]);
    const sentAndOpened = await createHook(acct, hr, "/fan/sent-opened", ["message.opened", "message.sent"]);
    const openedOnly = await createHook(acct, hr, "/fan/opened", ["message.opened"]);
    // Subscribed to the kind, but disabled, or deleted: no destination.
    const disabled = await createHook(acct, hr, "/fan/disabled", ["message.sent"]);
    expect((await acct.api("PATCH", `/v1/webhooks/${disabled.id}`, { status: "disabled" })).status).toBe(200);
    const deleted = await createHook(acct, hr, "/fan/deleted", ["message.sent"]);
    expect((await acct.api("DELETE", `/v1/webhooks/${deleted.id}`)).status).toBe(204);
    // Another account's webhook on the same kind gets nothing from this account.
    const otherKey = await stack.newAccountKey();
    const other = await callApi(stack.baseUrl, otherKey, "POST", "/v1/webhooks", {
      url: hr.url("/fan/other-account"),
      events: ["message.sent"],
    });
    expect(other.status).toBe(201);

    const eventId = await postEvent("message.sent");
    const detail = await waitUntil(
      () => eventDetail(eventId),
      (r) => r.body.status !== "pending",
    );
    expect(detail.body.status).toBe("delivered");
    const destinations = [...detail.body.destinations].sort((a: { webhook_id: string }, b: { webhook_id: string }) =>
      a.webhook_id.localeCompare(b.webhook_id),
    );
    expect(destinations).toEqual(
      [
        { webhook_id: sentOnly.id, url: sentOnly.url, status: "delivered", attempts: 1 },
        { webhook_id: sentAndOpened.id, url: sentAndOpened.url, status: "delivered", attempts: 1 },
      ].sort((a, b) => a.webhook_id.localeCompare(b.webhook_id)),
    );
    const arrivals = hr.receiver.arrivals;
    expect(at(arrivals, "/fan/sent", "message.sent")).toHaveLength(1);
    expect(at(arrivals, "/fan/sent-opened", "message.sent")).toHaveLength(1);
    expect(at(arrivals, "/fan/sent", "message.sent")[0].body).toBe(JSON.stringify(detail.body.payload));
    expect(at(arrivals, "/fan/opened", "message.sent")).toHaveLength(0);
    expect(at(arrivals, "/fan/disabled", "message.sent")).toHaveLength(0);
    expect(at(arrivals, "/fan/deleted", "message.sent")).toHaveLength(0);
    expect(at(arrivals, "/fan/other-account", "message.sent")).toHaveLength(0);
    const rows = await rowsOf(eventId);
    expect(rows.map((r) => r.webhook_id).sort()).toEqual([sentOnly.id, sentAndOpened.id].sort());
    expect(rows.every((r) => ![openedOnly.id, disabled.id, deleted.id].includes(r.webhook_id))).toBe(true);
  });
});
