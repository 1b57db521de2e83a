import { createHash, randomUUID } from "node:crypto";
import { createServer, type Server as NetServer } from "node:net";
import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { captureLogs, getLogger } from "@mailhooks/logger";
import { createApiKey, revokeApiKey } from "@mailhooks/access";
import { sampleData, startStack, waitUntil, type Account, type Stack } from "../support/stack.js";
import { apiAs, createHook, deliveryRows, expectError, expectValidation, startHookReceiver } from "../support/hooks.js";
import { testDatabaseUrl, testRedisUrl } from "../support/env.js";
import request from "supertest";
import { pathOf, signIn, signInWith } from "../dashboard/support.js";
import { databaseUrlVia } from "../chaos/support/processes.js";
import { startTcpProxy } from "../chaos/support/tcp-proxy.js";
import { claimIntoQueue } from "../chaos/support/claimed-jobs.js";

/**
 * Security hardening (issue 4, items 1, 2, 4 and 5): SSRF protection with
 * ALLOW_PRIVATE_TARGETS=false, API keys, per-key rate limiting shared by API replicas, request
 * and account limits, security headers, the operators' board behind basic auth, job data that
 * carries ids only, and logs without secrets. Every stack runs against the real PostgreSQL and
 * Redis; the settings go through the processes' own config schemas.
 */

const KEY_FORMAT = /^whk_[0-9a-f]{12}_[A-Za-z0-9_-]{43}$/;

/** Every API key issued in this file: none may ever show up in a table, a job or a log line. */
const issuedKeys: string[] = [];
async function account(stack: Stack): Promise<Account> {
  const acct = await stack.newAccount();
  issuedKeys.push(acct.apiKey);
  return acct;
}

const validEvent = (eventType = "message.sent", overrides: Record<string, unknown> = {}) => ({
  event_type: eventType,
  data: sampleData(eventType, overrides),
});

