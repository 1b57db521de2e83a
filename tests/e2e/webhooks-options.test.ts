import { randomBytes, randomUUID } from "node:crypto";
import { createKeyring } from "@mailhooks/secrets";
import { captureLogs } from "@mailhooks/logger";
import { sampleData, startStack, type Account, type Stack } from "../support/stack.js";
import { expectError, expectValidation } from "../support/hooks.js";
import { testDatabaseUrl } from "../support/env.js";
import { scratchDatabase } from "../chaos/support/database.js";
import pg from "pg";
import { runProcess } from "@mailhooks/processes";
import { runCli } from "../support/cli.js";

/**
 * A webhook's options (docs/api.md, "Webhooks"): `rate_limit`, `inbox_ids` and `headers` set at
 * creation and by PATCH, with their bounds; header values stored encrypted and answered as
 * names only; and URLs with invisible characters refused (issue 17). Their enforcement at
 * delivery and at ingest is tested where it happens.
 */
const KEY = randomBytes(32);

/** A 422 with a detail at `path` or under it (`inbox_ids.3`). */
function expectRefused(res: { status: number; body: any }, path: string): void {
  expectError(res, 422, "validation_error");
  expect(res.body.error.details.map((d: { path: string }) => d.path)).toContainEqual(
    expect.stringMatching(new RegExp(`^${path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`)),
  );
}

