import { randomBytes } from "node:crypto";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createKeyring } from "@mailhooks/secrets";
import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";
import { createHook, emailArrivals, expectError, expectValidation, startHookReceiver } from "../support/hooks.js";
import pg from "pg";
import { scratchDatabase } from "../chaos/support/database.js";

/**
 * Issue "Secrets, rotation, auto-disable", items 1-3: webhook secrets are encrypted at rest
 * (AES-256-GCM, SECRET_ENCRYPTION_KEYS), can be rotated with a grace period during which the
 * previous secret still signs, and a webhook failing for WEBHOOK_AUTO_DISABLE_AFTER_HOURS across
 * 20 events is disabled (`disabled_reason: "failing"`), until PATCH turns it back on.
 */
const KEY_1 = randomBytes(32);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

describe("webhook secrets at rest", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { SECRET_ENCRYPTION_KEYS: KEY_1.toString("base64") } });
  });
  afterAll(() => stack.close());

  /** Every column of the account's webhooks, as the database holds them (a dump, in effect). */
  const dump = async (accountId: string) =>
    (await stack.pool.query("SELECT to_jsonb(w)::text AS row FROM webhooks w WHERE account_id = $1", [accountId])).rows.map((r) => r.row as string).join("\n");

  test("the webhooks table holds no secret, before and after a rotation; the API and the receiver still have it", async () => {
    const acct = await stack.newAccount();
    const hr = await startHookReceiver(stack);
    const hook = await createHook(acct, hr, "/enc", ["message.sent"]);
    await hr.receiver.waitFor((a) => a.some((x) => x.path === "/enc" && x.verified));
    const rotated = await acct.api("POST", `/v1/webhooks/${hook.id}/secret/rotate`, { grace_seconds: 0 });
    expect(rotated.status).toBe(200);
    const text = await dump(acct.accountId);
    expect(text).toContain(hook.id);
    for (const secret of [hook.secret, rotated.body.secret]) {
      expect(secret).toMatch(/^whsec_/);
      expect(text).not.toContain(secret);
      expect(text).not.toContain(secret.slice("whsec_".length));
    }
    // The stored form names its key; the key decrypts it to the secret the API handed out.
    const [row] = (await stack.pool.query("SELECT secret, previous_secret FROM webhooks WHERE id = $1", [hook.id])).rows;
    const ring = createKeyring([KEY_1]);
    expect(row.secret).toMatch(new RegExp(`^v1\\.${ring.primaryKeyId}\\.`));
    expect(ring.decrypt(row.secret)).toBe(rotated.body.secret);
    expect(ring.decrypt(row.previous_secret)).toBe(hook.secret);
    expect((await acct.api("GET", `/v1/webhooks/${hook.id}/secret`)).body).toEqual({ secret: rotated.body.secret });
  });

  test("`keys reencrypt-secrets` moves every secret (legacy plaintext included) to the first key; one no key opens fails it", async () => {
    // A database of its own: the command walks every webhook of the database it is given.
    const db = await scratchDatabase("reencrypt");
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    try {
      const old = createKeyring([KEY_1]);
      await pool.query("INSERT INTO accounts (id, name) VALUES ('acct_x', 'x')");
      const insert = (id: string, secret: string) =>
        pool.query("INSERT INTO webhooks (id, account_id, url, events, secret) VALUES ($1, 'acct_x', 'https://example.com/h', '{message.sent}', $2)", [id, secret]);
      await insert("wh_encrypted", old.encrypt("whsec_encrypted_secret"));
      await insert("wh_legacy", "whsec_legacy_plaintext_secret");
      await insert("wh_foreign", createKeyring([randomBytes(32)]).encrypt("whsec_unreadable"));
      const key2 = randomBytes(32);
      const run = spawnSync(process.execPath, ["--import", "tsx", "--conditions=source", path.join(ROOT, "apps/cli/src/keys.ts"), "reencrypt-secrets", "--json"], {
        cwd: ROOT,
        env: { ...process.env, NODE_OPTIONS: "", DATABASE_URL: db.url, SECRET_ENCRYPTION_KEYS: `${key2.toString("base64")},${KEY_1.toString("base64")}` },
        encoding: "utf8",
      });
      const ring = createKeyring([key2, KEY_1]);
      expect(JSON.parse(run.stdout)).toEqual({ reencrypted: 2, unreadable: 1, key_id: ring.primaryKeyId });
      expect(run.status).toBe(1);
      const rows = new Map((await pool.query("SELECT id, secret FROM webhooks")).rows.map((r) => [r.id as string, r.secret as string]));
      expect(ring.isCurrent(rows.get("wh_encrypted")!) && ring.isCurrent(rows.get("wh_legacy")!)).toBe(true);
      expect(ring.decrypt(rows.get("wh_encrypted")!)).toBe("whsec_encrypted_secret");
      expect(ring.decrypt(rows.get("wh_legacy")!)).toBe("whsec_legacy_plaintext_secret");
      expect(rows.get("wh_foreign")).toMatch(/^v1\./);
    } finally {
      await pool.end();
      await db.drop();
    }
  });
});