/** A TCP server on 127.0.0.1 that only counts the connections made to it (nothing may connect). */
async function connectionCounter(): Promise<{ port: number; connections: () => number; close: () => Promise<void> }> {
  let count = 0;
  const server: NetServer = createServer((socket) => {
    count++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as { port: number }).port,
    connections: () => count,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Every table's rows as text, for "this string is stored nowhere" checks. */
async function everyStoredRow(stack: Stack): Promise<string> {
  const tables = [
    "accounts",
    "api_keys",
    "webhooks",
    "events",
    "idempotency_keys",
    "destinations",
    "deliveries",
    "replays",
    "audit_entries",
  ];
  const parts: string[] = [];
  for (const table of tables) {
    const rows = await stack.prisma.$queryRawUnsafe<{ row: string }[]>(`SELECT to_jsonb(t)::text AS row FROM ${table} t`);
    parts.push(...rows.map((r) => r.row));
  }
  return parts.join("\n");
}

const ADMIN_USERNAME = "operator";
const ADMIN_PASSWORD = `board-${randomUUID()}`;
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;

describe("with ALLOW_PRIVATE_TARGETS=false, MAX_WEBHOOKS_PER_ACCOUNT=2 and an operators' board", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      env: {
        ALLOW_PRIVATE_TARGETS: "false",
        MAX_WEBHOOKS_PER_ACCOUNT: "2",
        DELIVERY_RETRY_DELAYS_MS: "50,50,50",
        DELIVERY_TIMEOUT_MS: "2000",
        ADMIN_USERNAME,
        ADMIN_PASSWORD,
      },
    });
    issuedKeys.push(stack.apiKey);
  });
  afterAll(() => stack.close());

  describe("SSRF", () => {
    const blockedLiterals = [
      "https://127.0.0.1/hook",
      "https://127.8.9.10:8443/hook",
      "https://10.0.0.1/hook",
      "https://172.16.5.4/hook",
      "https://192.168.1.1/hook",
      "https://169.254.169.254/latest/meta-data/",
      "https://100.64.0.1/hook",
      "https://0.0.0.0/hook",
      "https://224.0.0.1/hook",
      "https://255.255.255.255/hook",
      "https://[::1]/",
      "https://[::]/hook",
      "https://[::ffff:127.0.0.1]/",
      "https://[::ffff:169.254.169.254]/",
      "https://[64:ff9b::7f00:1]/",
      "https://[fd00::1]/hook",
      "https://[fe80::1]/hook",
      // Spellings that WHATWG URL normalizes to 127.0.0.1.
      "https://2130706433/hook",
      "https://0x7f.1/hook",
      "https://017700000001/hook",
    ];

    test("registration refuses IP literals outside the public address space (422 on url)", async () => {
      const acct = await account(stack);
      for (const url of blockedLiterals) {
        const res = await acct.api("POST", "/v1/webhooks", { url, events: ["message.sent"] });
        expectValidation(res, "url");
      }
      expect(await stack.prisma.webhook.count({ where: { accountId: acct.accountId } })).toBe(0);
      // (A public literal is accepted: see the stack without a dispatcher below, so that its test
      // event is never sent to the internet.)
    });

    test("PATCH url and replay target_url refuse them too (422 on url / target_url)", async () => {
      const acct = await account(stack);
      const hr = await startHookReceiver(stack);
      const hook = await createHook(acct, hr, "/patch", ["message.sent"]);
      const event = await acct.api("POST", "/v1/events", validEvent());
      expect(event.status).toBe(201);
      for (const url of blockedLiterals) {
        expectValidation(await acct.api("PATCH", `/v1/webhooks/${hook.id}`, { url }), "url");
        expectValidation(await acct.api("POST", `/v1/events/${event.body.event_id}/replay`, { target_url: url }), "target_url");
        expectValidation(
          await acct.api("POST", `/v1/events/${event.body.event_id}/replay`, { target_url: url, webhook_id: hook.id }),
          "target_url",
        );
      }
      expect((await acct.api("GET", `/v1/webhooks/${hook.id}`)).body.url).toBe(hook.url);
      expect(await stack.prisma.replay.count({ where: { accountId: acct.accountId } })).toBe(0);
    });

    test("a host name resolving to loopback is registered, but nothing is ever delivered to it: blocked_destination", async () => {
      const acct = await account(stack);
      const hr = await startHookReceiver(stack);
      const counter = await connectionCounter();
      try {
        // https://localhost:<receiver port>/ssrf: a name, so registration cannot judge it.
        const hook = await createHook(acct, hr, "/ssrf", ["message.sent"]);
        expect(hook.url).toMatch(/^https:\/\/localhost:\d+\/ssrf$/);

        // The test event.
        const [testRow] = await waitUntil(
          () => deliveryRows(acct, { webhook_id: hook.id }),
          (rows) => rows.length === 1,
        );
        expect(testRow).toMatchObject({
          trigger: "test",
          event_id: null,
          url: hook.url,
          response_status: null,
          error: "blocked_destination",
        });

        // An email event: the initial attempt and its three retries, each blocked.
        const event = await acct.api("POST", "/v1/events", validEvent());
        expect(event.status).toBe(201);
        const eventId = event.body.event_id;
        await waitUntil(
          () => acct.api("GET", `/v1/events/${eventId}`),
          (r) => r.body.status === "failed",
        );
        const rows = await deliveryRows(acct, { event_id: eventId });
        expect(rows.map((r) => [r.trigger, r.attempt])).toEqual([
          ["initial", 0],
          ["retry", 1],
          ["retry", 2],
          ["retry", 3],
        ]);
        for (const row of rows) expect(row).toMatchObject({ response_status: null, error: "blocked_destination", url: hook.url });

        // Replays: to the webhook's own URL, and to an override URL naming localhost.
        const own = await acct.api("POST", `/v1/events/${eventId}/replay`);
        expect(own.status).toBe(202);
        const override = await acct.api("POST", `/v1/events/${eventId}/replay`, {
          target_url: `https://localhost:${counter.port}/override`,
        });
        expect(override.status).toBe(202);
        const audit = await waitUntil(
          () => acct.api("GET", `/v1/audit-log?event_id=${eventId}`),
          (r) => r.body.data.length === 2,
        );
        for (const entry of audit.body.data) {
          expect(entry).toMatchObject({ response_status: null, error: "blocked_destination", api_key_id: acct.apiKeyId });
        }
        const replayRows = (await deliveryRows(acct, { event_id: eventId })).filter((r) => r.trigger === "replay");
        expect(replayRows).toHaveLength(2);
        for (const row of replayRows) expect(row).toMatchObject({ response_status: null, error: "blocked_destination" });

        // Nothing reached either listener: not a request, not even a TCP connection.
        expect(hr.receiver.arrivals).toHaveLength(0);
        expect(counter.connections()).toBe(0);
      } finally {
        await counter.close();
      }
    });

    test("an IP literal stored without the API's check (e.g. registered while private targets were allowed) is refused at delivery", async () => {
      const acct = await account(stack);
      const counter = await connectionCounter();
      try {
        const url = `https://127.0.0.1:${counter.port}/literal`;
        await stack.prisma.webhook.create({
          data: {
            id: `wh_${randomUUID().replaceAll("-", "")}`,
            accountId: acct.accountId,
            url,
            events: ["message.sent"],
            secret: "whsec_stored",
          },
        });
        const event = await acct.api("POST", "/v1/events", validEvent());
        expect(event.status).toBe(201);
        await waitUntil(
          () => acct.api("GET", `/v1/events/${event.body.event_id}`),
          (r) => r.body.status === "failed",
        );
        const rows = await deliveryRows(acct, { event_id: event.body.event_id });
        expect(rows).toHaveLength(4);
        for (const row of rows) expect(row).toMatchObject({ response_status: null, error: "blocked_destination", url });
        expect(counter.connections()).toBe(0);
      } finally {
        await counter.close();
      }
    });
  });

  describe("API keys", () => {
    test("keys are prefixed, stored only as a SHA-256 hash, and checked in full", async () => {
      const issued = await createApiKey(stack.prisma, `test-keys-${randomUUID()}`);
      issuedKeys.push(issued.key);
      expect(issued.key).toMatch(KEY_FORMAT);
      expect(issued.id).toMatch(/^key_[0-9a-f]{32}$/);
      const row = await stack.prisma.apiKey.findUniqueOrThrow({ where: { id: issued.id } });
      expect(row.hash).toMatch(/^[0-9a-f]{64}$/);
      expect(row.hash).toBe(createHash("sha256").update(issued.key, "utf8").digest("hex"));
      // After `whk_<12 hex>_` (the base64url part may hold `_` itself).
      const secretPart = issued.key.slice(17);
      const stored = await stack.prisma.$queryRaw<
        { row: string }[]
      >`SELECT to_jsonb(k)::text AS row FROM api_keys k WHERE id = ${issued.id}`;
      expect(stored).toHaveLength(1);
      expect(stored[0].row).not.toContain(issued.key);
      expect(stored[0].row).not.toContain(secretPart);

      expect((await apiAs(stack, issued.key, "GET", "/v1/webhooks")).status).toBe(200);
      // Right prefix, wrong secret part (same length, one character changed, or another key's).
      const last = issued.key.at(-1) === "A" ? "B" : "A";
      const other = await createApiKey(stack.prisma, `test-keys-${randomUUID()}`);
      issuedKeys.push(other.key);
      for (const forged of [
        `${issued.key.slice(0, -1)}${last}`,
        `${issued.key.slice(0, 17)}${other.key.slice(17)}`,
        `${issued.key.slice(0, 17)}${"A".repeat(43)}`,
        issued.key.toUpperCase(),
        `${issued.key}A`,
        issued.key.slice(0, -1),
      ]) {
        expectError(await apiAs(stack, forged, "GET", "/v1/webhooks"), 401, "unauthorized");
      }
    });

    test("revocation takes effect as soon as PostgreSQL announces it (within moments)", async () => {
      const issued = await createApiKey(stack.prisma, `test-keys-${randomUUID()}`);
      issuedKeys.push(issued.key);
      const hook = await apiAs(stack, issued.key, "POST", "/v1/webhooks", { url: "https://localhost:9/revoke", events: ["message.sent"] });
      expect(hook.status).toBe(201);
      expect(await revokeApiKey(stack.prisma, issued.id)).toBe(true);
      await waitUntil(
        () => apiAs(stack, issued.key, "GET", `/v1/webhooks/${hook.body.id}`),
        (r) => r.status === 401,
        2_000,
        5,
      );
      expectError(await apiAs(stack, issued.key, "GET", `/v1/webhooks/${hook.body.id}`), 401, "unauthorized");
      expectError(await apiAs(stack, issued.key, "POST", "/v1/events", validEvent()), 401, "unauthorized");
      expect(await stack.prisma.event.count({ where: { accountId: issued.account_id } })).toBe(0);
    });

    test("audit entries and replays carry the key id, never the key", async () => {
      const acct = await account(stack);
      const hr = await startHookReceiver(stack);
      await createHook(acct, hr, "/audit", ["message.opened"]);
      const event = await acct.api("POST", "/v1/events", validEvent("message.opened"));
      expect(event.status).toBe(201);
      expect((await acct.api("POST", `/v1/events/${event.body.event_id}/replay`)).status).toBe(202);
      const audit = await waitUntil(
        () => acct.api("GET", `/v1/audit-log?event_id=${event.body.event_id}`),
        (r) => r.body.data.length === 1,
      );
      expect(audit.body.data[0].api_key_id).toBe(acct.apiKeyId);
      expect(audit.body.data[0].api_key_id).toMatch(/^key_[0-9a-f]{32}$/);
      const rows = await stack.prisma.$queryRaw<{ row: string }[]>`
        SELECT to_jsonb(a)::text AS row FROM audit_entries a WHERE account_id = ${acct.accountId}
        UNION ALL SELECT to_jsonb(r)::text FROM replays r WHERE account_id = ${acct.accountId}`;
      expect(rows).toHaveLength(2);
      for (const { row } of rows) {
        expect(row).toContain(acct.apiKeyId);
        expect(row).not.toContain(acct.apiKey);
      }
    });
  });

  describe("limits and headers", () => {
    test("MAX_WEBHOOKS_PER_ACCOUNT=2: the third webhook is 409 conflict; deleting one frees a slot", async () => {
      const acct = await account(stack);
      const create = (n: number) => acct.api("POST", "/v1/webhooks", { url: `https://localhost:9/limit/${n}`, events: ["message.sent"] });
      const first = await create(1);
      const second = await create(2);
      expect([first.status, second.status]).toEqual([201, 201]);
      expectError(await create(3), 409, "conflict");
      expect(await stack.prisma.webhook.count({ where: { accountId: acct.accountId } })).toBe(2);
      // Another account is not affected by this one's count.
      const other = await account(stack);
      expect((await other.api("POST", "/v1/webhooks", { url: "https://localhost:9/limit/other", events: ["message.sent"] })).status).toBe(
        201,
      );
      // Disabling does not free a slot; deleting does.
      expect((await acct.api("PATCH", `/v1/webhooks/${first.body.id}`, { status: "disabled" })).status).toBe(200);
      expectError(await create(4), 409, "conflict");
      expect((await acct.api("DELETE", `/v1/webhooks/${first.body.id}`)).status).toBe(204);
      expect((await create(5)).status).toBe(201);
      expectError(await create(6), 409, "conflict");
    });

    test("bodies over the limits are 413 on every route that takes one, and nothing is stored", async () => {
      const acct = await account(stack);
      const hook = await acct.api("POST", "/v1/webhooks", { url: "https://localhost:9/size", events: ["message.sent"] });
      expect(hook.status).toBe(201);
      const event = await acct.api("POST", "/v1/events", validEvent());
      expect(event.status).toBe(201);
      const big = "x".repeat(257 * 1024);
      expectError(
        await acct.api("POST", "/v1/webhooks", { url: `https://localhost:9/${big}`, events: ["message.sent"] }),
        413,
        "payload_too_large",
      );
      expectError(await acct.api("PATCH", `/v1/webhooks/${hook.body.id}`, { url: `https://localhost:9/${big}` }), 413, "payload_too_large");
      expectError(await acct.api("POST", "/v1/events", validEvent("message.received", { body: big })), 413, "payload_too_large");
      expectError(
        await acct.api("POST", `/v1/events/${event.body.event_id}/replay`, { target_url: `https://localhost:9/${big}` }),
        413,
        "payload_too_large",
      );
      const hugeMessage = Buffer.concat([
        Buffer.from("From: a@example.com\r\nTo: b@example.com\r\nSubject: big\r\n\r\n"),
        Buffer.alloc(10 * 1024 * 1024 + 1, "a"),
      ]);
      expectError(
        await acct.api("POST", "/v1/inboxes/inbox_big/messages", hugeMessage, { "content-type": "message/rfc822" }),
        413,
        "payload_too_large",
      );
      expect(await stack.prisma.event.count({ where: { accountId: acct.accountId } })).toBe(1);
      expect(await stack.prisma.webhook.count({ where: { accountId: acct.accountId } })).toBe(1);
      expect(await stack.prisma.replay.count({ where: { accountId: acct.accountId } })).toBe(0);
    });

    test("helmet's security headers are on every kind of response, and no X-Powered-By", async () => {
      const responses = [
        await apiAs(stack, null, "GET", "/healthz"),
        await apiAs(stack, stack.apiKey, "GET", "/v1/webhooks"),
        await apiAs(stack, null, "GET", "/v1/webhooks"),
        await apiAs(stack, stack.apiKey, "GET", "/v1/no-such-route"),
        await apiAs(stack, stack.apiKey, "POST", "/v1/events", "{", { "content-type": "application/json" }),
      ];
      expect(responses.map((r) => r.status)).toEqual([200, 200, 401, 404, 400]);
      for (const res of responses) {
        expect(res.headers.get("x-content-type-options")).toBe("nosniff");
        expect(res.headers.get("x-powered-by")).toBeNull();
        expect(res.headers.get("x-frame-options")).toBe("SAMEORIGIN");
        expect(res.headers.get("strict-transport-security")).toMatch(/max-age=\d+/);
        expect(res.headers.get("content-security-policy")).toContain("default-src 'self'");
        expect(res.headers.get("content-type")).toMatch(/^application\/json/);
      }
    });
  });

  describe("operators' board: only on the admin listener (ADMIN_HOST:ADMIN_PORT)", () => {
    const board = (path: string, authorization?: string, init: RequestInit = {}) =>
      fetch(`${stack.adminUrl}${path}`, { ...init, headers: authorization === undefined ? {} : { authorization } });

    test("nothing of it on the public PORT, with or without credentials", async () => {
      for (const path of ["/admin/queues", "/admin/queues/api/queues"]) {
        for (const headers of [{}, { authorization: basic(ADMIN_USERNAME, ADMIN_PASSWORD) }] as Record<string, string>[]) {
          expectError(await apiAs(stack, null, "GET", path, undefined, headers), 404, "not_found");
        }
      }
    });

    test("the right credentials: the board, read-only (ADMIN_READ_WRITE unset): no job can be changed", async () => {
      const page = await board("/admin/queues", basic(ADMIN_USERNAME, ADMIN_PASSWORD));
      expect(page.status).toBe(200);
      expect(page.headers.get("content-type")).toMatch(/^text\/html/);
      expect(await page.text()).toMatch(/<html/i);
      const api = await board("/admin/queues/api/queues", basic(ADMIN_USERNAME, ADMIN_PASSWORD));
      expect(api.status).toBe(200);
      const queues = JSON.stringify(await api.json());
      expect(queues).toContain("deliveries");
      expect(queues).toContain('"readOnlyMode":true');
      // A write through the board's own API is refused.
      for (const [method, path] of [
        ["PUT", "/admin/queues/api/queues/deliveries/retry/failed"],
        ["PUT", "/admin/queues/api/queues/deliveries/clean/failed"],
        ["PUT", "/admin/queues/api/queues/deliveries/pause"],
      ]) {
        const res = await board(path, basic(ADMIN_USERNAME, ADMIN_PASSWORD), { method });
        expect(res.status).toBeGreaterThanOrEqual(400);
      }
    });

    test("no credentials or wrong ones: 401 with a Basic challenge; past 10 failures a minute, 429 even for the right ones", async () => {
      const wrong = [
        basic(ADMIN_USERNAME, "wrong"),
        basic("someone", ADMIN_PASSWORD),
        basic(ADMIN_USERNAME, `${ADMIN_PASSWORD}x`),
        basic(ADMIN_USERNAME, ""),
        "Basic !!!",
        `Basic ${Buffer.from(`${ADMIN_USERNAME}${ADMIN_PASSWORD}`).toString("base64")}`,
      ];
      // A request without credentials (a browser's first) is answered 401 and not counted.
      for (let i = 0; i < 3; i++) expect((await board("/admin/queues")).status).toBe(401);
      for (let i = 0; i < 10; i++) {
        const res = await board(i % 2 ? "/admin/queues" : "/admin/queues/api/queues", wrong[i % wrong.length]);
        expect(res.status).toBe(401);
        expect(res.headers.get("www-authenticate")).toMatch(/^Basic realm=/);
        expectError({ status: res.status, body: await res.json() }, 401, "unauthorized");
      }
      const locked = await board("/admin/queues", basic(ADMIN_USERNAME, ADMIN_PASSWORD));
      expect(locked.status).toBe(429);
      expect(Number(locked.headers.get("retry-after"))).toBeGreaterThan(0);
      expectError({ status: locked.status, body: await locked.json() }, 429, "rate_limited");
    });
  });
});