describe("webhook options", () => {
  let stack: Stack;
  let acct: Account;
  beforeAll(async () => {
    // API only: these tests look at what is stored and answered, not at deliveries.
    stack = await startStack({ dispatcher: false, env: { SECRET_ENCRYPTION_KEYS: KEY.toString("base64") } });
  });
  afterAll(() => stack.close());
  beforeEach(async () => {
    acct = await stack.newAccount();
  });

  const URL = "https://receiver.example/hook";
  const create = (body: Record<string, unknown>, headers?: Record<string, string>) =>
    acct.api("POST", "/v1/webhooks", { url: URL, events: ["message.sent"], ...body }, headers);

  test("defaults: rate_limit null, inbox_ids null, headers {}", async () => {
    const created = await create({});
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ rate_limit: null, inbox_ids: null, headers: {} });
    expect((await acct.api("GET", `/v1/webhooks/${created.body.id}`)).body).toMatchObject({
      rate_limit: null,
      inbox_ids: null,
      headers: {},
    });
    const row = await stack.prisma.webhook.findUniqueOrThrow({ where: { id: created.body.id } });
    expect({ rateLimit: row.rateLimit, headers: row.headers }).toEqual({ rateLimit: null, headers: null });
  });

  test("rate_limit: 1..1000 at creation and by PATCH, null lifts it; anything else is 422 and changes nothing", async () => {
    const created = await create({ rate_limit: 50 });
    expect(created.status).toBe(201);
    expect(created.body.rate_limit).toBe(50);
    const id = created.body.id;
    for (const bad of [0, 1001, 1.5, -1, "10", true, {}, [5]]) {
      expectValidation(await create({ rate_limit: bad }), "rate_limit");
      expectValidation(await acct.api("PATCH", `/v1/webhooks/${id}`, { rate_limit: bad }), "rate_limit");
    }
    expect((await acct.api("GET", `/v1/webhooks/${id}`)).body.rate_limit).toBe(50);
    expect((await acct.api("PATCH", `/v1/webhooks/${id}`, { rate_limit: 1000 })).body.rate_limit).toBe(1000);
    expect((await acct.api("PATCH", `/v1/webhooks/${id}`, { rate_limit: 1 })).body.rate_limit).toBe(1);
    // A PATCH without it keeps it.
    expect((await acct.api("PATCH", `/v1/webhooks/${id}`, { events: ["message.opened"] })).body.rate_limit).toBe(1);
    expect((await acct.api("PATCH", `/v1/webhooks/${id}`, { rate_limit: null })).body.rate_limit).toBeNull();
    expect((await acct.api("GET", `/v1/webhooks/${id}`)).body.rate_limit).toBeNull();
  });

  test("inbox_ids: 1..100 ids at creation and by PATCH, null means every inbox again; [] and other shapes are 422", async () => {
    const created = await create({ inbox_ids: ["inbox_a", "inbox_b", "inbox_a"] });
    expect(created.status).toBe(201);
    expect(created.body.inbox_ids).toEqual(["inbox_a", "inbox_b"]);
    const id = created.body.id;
    const hundred = Array.from({ length: 100 }, (_, i) => `inbox_${i}`);
    for (const bad of [[], [...hundred, "inbox_100"], [""], [5], "inbox_a", { a: 1 }, ["a\u0000b"], ["x".repeat(201)]]) {
      expectRefused(await create({ inbox_ids: bad }), "inbox_ids");
      expectRefused(await acct.api("PATCH", `/v1/webhooks/${id}`, { inbox_ids: bad }), "inbox_ids");
    }
    expect((await acct.api("PATCH", `/v1/webhooks/${id}`, { inbox_ids: hundred })).body.inbox_ids).toEqual(hundred);
    expect((await acct.api("PATCH", `/v1/webhooks/${id}`, { url: `${URL}?v=2` })).body.inbox_ids).toEqual(hundred);
    expect((await acct.api("PATCH", `/v1/webhooks/${id}`, { inbox_ids: null })).body.inbox_ids).toBeNull();
    expect((await acct.api("GET", `/v1/webhooks/${id}`)).body.inbox_ids).toBeNull();
    const list = await acct.api("GET", "/v1/webhooks");
    expect(list.body.data[0]).toMatchObject({ id, inbox_ids: null, rate_limit: null, headers: {} });
  });

  test("headers: answered as names only, stored encrypted (the agreed form), never in any table, answer, error or log; PATCH replaces the set", async () => {
    const value = `Bearer gw_${randomUUID()}`;
    const other = `k_${randomUUID()}`;
    const logs = await captureLogs(async () => {
      const created = await create({ headers: { Authorization: value, "X-Gateway-Key": other } });
      expect(created.status).toBe(201);
      expect(created.body.headers).toEqual({ Authorization: "***", "X-Gateway-Key": "***" });
      const id = created.body.id;
      for (const res of [created, await acct.api("GET", `/v1/webhooks/${id}`), await acct.api("GET", "/v1/webhooks")]) {
        expect(JSON.stringify(res.body)).not.toContain(value);
        expect(JSON.stringify(res.body)).not.toContain(other);
      }
      expect((await acct.api("GET", `/v1/webhooks/${id}`)).body.headers).toEqual({ Authorization: "***", "X-Gateway-Key": "***" });

      // The stored form, as agreed with the dispatcher: keyring.encrypt(JSON.stringify(headers)).
      const row = await stack.prisma.webhook.findUniqueOrThrow({ where: { id } });
      const ring = createKeyring([KEY]);
      expect(row.headers).toMatch(new RegExp(`^v1\\.${ring.primaryKeyId}\\.`));
      expect(JSON.parse(ring.decrypt(row.headers!))).toEqual({ Authorization: value, "X-Gateway-Key": other });

      // A refused change says which header, never its value.
      const refused = await acct.api("PATCH", `/v1/webhooks/${id}`, { headers: { Authorization: value, Host: other } });
      expectValidation(refused, "headers.Host");
      expect(JSON.stringify(refused.body)).not.toContain(other);
      expect(JSON.stringify(refused.body)).not.toContain(value);

      // PATCH replaces the whole set; {} removes every header.
      const replaced = await acct.api("PATCH", `/v1/webhooks/${id}`, { headers: { "X-Other": "v" } });
      expect(replaced.body.headers).toEqual({ "X-Other": "***" });
      expect(JSON.parse(ring.decrypt((await stack.prisma.webhook.findUniqueOrThrow({ where: { id } })).headers!))).toEqual({
        "X-Other": "v",
      });
      expect((await acct.api("PATCH", `/v1/webhooks/${id}`, { rate_limit: 5 })).body.headers).toEqual({ "X-Other": "***" });
      const cleared = await acct.api("PATCH", `/v1/webhooks/${id}`, { headers: {} });
      expect(cleared.body.headers).toEqual({});
      expect((await stack.prisma.webhook.findUniqueOrThrow({ where: { id } })).headers).toBeNull();
      expect((await acct.api("PATCH", `/v1/webhooks/${id}`, { headers: { Authorization: value } })).body.headers).toEqual({
        Authorization: "***",
      });

      // Nowhere in the database in clear: a dump of it (every table, every row) has neither value.
      const dump = await runProcess("pg_dump", ["--data-only", "--no-owner", testDatabaseUrl()]);
      expect(dump.code).toBe(0);
      expect(dump.stdout).toContain(id);
      expect(dump.stdout).not.toContain(value);
      expect(dump.stdout).not.toContain(other);
      expect(dump.stdout).not.toContain(value.slice("Bearer ".length));
    });
    // Every log line of the service's loggers, at every level, while all this went on.
    expect(logs).not.toContain(value.slice("Bearer ".length));
    expect(logs).not.toContain(other);
  });

  test("headers: names are HTTP tokens; service headers, X-Service-*, more than 20, long, invisible or non-ASCII values and 8 KiB in all are refused", async () => {
    const secret = `s_${randomUUID()}`;
    const bad: [Record<string, unknown>, string][] = [
      [{ "Content-Type": secret }, "headers.Content-Type"],
      [{ "content-length": secret }, "headers.content-length"],
      [{ HOST: secret }, "headers.HOST"],
      [{ Connection: secret }, "headers.Connection"],
      [{ "Transfer-Encoding": secret }, "headers.Transfer-Encoding"],
      [{ "X-Service-Signature": secret }, "headers.X-Service-Signature"],
      [{ "x-service-anything": secret }, "headers.x-service-anything"],
      [{ "Bad Name": secret }, "headers.Bad Name"],
      [{ "Bad:Name": secret }, "headers.Bad:Name"],
      [{ "": secret }, "headers"],
      [{ "X-A": `${secret}\r\nX-Injected: 1` }, "headers.X-A"],
      [{ "X-A": `${secret}\u00e9` }, "headers.X-A"],
      [{ "X-A": ` ${secret}` }, "headers.X-A"],
      [{ "X-A": "" }, "headers.X-A"],
      [{ "X-A": 5 }, "headers.X-A"],
      [{ "X-A": `${secret}${"a".repeat(1024)}` }, "headers.X-A"],
      [{ "X-A": secret, "x-a": secret }, "headers.x-a"],
      [Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`X-H${i}`, secret])), "headers"],
      [Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`X-H${i}`, `${secret}${"a".repeat(900)}`])), "headers"],
    ];
    for (const [headers, path] of bad) {
      const res = await create({ headers });
      expectValidation(res, path);
      expect(JSON.stringify(res.body)).not.toContain(secret);
    }
    expectValidation(await create({ headers: ["Authorization"] }), "headers");
    expectValidation(await create({ headers: null }), "headers");
    // `__proto__` is a plain name that is not kept silently: refused.
    expectValidation(
      await acct.api("POST", "/v1/webhooks", `{"url":"${URL}","events":["message.sent"],"headers":{"__proto__":"x"}}`),
      "headers.__proto__",
    );
    // At the bounds: 20 headers, values of 1024 visible characters with inner spaces.
    const twenty = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`X-H${i}`, "v"]));
    expect((await create({ headers: twenty })).status).toBe(201);
    const long = await create({ headers: { Authorization: `Bearer ${"a".repeat(1017)}`, "x-service": "ok" } });
    expect(long.status).toBe(201);
    expect(long.body.headers).toEqual({ Authorization: "***", "x-service": "***" });
  });

  test("URLs with bidi controls, zero-width, C0/C1 control or other invisible characters are refused, at creation, by PATCH and as a replay target_url", async () => {
    const created = await create({});
    const id = created.body.id;
    const event = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    const invisible = [
      "\u202e",
      "\u2066",
      "\u200f",
      "\u061c",
      "\u200b",
      "\u200d",
      "\u2060",
      "\ufeff",
      "\u00ad",
      "\u0085",
      "\u009b",
      "\u3164",
      "\u00a0",
      "\u2028",
      "\u{e0041}",
      "\ufe0f",
    ];
    for (const ch of invisible) {
      const url = `https://receiver.example/${ch}gpj.exe`;
      expectValidation(await create({ url }), "url");
      expectValidation(await acct.api("PATCH", `/v1/webhooks/${id}`, { url }), "url");
      expectValidation(await acct.api("PATCH", `/v1/webhooks/${id}`, { url: `https://exa${ch}mple.com/h` }), "url");
      if (event.status === 201)
        expectValidation(await acct.api("POST", `/v1/events/${event.body.event_id}/replay`, { target_url: url }), "target_url");
    }
    expect(event.status).toBe(201);
    // Visible text stays accepted: an internationalized name, an encoded space.
    expect((await acct.api("PATCH", `/v1/webhooks/${id}`, { url: "https://bücher.example/h%20ook?q=ü" })).status).toBe(200);
  });
});