describe("secret rotation", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "100,100,100" } });
  });
  afterAll(() => stack.close());

  test("the old secret signs until activates_at, the new one after: a receiver holding both always verifies", async () => {
    const acct = await stack.newAccount();
    const secrets = new Map<string, string | string[]>();
    const hr = await startHookReceiver(stack, undefined, { secretFor: (p) => secrets.get(p) });
    const hook = await acct.api("POST", "/v1/webhooks", { url: hr.url("/old-only"), events: ["message.sent"] });
    const both = await acct.api("POST", "/v1/webhooks", { url: hr.url("/both"), events: ["message.sent"] });
    secrets.set("/old-only", hook.body.secret);
    secrets.set("/both", both.body.secret);

    const GRACE_S = 3;
    const rotation = await acct.api("POST", `/v1/webhooks/${hook.body.id}/secret/rotate`, { grace_seconds: GRACE_S });
    const rotationBoth = await acct.api("POST", `/v1/webhooks/${both.body.id}/secret/rotate`, { grace_seconds: GRACE_S });
    expect(rotation.status).toBe(200);
    expect(Object.keys(rotation.body).sort()).toEqual(["activates_at", "secret"]);
    expect(rotation.body.secret).not.toBe(hook.body.secret);
    const activatesAt = Date.parse(rotation.body.activates_at);
    expect(activatesAt - Date.now()).toBeGreaterThan((GRACE_S - 1) * 1000);
    expect((await acct.api("GET", `/v1/webhooks/${hook.body.id}`)).body.secret_activates_at).toBe(rotation.body.activates_at);
    // The receiver of /both installs the new secret beside the old one; /old-only does not.
    secrets.set("/both", [both.body.secret, rotationBoth.body.secret]);

    const before = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(before.status).toBe(201);
    await hr.receiver.waitFor((a) => emailArrivals(a, "/old-only").length === 1 && emailArrivals(a, "/both").length === 1);
    expect(emailArrivals(hr.receiver.arrivals, "/old-only")[0].verified).toBe(true);

    await waitUntil(async () => Date.now(), (now) => now > activatesAt + 50, (GRACE_S + 2) * 1000);
    const after = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    // /old-only answers 401 to the new signature (each attempt, retries included); /both verifies.
    await hr.receiver.waitFor((a) => emailArrivals(a, "/both").length === 2 && emailArrivals(a, "/old-only").length >= 2);
    const failed = await waitUntil(() => acct.api("GET", `/v1/events/${after.body.event_id}`), (r) => r.body.status !== "pending");
    expect(failed.body.destinations.find((d: any) => d.webhook_id === hook.body.id).status).toBe("failed");
    expect(failed.body.destinations.find((d: any) => d.webhook_id === both.body.id).status).toBe("delivered");
    const oldOnlyAfter = emailArrivals(hr.receiver.arrivals, "/old-only").slice(1);
    expect(oldOnlyAfter).toHaveLength(4);
    expect(oldOnlyAfter.every((a) => !a.verified && a.status === 401)).toBe(true);
    expect(emailArrivals(hr.receiver.arrivals, "/both").every((a) => a.verified)).toBe(true);
    expect((await acct.api("GET", `/v1/webhooks/${hook.body.id}`)).body.secret_activates_at).toBeNull();
  });

  test("grace_seconds is 0..604800, default one day; another account's webhook is 404", async () => {
    const acct = await stack.newAccount();
    const hook = await acct.api("POST", "/v1/webhooks", { url: "https://localhost:9/rot", events: ["message.sent"] });
    const rotated = await acct.api("POST", `/v1/webhooks/${hook.body.id}/secret/rotate`);
    expect(rotated.status).toBe(200);
    expect(Date.parse(rotated.body.activates_at) - Date.now()).toBeGreaterThan(86_400_000 - 60_000);
    expectValidation(await acct.api("POST", `/v1/webhooks/${hook.body.id}/secret/rotate`, { grace_seconds: 604_801 }), "grace_seconds");
    expectValidation(await acct.api("POST", `/v1/webhooks/${hook.body.id}/secret/rotate`, { grace_seconds: -1 }), "grace_seconds");
    const other = await stack.newAccount();
    expectError(await other.api("POST", `/v1/webhooks/${hook.body.id}/secret/rotate`, {}), 404, "not_found");
  });
});