describe("ADMIN_READ_WRITE=true", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ dispatcher: false, env: { ADMIN_USERNAME, ADMIN_PASSWORD, ADMIN_READ_WRITE: "true" } });
  });
  afterAll(() => stack.close());

  test("the board may change jobs", async () => {
    const api = await fetch(`${stack.adminUrl}/admin/queues/api/queues`, {
      headers: { authorization: basic(ADMIN_USERNAME, ADMIN_PASSWORD) },
    });
    expect(JSON.stringify(await api.json())).toContain('"readOnlyMode":false');
    const pause = await fetch(`${stack.adminUrl}/admin/queues/api/queues/deliveries/pause`, {
      method: "PUT",
      headers: { authorization: basic(ADMIN_USERNAME, ADMIN_PASSWORD) },
    });
    expect(pause.status).toBe(200);
  });
});

describe("without ADMIN_USERNAME/ADMIN_PASSWORD, and with no dispatcher (work stays queued)", () => {
  let stack: Stack;
  let redis: Redis;
  beforeAll(async () => {
    stack = await startStack({ dispatcher: false, env: { ALLOW_PRIVATE_TARGETS: "false" } });
    issuedKeys.push(stack.apiKey);
    redis = new Redis(testRedisUrl());
  });
  afterAll(async () => {
    await redis.quit();
    await stack.close();
  });

  test("the board is not mounted: 404 in the error shape, with or without credentials", async () => {
    for (const path of ["/admin/queues", "/admin/queues/api/queues"]) {
      for (const headers of [{}, { authorization: basic("admin", "admin") }] as Record<string, string>[]) {
        expectError(await apiAs(stack, null, "GET", path, undefined, headers), 404, "not_found");
      }
    }
  });

  test("with ALLOW_PRIVATE_TARGETS=false, a public IP literal is accepted at registration (and PATCH)", async () => {
    const acct = await account(stack);
    const pub = await acct.api("POST", "/v1/webhooks", { url: "https://93.184.216.34/hook", events: ["message.sent"] });
    expect(pub.status).toBe(201);
    expect(pub.body.url).toBe("https://93.184.216.34/hook");
    const v6 = await acct.api("PATCH", `/v1/webhooks/${pub.body.id}`, { url: "https://[2606:2800:220:1:248:1893:25c8:1946]/hook" });
    expect(v6.status).toBe(200);
    expectValidation(await acct.api("PATCH", `/v1/webhooks/${pub.body.id}`, { url: "https://[::ffff:10.0.0.1]/hook" }), "url");
  });

  test("job data carries ids only: no secret, payload, email content or API key anywhere in Redis", async () => {
    const acct = await account(stack);
    const marker = randomUUID();
    const hook = await acct.api("POST", "/v1/webhooks", { url: `https://localhost:9/jobs-${marker}`, events: ["message.received"] });
    expect(hook.status).toBe(201);
    const data = sampleData("message.received", {
      subject: `subject-${marker}`,
      body: `body-${marker}`,
      from: `from-${marker}@example.com`,
    });
    const event = await acct.api("POST", "/v1/events", { event_type: "message.received", data });
    expect(event.status).toBe(201);
    const raw = `From: sender-${marker}@example.com\r\nTo: inbox@example.com\r\nSubject: raw-${marker}\r\nMessage-ID: <raw-${marker}@example.com>\r\n\r\nraw body ${marker}\r\n`;
    expect((await acct.api("POST", "/v1/inboxes/inbox_jobs/messages", raw, { "content-type": "message/rfc822" })).status).toBe(201);
    expect((await acct.api("POST", `/v1/events/${event.body.event_id}/replay`)).status).toBe(202);
    expect(
      (await acct.api("POST", `/v1/events/${event.body.event_id}/replay`, { target_url: `https://localhost:9/override-${marker}` })).status,
    ).toBe(202);

    const ours = new Set([
      ...(await stack.prisma.testDelivery.findMany({ where: { accountId: acct.accountId }, select: { id: true } })).map((t) => t.id),
      ...(await stack.prisma.destination.findMany({ where: { accountId: acct.accountId }, select: { id: true } })).map((d) => d.id),
      ...(await stack.prisma.replay.findMany({ where: { accountId: acct.accountId }, select: { id: true } })).map((r) => r.id),
    ]);
    // test event, two destinations (JSON event and raw message), two replays
    expect(ours.size).toBe(5);
    // A relay claims the accepted work (this stack's, every test's) into Redis; no worker takes it.
    const waiting = (await stack.pool.query("SELECT count(*)::int AS n FROM work_items WHERE queue_prefix = $1", [stack.prefix])).rows[0].n;
    await claimIntoQueue(stack, { count: waiting, visibilityTimeoutMs: 60_000, redisUrl: testRedisUrl() });
    const queue = new Queue("deliveries", { connection: redis, prefix: stack.keyPrefix });
    try {
      const states = ["wait", "active", "delayed", "completed", "failed", "prioritized", "waiting-children"] as const;
      const all = await queue.getJobs([...states]);
      const jobs = all.filter((j) => ours.has((j.data as { workId: string }).workId));
      expect(jobs.map((j) => j.name).sort()).toEqual(["delivery", "delivery", "replay", "replay", "test-delivery"]);
      // Every job of the queue, this test's or not, carries its unit of work's id and the claim's
      // lease number, nothing else.
      expect(all.length).toBeGreaterThanOrEqual(5);
      for (const job of all) {
        expect(Object.keys(job.data as object).sort()).toEqual(["lease", "workId"]);
        expect(job.data.workId).toMatch(/^(tst|dst|rpl)_[0-9a-f]{32}$/);
        expect(Number.isInteger(job.data.lease)).toBe(true);
      }
    } finally {
      await queue.close();
    }

    // Every key under the prefix, whatever its type: job hashes, lists, sets, streams.
    const dump: string[] = [];
    for (const key of await redis.keys(`${stack.prefix}:*`)) {
      const type = await redis.type(key);
      if (type === "hash") dump.push(JSON.stringify(await redis.hgetall(key)));
      else if (type === "string") dump.push((await redis.get(key)) ?? "");
      else if (type === "list") dump.push(JSON.stringify(await redis.lrange(key, 0, -1)));
      else if (type === "set") dump.push(JSON.stringify(await redis.smembers(key)));
      else if (type === "zset") dump.push(JSON.stringify(await redis.zrange(key, "0", "-1")));
      else if (type === "stream") dump.push(JSON.stringify(await redis.xrange(key, "-", "+")));
    }
    const text = dump.join("\n");
    expect(text).toContain([...ours][0]);
    for (const secret of [hook.body.secret, acct.apiKey, acct.apiKey.slice(17), marker, data.messageId as string]) {
      expect(text).not.toContain(secret);
    }
  });
});

