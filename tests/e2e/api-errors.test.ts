import { randomUUID } from "node:crypto";
import { createApiKey, revokeApiKey } from "@mailhooks/access";
import { sampleData, startStack, waitUntil, type Account, type Stack } from "../support/stack.js";
import { apiAs, at, createHook, deliveryRows, expectError, expectValidation, startHookReceiver } from "../support/hooks.js";

/**
 * The API's error paths (docs/api.md, "Errors"), idempotency (docs/api.md, "Conventions"), the deliveries list's
 * pagination (docs/api.md, "Conventions") and readiness. Every error is checked for its status, its code and the
 * error shape.
 */

describe("API errors", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "300,600,900", DELIVERY_TIMEOUT_MS: "2000" } });
  });
  afterAll(() => stack.close());

  let acct: Account;
  beforeEach(async () => {
    acct = await stack.newAccount();
  });

  const validEvent = (eventType = "message.sent", overrides: Record<string, unknown> = {}) => ({
    event_type: eventType,
    data: sampleData(eventType, overrides),
  });
  const eventCount = (accountId: string, where: Record<string, unknown> = {}) =>
    stack.prisma.event.count({ where: { accountId, ...where } });

  describe("400 invalid_json", () => {
    test.each(["/v1/webhooks", "/v1/events"])("a malformed JSON body on POST %s", async (route) => {
      for (const body of ['{"url": ', "{'single': 'quotes'}", '{"a":1}}', "nope"]) {
        expectError(await acct.api("POST", route, body, { "content-type": "application/json" }), 400, "invalid_json");
      }
      expect(await eventCount(acct.accountId)).toBe(0);
      expect(await stack.prisma.webhook.count({ where: { accountId: acct.accountId } })).toBe(0);
    });
  });

  describe("401 unauthorized", () => {
    test("missing, malformed and unknown keys", async () => {
      const routes: [string, string, unknown?][] = [
        ["GET", "/v1/deliveries"],
        ["POST", "/v1/events", validEvent()],
        ["POST", "/v1/webhooks", { url: "https://example.com/h", events: ["message.sent"] }],
        ["GET", "/v1/webhooks/wh_0"],
        ["GET", "/v1/no-such-route"],
      ];
      const unknownKey = `whk_${"0".repeat(12)}_${"A".repeat(43)}`;
      // Right prefix, wrong secret part.
      const forgedKey = `${acct.apiKey.slice(0, 17)}${"B".repeat(43)}`;
      const headerSets: Record<string, string>[] = [
        {},
        { authorization: "" },
        { authorization: acct.apiKey },
        { authorization: `Basic ${Buffer.from(`user:${acct.apiKey}`).toString("base64")}` },
        { authorization: "Bearer" },
        { authorization: `Bearer ${acct.apiKey} extra` },
        { authorization: "Bearer not-a-key" },
        { authorization: `Bearer ${unknownKey}` },
        { authorization: `Bearer ${forgedKey}` },
      ];
      for (const [method, route, body] of routes) {
        for (const headers of headerSets) {
          const res = await apiAs(stack, null, method, route, body, headers);
          expectError(res, 401, "unauthorized");
        }
      }
      expect(await eventCount(acct.accountId)).toBe(0);
    });

    test("a revoked key is refused as soon as PostgreSQL announces the revocation (the cached key is forgotten)", async () => {
      const issued = await createApiKey(stack.prisma, `test-revoke-${randomUUID()}`);
      expect((await apiAs(stack, issued.key, "GET", "/v1/deliveries")).status).toBe(200);
      expect(await revokeApiKey(stack.prisma, issued.id)).toBe(true);
      // The notification reaches the API within moments of the commit.
      await waitUntil(
        () => apiAs(stack, issued.key, "GET", "/v1/deliveries"),
        (r) => r.status === 401,
        2_000,
        5,
      );
      expectError(await apiAs(stack, issued.key, "GET", "/v1/deliveries"), 401, "unauthorized");
      expectError(await apiAs(stack, issued.key, "POST", "/v1/events", validEvent()), 401, "unauthorized");
      expect(await eventCount(issued.account_id)).toBe(0);
      // Other keys are unaffected.
      expect((await acct.api("GET", "/v1/deliveries")).status).toBe(200);
    });
  });

  describe("404 not_found", () => {
    test("unknown routes, inside and outside /v1", async () => {
      expectError(await acct.api("GET", "/v1/no-such-route"), 404, "not_found");
      expectError(await acct.api("POST", "/v1/no-such-route", { a: 1 }), 404, "not_found");
      expectError(await acct.api("DELETE", "/v1/events"), 404, "not_found");
      expectError(await apiAs(stack, null, "GET", "/no-such-route"), 404, "not_found");
      expectError(await apiAs(stack, null, "GET", "/"), 404, "not_found");
    });

    test("unknown webhook and event ids", async () => {
      for (const id of ["wh_0190000000007000800000000000000a", "nope", "evt_0190000000007000800000000000000a"]) {
        expectError(await acct.api("GET", `/v1/webhooks/${id}`), 404, "not_found");
        expectError(await acct.api("GET", `/v1/webhooks/${id}/secret`), 404, "not_found");
      }
      for (const id of ["evt_0190000000007000800000000000000a", "nope", "wh_0190000000007000800000000000000a"]) {
        expectError(await acct.api("GET", `/v1/events/${id}`), 404, "not_found");
      }
    });

    test("another account's webhook and event answer 404, not 403", async () => {
      const otherKey = await stack.newAccountKey();
      const hook = await apiAs(stack, otherKey, "POST", "/v1/webhooks", { url: "https://localhost:9/other", events: ["message.sent"] });
      expect(hook.status).toBe(201);
      const event = await apiAs(stack, otherKey, "POST", "/v1/events", validEvent());
      expect(event.status).toBe(201);
      // Visible to its owner...
      expect((await apiAs(stack, otherKey, "GET", `/v1/webhooks/${hook.body.id}`)).status).toBe(200);
      expect((await apiAs(stack, otherKey, "GET", `/v1/events/${event.body.event_id}`)).status).toBe(200);
      // ...and to nobody else.
      expectError(await acct.api("GET", `/v1/webhooks/${hook.body.id}`), 404, "not_found");
      expectError(await acct.api("GET", `/v1/webhooks/${hook.body.id}/secret`), 404, "not_found");
      expectError(await acct.api("GET", `/v1/events/${event.body.event_id}`), 404, "not_found");
      // Lists filtered on another account's ids are empty, not errors.
      expect((await acct.api("GET", `/v1/deliveries?event_id=${event.body.event_id}`)).body).toEqual({ data: [], next_cursor: null });
      expect((await acct.api("GET", `/v1/deliveries?webhook_id=${hook.body.id}`)).body).toEqual({ data: [], next_cursor: null });
    });
  });

  describe("413, 415", () => {
    test("a JSON body over 256 KiB is 413 payload_too_large", async () => {
      const big = validEvent("message.sent", { subject: "x".repeat(300 * 1024) });
      expectError(await acct.api("POST", "/v1/events", big), 413, "payload_too_large");
      expectError(
        await acct.api("POST", "/v1/webhooks", { url: `https://example.com/${"x".repeat(300 * 1024)}`, events: ["message.sent"] }),
        413,
        "payload_too_large",
      );
      expect(await eventCount(acct.accountId)).toBe(0);
      // Just under the limit is not refused for its size.
      const underLimit = await acct.api("POST", "/v1/events", validEvent("message.received", { body: "y".repeat(250 * 1024) }));
      expect(underLimit.status).toBe(201);
    });

    test("a body that is not application/json is 415 unsupported_media_type", async () => {
      const json = JSON.stringify({ url: "https://example.com/h", events: ["message.sent"] });
      expectError(await acct.api("POST", "/v1/webhooks", json, { "content-type": "text/plain" }), 415, "unsupported_media_type");
      expectError(
        await acct.api("POST", "/v1/webhooks", json, { "content-type": "application/x-www-form-urlencoded" }),
        415,
        "unsupported_media_type",
      );
      expectError(
        await acct.api("POST", "/v1/events", JSON.stringify(validEvent()), { "content-type": "text/plain" }),
        415,
        "unsupported_media_type",
      );
      expect(await stack.prisma.webhook.count({ where: { accountId: acct.accountId } })).toBe(0);
      expect(await eventCount(acct.accountId)).toBe(0);
      // A charset parameter is still JSON.
      const withCharset = await acct.api("POST", "/v1/webhooks", json, { "content-type": "application/json; charset=utf-8" });
      expect(withCharset.status).toBe(201);
    });
  });

  describe("422 validation_error names the field", () => {
    test("webhooks: url and events", async () => {
      expectValidation(await acct.api("POST", "/v1/webhooks", { url: "http://example.com/h", events: ["message.sent"] }), "url");
      expectValidation(await acct.api("POST", "/v1/webhooks", { url: 42, events: ["message.sent"] }), "url");
      expectValidation(await acct.api("POST", "/v1/webhooks", { url: "https://example.com/h" }), "events");
      expectValidation(await acct.api("POST", "/v1/webhooks", { url: "https://example.com/h", events: [] }), "events");
      expectValidation(await acct.api("POST", "/v1/webhooks", { url: "https://example.com/h", events: "message.sent" }), "events");
      expectValidation(await acct.api("POST", "/v1/webhooks", { url: "https://example.com/h", events: ["message.nope"] }), "events.0");
      expectValidation(
        await acct.api("POST", "/v1/webhooks", { url: "https://example.com/h", events: ["message.sent", "webhook.test"] }),
        "events.1",
      );
      expect(await stack.prisma.webhook.count({ where: { accountId: acct.accountId } })).toBe(0);
    });

    test("events: event_type and data fields", async () => {
      expectValidation(
        await acct.api("POST", "/v1/events", { event_type: "message.nope", data: sampleData("message.sent") }),
        "event_type",
      );
      expectValidation(await acct.api("POST", "/v1/events", { data: sampleData("message.sent") }), "event_type");
      expectValidation(
        await acct.api("POST", "/v1/events", validEvent("message.delivered", { deliveredAt: "yesterday" })),
        "data.deliveredAt",
      );
      expectValidation(
        await acct.api("POST", "/v1/events", validEvent("message.delivered", { deliveredAt: undefined })),
        "data.deliveredAt",
      );
      expectValidation(await acct.api("POST", "/v1/events", validEvent("message.opened", { openCount: "3" })), "data.openCount");
      expectValidation(
        await acct.api("POST", "/v1/events", validEvent("message.sent", { to: ["Bob <bob@example.org>, carol@example.org"] })),
        "data.to.0",
      );
      expectValidation(await acct.api("POST", "/v1/events", { event_type: "message.sent", data: "x" }), "data");
      expect(await eventCount(acct.accountId)).toBe(0);
    });

    test("deliveries list: limit outside 1..100 and a bogus cursor", async () => {
      for (const limit of ["0", "101", "-1", "abc", "1.5", ""]) {
        expectValidation(await acct.api("GET", `/v1/deliveries?limit=${limit}`), "query.limit");
      }
      for (const cursor of ["bogus", "!!!", Buffer.from("evt_123").toString("base64url"), "x".repeat(300)]) {
        expectValidation(await acct.api("GET", `/v1/deliveries?cursor=${encodeURIComponent(cursor)}`), "query.cursor");
      }
      for (const limit of ["1", "100"]) expect((await acct.api("GET", `/v1/deliveries?limit=${limit}`)).status).toBe(200);
    });
  });

  describe("idempotency", () => {
    test("the same key and body returns the first event (200) and delivers once; another body is 409", async () => {
      const hr = await startHookReceiver(stack);
      await createHook(acct, hr, "/idem", ["message.sent"]);
      const body = validEvent("message.sent");
      const key = `idem-${randomUUID()}`;
      const first = await acct.api("POST", "/v1/events", body, { "idempotency-key": key });
      expect(first.status).toBe(201);
      await hr.receiver.waitFor((a) => at(a, "/idem", "message.sent").length >= 1);

      const again = await acct.api("POST", "/v1/events", body, { "idempotency-key": key });
      expect(again.status).toBe(200);
      expect(again.body).toMatchObject({ event_id: first.body.event_id, event_type: "message.sent", created_at: first.body.created_at });
      const conflict = await acct.api("POST", "/v1/events", validEvent("message.sent"), { "idempotency-key": key });
      expectError(conflict, 409, "conflict");

      // A marker event posted afterwards arrives; the repeat never does.
      const marker = await acct.api("POST", "/v1/events", validEvent("message.sent"));
      expect(marker.status).toBe(201);
      await hr.receiver.waitFor(
        (a) =>
          at(a, "/idem", "message.sent").some((x) => x.messageId === (body.data.messageId as string)) &&
          at(a, "/idem", "message.sent").length >= 2,
      );
      await waitUntil(
        () => acct.api("GET", `/v1/events/${marker.body.event_id}`),
        (r) => r.body.status === "delivered",
      );
      expect(at(hr.receiver.arrivals, "/idem", "message.sent").filter((x) => x.messageId === body.data.messageId)).toHaveLength(1);
      expect(await eventCount(acct.accountId, { messageId: body.data.messageId as string })).toBe(1);
      expect(await deliveryRows(acct, { event_id: first.body.event_id })).toHaveLength(1);
      // Keys are scoped to the account.
      const elsewhere = await apiAs(stack, await stack.newAccountKey(), "POST", "/v1/events", body, { "idempotency-key": key });
      expect(elsewhere.status).toBe(201);
      expect(elsewhere.body.event_id).not.toBe(first.body.event_id);
    });

    test("10 concurrent requests with one key create exactly one event", async () => {
      const body = validEvent("message.opened");
      const key = `idem-${randomUUID()}`;
      const results = await Promise.all(Array.from({ length: 10 }, () => acct.api("POST", "/v1/events", body, { "idempotency-key": key })));
      const statuses = results.map((r) => r.status).sort();
      expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 200, 200, 200, 201]);
      expect(new Set(results.map((r) => r.body.event_id)).size).toBe(1);
      expect(await eventCount(acct.accountId)).toBe(1);
    });
  });

  describe("deliveries list", () => {
    test("limit=2 walks every row exactly once, newest first; webhook_id filters", async () => {
      const hr = await startHookReceiver(stack);
      const a = await createHook(acct, hr, "/list/a", ["message.sent"]);
      const b = await createHook(acct, hr, "/list/b", ["message.sent", "message.clicked"]);
      for (const type of ["message.sent", "message.clicked", "message.sent"]) {
        expect((await acct.api("POST", "/v1/events", validEvent(type))).status).toBe(201);
      }
      // a: test + 2 sent; b: test + 2 sent + 1 clicked.
      await waitUntil(
        () => deliveryRows(acct, {}),
        (rows) => rows.length === 7,
      );

      const walk = async (query: string) => {
        const seen: any[] = [];
        let cursor: string | null = null;
        let pages = 0;
        do {
          const res = await acct.api("GET", `/v1/deliveries?limit=2${query}${cursor ? `&cursor=${cursor}` : ""}`);
          expect(res.status).toBe(200);
          expect(Object.keys(res.body).sort()).toEqual(["data", "next_cursor"]);
          expect(res.body.data.length).toBeLessThanOrEqual(2);
          seen.push(...res.body.data);
          cursor = res.body.next_cursor;
          pages++;
        } while (cursor && pages < 20);
        return seen;
      };

      const all = await walk("");
      expect(all).toHaveLength(7);
      expect(new Set(all.map((r) => r.id)).size).toBe(7);
      const full = (await acct.api("GET", "/v1/deliveries?limit=100")).body;
      expect(full.next_cursor).toBeNull();
      expect(all.map((r) => r.id)).toEqual(full.data.map((r: { id: string }) => r.id));
      // Newest first: created_at descending, ties by id descending. Not id order alone: an id is
      // made when its batch is built, created_at is the now() of the transaction that writes it,
      // and two dispatcher connections can start theirs in the other order (a test delivery's id
      // is even older, made when it was asked for).
      for (let i = 1; i < all.length; i++) {
        const [prev, row] = [all[i - 1], all[i]];
        const [prevAt, rowAt] = [Date.parse(prev.created_at), Date.parse(row.created_at)];
        expect(rowAt).toBeLessThanOrEqual(prevAt);
        if (rowAt === prevAt) expect(row.id < prev.id).toBe(true);
      }
      for (const r of all) {
        expect(Object.keys(r).sort()).toEqual([
          "attempt",
          "created_at",
          "duration_ms",
          "error",
          "event_id",
          "id",
          "response_body",
          "response_status",
          "trigger",
          "url",
          "webhook_id",
        ]);
      }

      const onlyA = await walk(`&webhook_id=${a.id}`);
      expect(onlyA).toHaveLength(3);
      expect(onlyA.every((r) => r.webhook_id === a.id && r.url === a.url)).toBe(true);
      expect(onlyA.map((r) => r.trigger).sort()).toEqual(["initial", "initial", "test"]);
      const onlyB = await walk(`&webhook_id=${b.id}`);
      expect(onlyB).toHaveLength(4);
      expect(onlyB.every((r) => r.webhook_id === b.id)).toBe(true);
      expect(new Set([...onlyA, ...onlyB].map((r) => r.id)).size).toBe(7);
    });
  });

  test("GET /readyz is 200 and GET /healthz is 200 on a healthy stack", async () => {
    const ready = await apiAs(stack, null, "GET", "/readyz");
    expect(ready.status).toBe(200);
    const health = await apiAs(stack, null, "GET", "/healthz");
    expect(health.status).toBe(200);
  });
});