describe("auto-disable (WEBHOOK_AUTO_DISABLE_AFTER_HOURS=0.0005, i.e. 1.8 s)", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { WEBHOOK_AUTO_DISABLE_AFTER_HOURS: "0.0005", DELIVERY_RETRY_DELAYS_MS: "1000,1000,60000" } });
  });
  afterAll(() => stack.close());

  test("after 1.8 s of failures across 20 events: disabled, reason failing, pending destinations cancelled; PATCH enables it again", async () => {
    const acct = await stack.newAccount();
    const hr = await startHookReceiver(stack, (a) => (a.event === "webhook.test" ? {} : { status: 503 }));
    const hook = await createHook(acct, hr, "/failing", ["message.sent"]);
    const post = async (n: number) =>
      (await acct.api("POST", "/v1/events/batch", { events: Array.from({ length: n }, () => ({ event_type: "message.sent", data: sampleData("message.sent") })) })).body.data.map(
        (e: any) => e.event_id as string,
      );
    // 20 events fail at once; the streak is then younger than 1.8 s: nothing happens yet.
    const first = await post(20);
    await hr.receiver.waitFor((a) => emailArrivals(a, "/failing").length >= 20);
    expect((await acct.api("GET", `/v1/webhooks/${hook.id}`)).body.status).toBe("enabled");
    // Their retries fail past 1.8 s: the next failure disables it.
    const view = await waitUntil(() => acct.api("GET", `/v1/webhooks/${hook.id}`), (r) => r.body.status === "disabled", 15_000);
    expect(view.body.disabled_reason).toBe("failing");
    // Every destination still pending was cancelled at once: their third retries never come.
    const events = await Promise.all(first.map((id: string) => acct.api("GET", `/v1/events/${id}`)));
    expect(events.every((e) => e.body.status === "failed")).toBe(true);
    expect(events.every((e) => ["cancelled", "failed"].includes(e.body.destinations[0].status))).toBe(true);
    expect(events.some((e) => e.body.destinations[0].status === "cancelled")).toBe(true);
    // A disabled webhook gets no new deliveries.
    const later = await post(1);
    expect((await acct.api("GET", `/v1/events/${later[0]}`)).body.destinations).toEqual([]);

    const enabled = await acct.api("PATCH", `/v1/webhooks/${hook.id}`, { status: "enabled" });
    expect(enabled.status).toBe(200);
    expect(enabled.body).toMatchObject({ status: "enabled", disabled_reason: null });
    const manual = await acct.api("PATCH", `/v1/webhooks/${hook.id}`, { status: "disabled" });
    expect(manual.body).toMatchObject({ status: "disabled", disabled_reason: "manual" });
  });
});