describe("POST /v1/webhooks with an Idempotency-Key", () => {
  let stack: Stack;
  let acct: Account;
  beforeAll(async () => {
    stack = await startStack({ dispatcher: false });
  });
  afterAll(() => stack.close());
  beforeEach(async () => {
    acct = await stack.newAccount();
  });

  const body = { url: "https://receiver.example/idem", events: ["message.sent"], headers: { Authorization: "Bearer x" } };
  const testDeliveries = (webhookId: string) => stack.prisma.testDelivery.count({ where: { webhookId } });
  const webhooksOf = (accountId: string) => stack.prisma.webhook.count({ where: { accountId } });

  test("the same key twice: one webhook, one test delivery, the same secret in both answers (201 then 200); another body: 409", async () => {
    const key = `idem-${randomUUID()}`;
    const first = await acct.api("POST", "/v1/webhooks", body, { "Idempotency-Key": key });
    expect(first.status).toBe(201);
    const again = await acct.api("POST", "/v1/webhooks", body, { "Idempotency-Key": key });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    expect(again.body.secret).toMatch(/^whsec_/);
    expect(await webhooksOf(acct.accountId)).toBe(1);
    expect(await testDeliveries(first.body.id)).toBe(1);

    const conflict = await acct.api("POST", "/v1/webhooks", { ...body, events: ["message.opened"] }, { "Idempotency-Key": key });
    expectError(conflict, 409, "conflict");
    expect(await webhooksOf(acct.accountId)).toBe(1);
    // Keys are the account's own: another account's same key makes its own webhook.
    const other = await stack.newAccount();
    expect((await other.api("POST", "/v1/webhooks", body, { "Idempotency-Key": key })).status).toBe(201);
    // Without a key, or with another one, a new webhook each time.
    expect((await acct.api("POST", "/v1/webhooks", body)).status).toBe(201);
    expect((await acct.api("POST", "/v1/webhooks", body, { "Idempotency-Key": `${key}-2` })).status).toBe(201);
    expect(await webhooksOf(acct.accountId)).toBe(3);
    // An invalid key is 422.
    expectValidation(await acct.api("POST", "/v1/webhooks", body, { "Idempotency-Key": "a b" }), "header.Idempotency-Key");
  });

  test("a repeat after a rotation answers the current secret; after the webhook's deletion, 409", async () => {
    const key = `idem-${randomUUID()}`;
    const first = await acct.api("POST", "/v1/webhooks", body, { "Idempotency-Key": key });
    const rotated = await acct.api("POST", `/v1/webhooks/${first.body.id}/secret/rotate`, {});
    expect(rotated.status).toBe(200);
    expect((await acct.api("POST", "/v1/webhooks", body, { "Idempotency-Key": key })).body.secret).toBe(rotated.body.secret);
    expect((await acct.api("DELETE", `/v1/webhooks/${first.body.id}`)).status).toBe(204);
    expectError(await acct.api("POST", "/v1/webhooks", body, { "Idempotency-Key": key }), 409, "conflict");
  });

  test("concurrent repeats of one key make one webhook and one test delivery", async () => {
    const key = `idem-${randomUUID()}`;
    const answers = await Promise.all(Array.from({ length: 8 }, () => acct.api("POST", "/v1/webhooks", body, { "Idempotency-Key": key })));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
    expect(new Set(answers.map((a) => a.body.id)).size).toBe(1);
    expect(new Set(answers.map((a) => a.body.secret)).size).toBe(1);
    expect(await webhooksOf(acct.accountId)).toBe(1);
    expect(await testDeliveries(answers[0].body.id)).toBe(1);
  });

  test("an expired key (older than 24 h) makes a new webhook", async () => {
    const key = `idem-${randomUUID()}`;
    const first = await acct.api("POST", "/v1/webhooks", body, { "Idempotency-Key": key });
    await stack.pool.query(
      "UPDATE webhook_idempotency_keys SET created_at = now() - interval '25 hours' WHERE account_id = $1 AND key = $2",
      [acct.accountId, key],
    );
    const later = await acct.api("POST", "/v1/webhooks", { ...body, events: ["message.opened"] }, { "Idempotency-Key": key });
    expect(later.status).toBe(201);
    expect(later.body.id).not.toBe(first.body.id);
  });
});

