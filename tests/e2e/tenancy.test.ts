import { randomUUID } from "node:crypto";
import { sampleData, startStack, waitUntil, type Account, type Stack } from "../support/stack.js";
import { createHook, expectError, startHookReceiver, type CreatedHook } from "../support/hooks.js";

/**
 * Tenancy (issue 4, item 3; docs/api.md, "Conventions"): every webhook, event, delivery and audit
 * entry belongs to one account, and another account's resource answers 404 as if it did not
 * exist. Account A gets a webhook, a delivered event, a replay (so deliveries and an audit entry
 * exist); account B then walks every route with A's ids and sees only 404s and empty lists, and
 * answers that are the same as for ids that exist nowhere (no existence oracle). A's resources
 * are unchanged afterwards.
 */

const EMPTY = { data: [], next_cursor: null };
const unknownId = (prefix: string) => `${prefix}_${randomUUID().replaceAll("-", "")}`;

describe("tenancy: another account's ids", () => {
  let stack: Stack;
  let a: Account;
  let b: Account;
  let hookA: CreatedHook;
  let eventA: string;
  let inboxA: string;
  let idemKeyA: string;
  let idemKeyA2: string;
  let bodyA: { event_type: string; data: Record<string, unknown> };
  let cursorA: string;
  /** A's view of its own resources, before B does anything. */
  let before: Record<string, unknown>;

  /** Everything A can read about its resources (whole responses, statuses included). */
  const snapshot = async () => {
    const read = async (path: string) => {
      const res = await a.api("GET", path);
      return { status: res.status, body: res.body };
    };
    return {
      webhook: await read(`/v1/webhooks/${hookA.id}`),
      secret: await read(`/v1/webhooks/${hookA.id}/secret`),
      webhooks: await read("/v1/webhooks"),
      event: await read(`/v1/events/${eventA}`),
      events: await read(`/v1/events?inbox_id=${inboxA}`),
      deliveries: await read(`/v1/deliveries?event_id=${eventA}&limit=100`),
      webhookDeliveries: await read(`/v1/deliveries?webhook_id=${hookA.id}&limit=100`),
      audit: await read(`/v1/audit-log?event_id=${eventA}`),
      rows: {
        replays: await stack.prisma.replay.count({ where: { accountId: a.accountId } }),
        events: await stack.prisma.event.count({ where: { accountId: a.accountId } }),
        idempotencyKeys: await stack.prisma.idempotencyKey.count({ where: { accountId: a.accountId } }),
      },
    };
  };

  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "100,100,100", DELIVERY_TIMEOUT_MS: "2000" } });
    a = await stack.newAccount();
    b = await stack.newAccount();

    const hr = await startHookReceiver(stack);
    hookA = await createHook(a, hr, "/tenant-a", ["message.sent", "message.received"]);
    inboxA = `inbox_a_${randomUUID()}`;
    idemKeyA = `idem-${randomUUID()}`;
    bodyA = { event_type: "message.sent", data: sampleData("message.sent", { inboxId: inboxA }) };
    const created = await a.api("POST", "/v1/events", bodyA, { "idempotency-key": idemKeyA });
    expect(created.status).toBe(201);
    eventA = created.body.event_id;
    // A second keyed event of A's (another kind: A's webhook gets no delivery of it).
    idemKeyA2 = `idem-${randomUUID()}`;
    const second = await a.api(
      "POST",
      "/v1/events",
      { event_type: "message.clicked", data: sampleData("message.clicked") },
      { "idempotency-key": idemKeyA2 },
    );
    expect(second.status).toBe(201);
    await waitUntil(
      () => a.api("GET", `/v1/events/${eventA}`),
      (r) => r.body.status === "delivered",
    );
    expect((await a.api("POST", `/v1/events/${eventA}/replay`)).status).toBe(202);
    await waitUntil(
      () => a.api("GET", `/v1/audit-log?event_id=${eventA}`),
      (r) => r.body.data.length === 1,
    );
    // test event + initial + replay: three rows, so a page of one has a cursor.
    const page = await waitUntil(
      () => a.api("GET", `/v1/deliveries?webhook_id=${hookA.id}&limit=1`),
      (r) => r.body.next_cursor !== null,
    );
    cursorA = page.body.next_cursor;
    before = await snapshot();
    expect(before).toMatchObject({
      webhook: { status: 200 },
      event: { status: 200, body: { status: "delivered", destinations: [{ webhook_id: hookA.id, status: "delivered", attempts: 2 }] } },
      deliveries: { status: 200 },
      audit: { status: 200 },
    });
    expect((before.deliveries as { body: { data: unknown[] } }).body.data).toHaveLength(2);
  });
  afterAll(() => stack.close());

  /** B's answer for A's id must be exactly B's answer for an id that exists nowhere. */
  const sameAsUnknown = async (method: string, path: (id: string) => string, realId: string, unknown: string, body?: unknown) => {
    const real = await b.api(method, path(realId), body);
    const none = await b.api(method, path(unknown), body);
    expectError(real, 404, "not_found");
    expect({ status: real.status, body: real.body }).toEqual({ status: none.status, body: none.body });
    return real;
  };

  test("id routes answer 404, exactly as for an id that does not exist", async () => {
    const wh = unknownId("wh");
    const evt = unknownId("evt");
    const responses = [
      await sameAsUnknown("GET", (id) => `/v1/webhooks/${id}`, hookA.id, wh),
      await sameAsUnknown("GET", (id) => `/v1/webhooks/${id}/secret`, hookA.id, wh),
      await sameAsUnknown("PATCH", (id) => `/v1/webhooks/${id}`, hookA.id, wh, { url: "https://localhost:9/stolen" }),
      await sameAsUnknown("PATCH", (id) => `/v1/webhooks/${id}`, hookA.id, wh, { status: "disabled" }),
      await sameAsUnknown("PATCH", (id) => `/v1/webhooks/${id}`, hookA.id, wh, { events: ["message.clicked"] }),
      await sameAsUnknown("PATCH", (id) => `/v1/webhooks/${id}`, hookA.id, wh, {}),
      await sameAsUnknown("DELETE", (id) => `/v1/webhooks/${id}`, hookA.id, wh),
      await sameAsUnknown("GET", (id) => `/v1/events/${id}`, eventA, evt),
      await sameAsUnknown("POST", (id) => `/v1/events/${id}/replay`, eventA, evt),
      await sameAsUnknown("POST", (id) => `/v1/events/${id}/replay`, eventA, evt, {}),
      await sameAsUnknown("POST", (id) => `/v1/events/${id}/replay`, eventA, evt, { webhook_id: hookA.id }),
      await sameAsUnknown("POST", (id) => `/v1/events/${id}/replay`, eventA, evt, { target_url: "https://localhost:9/stolen" }),
      await sameAsUnknown("POST", (id) => `/v1/events/${id}/replay`, eventA, evt, {
        target_url: "https://localhost:9/stolen",
        webhook_id: hookA.id,
      }),
    ];
    for (const res of responses) {
      const text = JSON.stringify(res.body);
      expect(text).not.toContain(hookA.secret);
      expect(text).not.toContain(hookA.url);
      expect(text).not.toContain(inboxA);
    }
    expect(await stack.prisma.replay.count({ where: { accountId: b.accountId } })).toBe(0);
  });

  test("lists filtered on A's ids, A's inbox or A's cursor are empty", async () => {
    const lists = [
      `/v1/deliveries?event_id=${eventA}`,
      `/v1/deliveries?webhook_id=${hookA.id}`,
      `/v1/deliveries?event_id=${eventA}&webhook_id=${hookA.id}`,
      `/v1/deliveries`,
      `/v1/deliveries?cursor=${cursorA}`,
      `/v1/deliveries?webhook_id=${hookA.id}&cursor=${cursorA}`,
      `/v1/audit-log?event_id=${eventA}`,
      `/v1/audit-log`,
      `/v1/events?inbox_id=${inboxA}`,
      `/v1/events?inbox_id=${inboxA}&event_type=message.sent&status=delivered`,
      `/v1/events`,
      `/v1/events?cursor=${cursorA}`,
      `/v1/webhooks`,
      `/v1/webhooks?cursor=${cursorA}`,
    ];
    for (const path of lists) {
      const res = await b.api("GET", path);
      expect({ path, status: res.status, body: res.body }).toEqual({ path, status: 200, body: EMPTY });
    }
  });

  test("A's Idempotency-Key and A's inbox id mean nothing under B", async () => {
    // The same key and body: B gets an event of its own (201), not A's (200)...
    const same = await b.api("POST", "/v1/events", bodyA, { "idempotency-key": idemKeyA });
    expect(same.status).toBe(201);
    expect(same.body.event_id).not.toBe(eventA);
    // ...and another body under a key A used is no conflict for B (409 would tell that A used it).
    const other = await b.api(
      "POST",
      "/v1/events",
      { event_type: "message.sent", data: sampleData("message.sent") },
      { "idempotency-key": idemKeyA2 },
    );
    expect(other.status).toBe(201);

    // A raw message to A's inbox id, replying to A's message: B's event, in B's account.
    const raw = [
      "From: mallory@example.com",
      "To: inbox@example.com",
      "Subject: Re: Hello",
      `Message-ID: <${randomUUID()}@example.com>`,
      `In-Reply-To: ${(bodyA.data as { messageId: string }).messageId}`,
      "",
      "hi",
      "",
    ].join("\r\n");
    const inbound = await b.api("POST", `/v1/inboxes/${inboxA}/messages`, raw, { "content-type": "message/rfc822" });
    expect(inbound.status).toBe(201);
    expect((await b.api("GET", `/v1/events/${inbound.body.event_id}`)).status).toBe(200);
    expectError(await a.api("GET", `/v1/events/${inbound.body.event_id}`), 404, "not_found");
    expect((await a.api("GET", `/v1/events?inbox_id=${inboxA}`)).body).toEqual((before.events as { body: unknown }).body);
  });

  test("B replaying its own event with A's webhook_id is 409 (not a destination), never a replay signed with A's secret", async () => {
    const hr = await startHookReceiver(stack);
    const hookB = await createHook(b, hr, "/tenant-b", ["message.opened"]);
    const own = await b.api("POST", "/v1/events", { event_type: "message.opened", data: sampleData("message.opened") });
    expect(own.status).toBe(201);
    const fake = unknownId("wh");
    for (const body of [{ webhook_id: hookA.id }, { webhook_id: hookA.id, target_url: "https://localhost:9/stolen" }]) {
      const res = await b.api("POST", `/v1/events/${own.body.event_id}/replay`, body);
      expectError(res, 409, "conflict");
      const none = await b.api("POST", `/v1/events/${own.body.event_id}/replay`, { ...body, webhook_id: fake });
      expectError(none, 409, "conflict");
      // The same answer as for a webhook id that exists nowhere.
      expect(res.body.error.message.replace(hookA.id, "ID")).toBe(none.body.error.message.replace(fake, "ID"));
      const text = JSON.stringify(res.body);
      expect(text).not.toContain(hookA.url);
      expect(text).not.toContain(hookA.secret);
    }
    expect(await stack.prisma.replay.count({ where: { accountId: b.accountId } })).toBe(0);
    // B's own webhook works as usual.
    expect((await b.api("POST", `/v1/events/${own.body.event_id}/replay`, { webhook_id: hookB.id })).status).toBe(202);
    // And A cannot replay B's event either.
    expectError(await a.api("POST", `/v1/events/${own.body.event_id}/replay`, { webhook_id: hookA.id }), 404, "not_found");
  });

  test("A's resources are unchanged", async () => {
    const after = await snapshot();
    expect(after).toEqual(before);
    expect(await stack.prisma.webhook.findUniqueOrThrow({ where: { id: hookA.id } })).toMatchObject({
      accountId: a.accountId,
      url: hookA.url,
      status: "enabled",
      deletedAt: null,
    });
    // The secret is stored encrypted: read it back through the API.
    expect((await a.api("GET", `/v1/webhooks/${hookA.id}/secret`)).body.secret).toBe(hookA.secret);
  });
});