describe("rate limiting: RATE_LIMIT_PER_MINUTE=5, shared by API replicas", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { RATE_LIMIT_PER_MINUTE: "5" }, dispatcher: false });
  });
  afterAll(() => stack.close());

  const expectRateLimited = (res: { status: number; body: any; headers: Headers }) => {
    expectError(res, 429, "rate_limited");
    const retryAfter = res.headers.get("retry-after");
    expect(retryAfter).toMatch(/^\d+$/);
    expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
    expect(Number(retryAfter)).toBeLessThanOrEqual(60);
  };

  test("the 6th request of a key within a minute is 429 with Retry-After; another key is not limited", async () => {
    const acct = await stack.newAccount();
    for (let i = 0; i < 5; i++) expect((await acct.api("GET", "/v1/webhooks")).status).toBe(200);
    expectRateLimited(await acct.api("GET", "/v1/webhooks"));
    // Writes are limited too, and a limited request stores nothing.
    expectRateLimited(await acct.api("POST", "/v1/events", validEvent()));
    expect(await stack.prisma.event.count({ where: { accountId: acct.accountId } })).toBe(0);

    const other = await stack.newAccount();
    expect((await other.api("GET", "/v1/webhooks")).status).toBe(200);
    // Unauthenticated health checks are not limited.
    expect((await apiAs(stack, null, "GET", "/healthz")).status).toBe(200);
  });

  test("the limit is one budget across two API instances on the same Redis and QUEUE_PREFIX", async () => {
    const replica = await stack.startApiReplica();
    const acct = await stack.newAccount();
    const onB = replica.apiAs(acct.apiKey);
    for (let i = 0; i < 3; i++) expect((await acct.api("GET", "/v1/deliveries")).status).toBe(200);
    for (let i = 0; i < 2; i++) expect((await onB("GET", "/v1/deliveries")).status).toBe(200);
    expectRateLimited(await onB("GET", "/v1/deliveries"));
    expectRateLimited(await acct.api("GET", "/v1/deliveries"));
    // The replica serves other keys normally.
    const other = await stack.newAccount();
    expect((await replica.apiAs(other.apiKey)("GET", "/v1/deliveries")).status).toBe(200);
    await replica.close();
  });
});

