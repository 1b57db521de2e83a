import { randomUUID } from "node:crypto";
import type pg from "pg";
import { createPool, newId } from "@mailhooks/db";
import { IdempotencyConflictError } from "./ingest.js";
import { registerWebhook, requestTestDelivery } from "./webhook-registration.js";
import { changeWebhook, reencryptSecrets } from "./webhooks.js";

/**
 * Webhooks' state on its own, against the test database: the options stored at registration
 * and changed (absent keeps, null clears), idempotent registration, test deliveries with their
 * delivery row id chosen up front, and re-encryption covering the stored headers.
 */
const pool: pg.Pool = createPool(process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/webhooks_test", 4);
const prefix = `test-ds-wh-${randomUUID()}`;

afterAll(async () => {
  await pool.query("DELETE FROM work_items WHERE queue_prefix = $1", [prefix]);
  await pool.end();
});

async function newAccount(): Promise<string> {
  const id = newId("acct");
  await pool.query("INSERT INTO accounts (id, name) VALUES ($1, $2)", [id, `delivery-state-${id}`]);
  return id;
}

const base = (accountId: string) => ({
  accountId,
  queuePrefix: prefix,
  url: "https://receiver.example/h",
  events: ["message.sent"],
  secret: "stored-secret",
  maxWebhooks: 10,
});

describe("webhooks' state", () => {
  test("options are stored at registration; a change keeps what it does not name and clears what it sets to null", async () => {
    const accountId = await newAccount();
    const made = (await registerWebhook(pool, { ...base(accountId), rateLimit: 7, inboxIds: ["in_1"], headers: "stored-headers" }))!;
    expect(made.webhook).toMatchObject({ rate_limit: 7, inbox_ids: ["in_1"], headers: "stored-headers" });
    const kept = await changeWebhook(pool, accountId, made.webhook.id, { url: "https://receiver.example/h2" }, "test-webhooks");
    expect(kept).toMatchObject({ rate_limit: 7, inbox_ids: ["in_1"], headers: "stored-headers" });
    const cleared = await changeWebhook(
      pool,
      accountId,
      made.webhook.id,
      { rateLimit: null, inboxIds: null, headers: null },
      "test-webhooks",
    );
    expect(cleared).toMatchObject({ rate_limit: null, inbox_ids: null, headers: null });
  });

  test("a test delivery stores its kind and the id of its delivery row", async () => {
    const accountId = await newAccount();
    const made = (await registerWebhook(pool, base(accountId)))!;
    expect(made.deliveryId).toMatch(/^dlv_/);
    const asked = (await requestTestDelivery(pool, accountId, made.webhook.id, prefix, "message.opened"))!;
    const { rows } = await pool.query(
      "SELECT id, event_type, delivery_id FROM test_deliveries WHERE webhook_id = $1 ORDER BY created_at, id",
      [made.webhook.id],
    );
    expect(rows).toEqual([
      { id: made.testDeliveryId, event_type: null, delivery_id: made.deliveryId },
      { id: asked.testDeliveryId, event_type: "message.opened", delivery_id: asked.deliveryId },
    ]);
    expect(await requestTestDelivery(pool, await newAccount(), made.webhook.id, prefix)).toBeNull();
  });

  test("registration with an idempotency key: a repeat returns the first webhook without a test delivery; another body throws", async () => {
    const accountId = await newAccount();
    const idempotency = { key: "k1", requestHash: "h1" };
    const first = (await registerWebhook(pool, { ...base(accountId), idempotency }))!;
    const again = (await registerWebhook(pool, { ...base(accountId), idempotency }))!;
    expect(again).toEqual({ webhook: first.webhook, repeated: true });
    await expect(registerWebhook(pool, { ...base(accountId), idempotency: { key: "k1", requestHash: "h2" } })).rejects.toThrow(
      IdempotencyConflictError,
    );
    const { rows } = await pool.query("SELECT count(*)::int AS n FROM test_deliveries WHERE account_id = $1", [accountId]);
    expect(rows[0].n).toBe(1);
  });

  test("reencryptSecrets rewrites the stored headers too, only when they were not changed meanwhile", async () => {
    const accountId = await newAccount();
    const made = (await registerWebhook(pool, { ...base(accountId), secret: "new:secret", headers: "old:headers" }))!;
    const other = (await registerWebhook(pool, { ...base(accountId), secret: "new:secret2" }))!;
    // A stand-in for the keyring: values starting "old:" are moved to "new:".
    const moved = await reencryptSecrets(pool, (stored) => (stored.startsWith("old:") ? `new:${stored.slice(4)}` : null));
    expect(moved).toBeGreaterThanOrEqual(1);
    const { rows } = await pool.query("SELECT id, secret, headers FROM webhooks WHERE id = ANY($1) ORDER BY id", [
      [made.webhook.id, other.webhook.id],
    ]);
    expect(new Map(rows.map((r) => [r.id, [r.secret, r.headers]]))).toEqual(
      new Map([
        [made.webhook.id, ["new:secret", "new:headers"]],
        [other.webhook.id, ["new:secret2", null]],
      ]),
    );
  });
});