describe("accepted while Redis is unreachable (docs/api.md, 'Accepted means delivered': Redis being away never refuses)", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { REDIS_URL: "redis://127.0.0.1:1" }, dispatcher: false });
  });
  afterAll(() => stack.close());

  const queuedWork = (workId: string) =>
    stack.pool.query("SELECT kind, leased_until FROM work_items WHERE work_id = $1", [workId]).then((r) => r.rows);

  test("POST /v1/webhooks answers 201 with the secret; its test delivery waits in the work queue", async () => {
    const acct = await stack.newAccount();
    const res = await acct.api("POST", "/v1/webhooks", { url: "https://localhost:9/down", events: ["message.sent"] });
    expect(res.status).toBe(201);
    expect(res.body.secret).toMatch(/^whsec_/);
    const [test] = await stack.prisma.testDelivery.findMany({ where: { webhookId: res.body.id } });
    expect(test.status).toBe("pending");
    expect(await queuedWork(test.id)).toEqual([{ kind: "test-delivery", leased_until: null }]);
  });

  test("POST /v1/events answers 201 (200 for a repeated key); the destination waits in the work queue", async () => {
    const acct = await stack.newAccount();
    const hook = await acct.api("POST", "/v1/webhooks", { url: "https://localhost:9/down", events: ["message.sent"] });
    const body = { event_type: "message.sent", data: sampleData("message.sent") };
    const res = await acct.api("POST", "/v1/events", body, { "idempotency-key": "down-1" });
    expect(res.status).toBe(201);
    expect(res.body.status).toBe("pending");
    const again = await acct.api("POST", "/v1/events", body, { "idempotency-key": "down-1" });
    expect(again.status).toBe(200);
    expect(again.body.event_id).toBe(res.body.event_id);
    const [destination] = await stack.prisma.destination.findMany({ where: { eventId: res.body.event_id } });
    expect(destination).toMatchObject({ webhookId: hook.body.id, status: "pending", queuePrefix: stack.prefix });
    expect(await queuedWork(destination.id)).toEqual([{ kind: "delivery", leased_until: null }]);
  });

  test("GET /readyz is 200 (PostgreSQL is all accepting needs) and names Redis as unavailable", async () => {
    const ready = await apiAs(stack, null, "GET", "/readyz");
    expect(ready.status).toBe(200);
    // `warnings` may name the public development key (issue 17 item 11): not this test's concern.
    expect({ status: ready.body.status, checks: ready.body.checks }).toEqual({
      status: "ready",
      checks: { postgres: "ok", redis: "unavailable" },
    });
    const health = await apiAs(stack, null, "GET", "/healthz");
    expect(health.status).toBe(200);
  });
});