describe("logs and storage (private targets allowed, so that deliveries really happen)", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "50,50,50", ADMIN_USERNAME, ADMIN_PASSWORD } });
    issuedKeys.push(stack.apiKey);
  });
  afterAll(() => stack.close());

  test("secrets, API keys and email bodies never reach a log line, at any level", async () => {
    // Everything the process's loggers write meanwhile, at the most verbose level (this test logs
    // secrets on purpose: they stay off the console).
    let state: Record<string, any> = {};
    const text = await captureLogs(
      async () => {
        const acct = await account(stack);
        const forged = `${acct.apiKey.slice(0, 17)}${"Z".repeat(43)}`;
        const bodyMarker = `body-${randomUUID()}`;
        // Failing requests that carry keys and credentials.
        expectError(
          await apiAs(stack, forged, "POST", "/v1/webhooks", { url: "https://localhost:9/log", events: ["message.sent"] }),
          401,
          "unauthorized",
        );
        expectError(
          await apiAs(stack, null, "GET", "/v1/webhooks", undefined, { authorization: `Basic ${acct.apiKey}` }),
          401,
          "unauthorized",
        );
        const denied = await fetch(`${stack.adminUrl}/admin/queues`, {
          headers: { authorization: basic(ADMIN_USERNAME, `${ADMIN_PASSWORD}-nope`) },
        });
        expect(denied.status).toBe(401);
        expectValidation(await acct.api("POST", "/v1/webhooks", { url: "http://localhost:9/log", events: ["message.sent"] }), "url");
        // Successful ones: a webhook (its secret), its test event, an event with a body, a replay.
        // The receiver fails the first attempt (a retry follows), then accepts.
        const hr = await startHookReceiver(stack, (_arrival, nth) => (nth === 1 ? { status: 500 } : {}));
        const hook = await createHook(acct, hr, "/log", ["message.received"]);
        expect((await acct.api("GET", `/v1/webhooks/${hook.id}/secret`)).body.secret).toBe(hook.secret);
        const event = await acct.api("POST", "/v1/events", validEvent("message.received", { body: bodyMarker }));
        expect(event.status).toBe(201);
        await hr.receiver.waitFor((arrivals) => arrivals.filter((a) => a.body.includes(bodyMarker)).length === 2);
        await waitUntil(
          () => acct.api("GET", `/v1/events/${event.body.event_id}`),
          (r) => r.body.status === "delivered",
        );
        expect((await acct.api("POST", `/v1/events/${event.body.event_id}/replay`)).status).toBe(202);
        await waitUntil(
          () => acct.api("GET", `/v1/audit-log?event_id=${event.body.event_id}`),
          (r) => r.body.data.length === 1,
        );
        const rotated = await acct.api("POST", `/v1/webhooks/${hook.id}/secret/rotate`, { grace_seconds: 0 });
        expect(rotated.status).toBe(200);
        // The dashboard: a one-time link (its token), its page, sign-in (a session cookie), the
        // secret revealed and rotated again there.
        const link = await acct.api("POST", "/v1/dashboard-links", {});
        expect(link.status).toBe(201);
        const linkToken = pathOf(link.body.url).split("/").pop()!;
        expect((await request(stack.baseUrl).get(`/dashboard/sign-in/${linkToken}`)).status).toBe(200);
        const session = await signInWith(stack, link.body.url);
        expect((await session.get(`/dashboard/webhooks/${hook.id}`)).status).toBe(200);
        expect((await session.get(`/dashboard/webhooks/${hook.id}/secret`)).status).toBe(200);
        const revealed = await session.post(`/dashboard/webhooks/${hook.id}/secret`);
        expect(revealed.status).toBe(200);
        expect(revealed.text).toContain(rotated.body.secret);
        expect((await session.get(`/dashboard/webhooks/${hook.id}/rotate`)).status).toBe(200);
        const rotatedInDashboard = await session.post(`/dashboard/webhooks/${hook.id}/rotate`, { grace_seconds: "0" });
        expect(rotatedInDashboard.status).toBe(200);
        const dashboardSecret = /<code id="secret-value">(whsec_[A-Za-z0-9+/=_-]+)<\/code>/.exec(rotatedInDashboard.text)![1];
        expect(dashboardSecret).not.toBe(rotated.body.secret);
        // Every other route, with the key, the secrets, the tokens and the body in places where they do not belong.
        const secrets = [hook.secret, rotated.body.secret, dashboardSecret];
        const inputs = [...secrets, acct.apiKey, bodyMarker, linkToken, session.cookie];
        for (const value of inputs) {
          const junk = encodeURIComponent(value);
          expect((await acct.api("GET", `/v1/webhooks/${junk}/secret`)).status).toBe(404);
          expect((await acct.api("POST", `/v1/webhooks/${junk}/secret/rotate`, { grace_seconds: 0 })).status).toBe(404);
          expect((await acct.api("POST", `/v1/webhooks/${hook.id}/secret/rotate`, { grace_seconds: value })).status).toBe(422);
          expect((await acct.api("POST", "/v1/dashboard-links", { account: value })).status).toBe(422);
          if (value !== acct.apiKey) expect((await apiAs(stack, value, "POST", "/v1/dashboard-links", {})).status).toBe(401);
          // Sign-in with it as a link token, requests with it as the session cookie.
          expect((await request(stack.baseUrl).get(`/dashboard/sign-in/${junk}`)).status).toBeLessThan(500);
          expect((await request(stack.baseUrl).post(`/dashboard/sign-in/${junk}`)).status).toBeLessThan(500);
          const paths =
            value === session.cookie
              ? []
              : ["/dashboard/webhooks", `/dashboard/webhooks/${hook.id}/secret`, `/dashboard/webhooks/${junk}/rotate`];
          for (const path of paths)
            expect((await request(stack.baseUrl).get(path).set("cookie", `mailhooks_dashboard=${junk}`)).status).toBe(401);
          // Pages behind the session, with it in the path and in the forms.
          expect((await session.get(`/dashboard/webhooks/${junk}`)).status).toBeLessThan(500);
          expect((await session.get(`/dashboard/webhooks/${junk}/secret`)).status).toBeLessThan(500);
          expect((await session.post(`/dashboard/webhooks/${junk}/secret`)).status).toBeLessThan(500);
          expect((await session.post(`/dashboard/webhooks/${junk}/rotate`, { grace_seconds: "0" })).status).toBeLessThan(500);
          expect((await session.post(`/dashboard/webhooks/${hook.id}/rotate`, { grace_seconds: value })).status).toBe(422);
          // (Refused: not an https URL. An accepted one would store the value, by the test's own doing.)
          expect(
            (await session.post(`/dashboard/webhooks/${hook.id}`, { url: `http://localhost:9/${value}`, events: ["message.received"] }))
              .status,
          ).toBe(422);
          expect((await session.get(`/dashboard/events?since=${junk}&inbox_id=${junk}`)).status).toBeLessThan(500);
          expect((await session.post(`/dashboard/webhooks/${hook.id}/secret`, { _csrf: value })).status).toBe(403);
          expect((await acct.api("GET", `/v1/webhooks?cursor=${encodeURIComponent(value)}`)).status).toBe(422);
          expect((await acct.api("GET", `/v1/webhooks/${encodeURIComponent(value)}`)).status).toBe(404);
          expect(
            (
              await acct.api("PATCH", `/v1/webhooks/${hook.id}`, {
                url: `https://localhost:9/${value}`,
                events: ["message.received"],
                note: value,
              })
            ).status,
          ).toBe(422);
          expect((await acct.api("DELETE", `/v1/webhooks/${encodeURIComponent(value)}`)).status).toBe(404);
          expect((await acct.api("POST", "/v1/events", `{"event_type": "${value}", `, { "content-type": "application/json" })).status).toBe(
            400,
          );
          expect(
            (await acct.api("POST", "/v1/events", validEvent("message.sent", { subject: value }), { "idempotency-key": `${value} x` }))
              .status,
          ).toBe(422);
          expect((await acct.api("POST", "/v1/events/batch", { events: [validEvent("message.sent", { from: value })] })).status).toBe(422);
          expect(
            (await acct.api("GET", `/v1/events?inbox_id=${encodeURIComponent(value)}&since=${encodeURIComponent(value)}`)).status,
          ).toBe(422);
          expect((await acct.api("GET", `/v1/events/${encodeURIComponent(value)}`)).status).toBe(404);
          expect((await acct.api("POST", `/v1/events/${event.body.event_id}/replay`, { target_url: value })).status).toBe(422);
          expect(
            (
              await acct.api(
                "POST",
                "/v1/inboxes/inbox_log/messages",
                `From: a@example.com\r\nTo: b@example.com\r\nSubject: ${value}\r\n\r\n${value}\r\n`,
                { "content-type": "message/rfc822" },
              )
            ).status,
          ).toBe(201);
          expect((await acct.api("GET", `/v1/deliveries?event_id=${encodeURIComponent(value)}`)).status).toBe(200);
          expect((await acct.api("GET", `/v1/audit-log?since=${encodeURIComponent(value)}`)).status).toBe(422);
          expect((await apiAs(stack, null, "GET", `/readyz?k=${encodeURIComponent(value)}`)).status).toBe(200);
        }
        expect((await apiAs(stack, null, "GET", "/metrics")).status).toBe(200);
        // Signing out ends the session; its cookie then signs nothing in.
        expect((await session.post("/dashboard/sign-out")).status).toBe(200);
        expect((await session.get("/dashboard/webhooks")).status).toBe(401);
        expect((await acct.api("DELETE", `/v1/webhooks/${hook.id}`)).status).toBe(204);
        // A module that logs such values by field name, nested or not, gets them redacted.
        getLogger("security-test").warn("careless", {
          authorization: `Bearer ${acct.apiKey}`,
          secret: hook.secret,
          body: bodyMarker,
          payload: bodyMarker,
        });
        getLogger("security-test").warn("careless, nested", {
          request: { headers: { authorization: `Bearer ${acct.apiKey}` }, webhook: { secret: rotated.body.secret } },
        });
        getLogger("security-test").info(`capture-check ${acct.apiKeyId}`);
        state = { acct, forged, bodyMarker, hook, rotated, dashboardSecret, linkToken, sessionToken: session.cookie, csrf: session.csrf };
      },
      { level: process.env.LOG_LEVEL ?? "warn", format: "pretty" },
    );
    const { acct, forged, bodyMarker, hook, rotated, dashboardSecret, linkToken, sessionToken, csrf } = state;
    expect(text).toContain("capture-check"); // the capture works
    expect(text).toContain(acct.apiKeyId); // ids may be logged
    expect(csrf).toBeTruthy();
    for (const secret of [
      acct.apiKey,
      forged,
      acct.apiKey.slice(17),
      hook.secret,
      hook.secret.slice(6),
      rotated.body.secret,
      rotated.body.secret.slice(6),
      dashboardSecret,
      dashboardSecret.slice(6),
      linkToken,
      sessionToken,
      csrf,
      ADMIN_PASSWORD,
      bodyMarker,
    ]) {
      expect(text).not.toContain(secret);
    }
  });

  test("requests that fail while PostgreSQL is cut off are logged without the secrets, keys and tokens in their paths", async () => {
    // The only log lines of a request are its failures (500, 503): this stack reaches PostgreSQL
    // through a proxy that the test cuts.
    const target = new URL(testDatabaseUrl());
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    const cutOff = await startStack({ env: { DATABASE_URL: databaseUrlVia(proxy.port) }, dispatcher: false });
    issuedKeys.push(cutOff.apiKey);
    try {
      const hook = await cutOff.api("POST", "/v1/webhooks", { url: "https://localhost:9/cut", events: ["message.sent"] });
      expect(hook.status).toBe(201);
      const session = await signIn(cutOff);
      const link = await cutOff.api("POST", "/v1/dashboard-links", {});
      const linkToken = pathOf(link.body.url).split("/").pop()!;
      const values = [hook.body.secret, cutOff.apiKey, linkToken, session.cookie, `body-${randomUUID()}`];
      const text = await captureLogs(
        async () => {
          proxy.cut();
          for (const value of values) {
            const junk = encodeURIComponent(value);
            expect((await cutOff.api("GET", `/v1/webhooks/${junk}/secret`)).status).toBe(503);
            expect((await cutOff.api("POST", `/v1/webhooks/${junk}/secret/rotate`, {})).status).toBe(503);
            expect((await cutOff.api("GET", `/v1/events/${junk}`)).status).toBe(503);
            // Only what looks like a token (a key's 12 hex digits, then 43 base64url characters) is looked up.
            const token = /^(?:[0-9a-f]{12})?[A-Za-z0-9_-]{43}$/.test(value);
            expect((await request(cutOff.baseUrl).get(`/dashboard/sign-in/${junk}`)).status).toBe(token ? 503 : 404);
            expect(
              (await request(cutOff.baseUrl).get(`/dashboard/webhooks/${junk}`).set("cookie", `mailhooks_dashboard=${junk}`)).status,
            ).toBe(token ? 503 : 401);
          }
        },
        { level: process.env.LOG_LEVEL ?? "warn", format: "pretty" },
      );
      proxy.restore();
      expect(text).toContain("dependency unavailable"); // the failures were logged, with their paths
      expect(text).toContain("/v1/webhooks/[redacted]/secret");
      for (const value of values) {
        expect(text).not.toContain(value);
        expect(text).not.toContain(encodeURIComponent(value));
      }
    } finally {
      proxy.restore();
      await cutOff.close();
      await proxy.close();
    }
  });

  test("no issued API key is stored in any table (of every account of this file)", async () => {
    const stored = await everyStoredRow(stack);
    expect(stored.length).toBeGreaterThan(0);
    expect(issuedKeys.length).toBeGreaterThan(5);
    for (const key of issuedKeys) {
      expect(stored).not.toContain(key);
      expect(stored).not.toContain(key.slice(17));
    }
  });
});