describe("`keys reencrypt-secrets` and headers", () => {
  test("moves the encrypted headers to the first key too", async () => {
    // A database of its own: the command walks every webhook of the database it is given.
    const db = await scratchDatabase("reencrypt-headers");
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    try {
      const old = createKeyring([KEY]);
      const headers = JSON.stringify({ Authorization: "Bearer moved" });
      await pool.query("INSERT INTO accounts (id, name) VALUES ('acct_x', 'x')");
      await pool.query(
        "INSERT INTO webhooks (id, account_id, url, events, secret, headers) VALUES ('wh_h', 'acct_x', 'https://example.com/h', '{message.sent}', $1, $2)",
        [old.encrypt("whsec_s"), old.encrypt(headers)],
      );
      const key2 = randomBytes(32);
      const run = await runCli("keys", ["reencrypt-secrets", "--json"], {
        DATABASE_URL: db.url,
        SECRET_ENCRYPTION_KEYS: `${key2.toString("base64")},${KEY.toString("base64")}`,
      });
      const ring = createKeyring([key2, KEY]);
      expect(JSON.parse(run.stdout)).toEqual({ reencrypted: 1, unreadable: 0, key_id: ring.primaryKeyId });
      const [row] = (await pool.query("SELECT secret, headers FROM webhooks WHERE id = 'wh_h'")).rows;
      expect(ring.isCurrent(row.headers) && ring.isCurrent(row.secret)).toBe(true);
      expect(createKeyring([key2]).decrypt(row.headers)).toBe(headers);
    } finally {
      await pool.end();
      await db.drop();
    }
  });
});
