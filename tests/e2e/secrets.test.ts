import { randomBytes } from "node:crypto";
import { createKeyring } from "@mailhooks/secrets";
import { captureLogs } from "@mailhooks/logger";
import { sampleData, startStack, waitUntil, type Stack } from "../support/stack.js";
import { createHook, emailArrivals, expectError, expectValidation, startHookReceiver } from "../support/hooks.js";
import pg from "pg";
import { scratchDatabase } from "../chaos/support/database.js";
import { startDispatcherOn } from "../support/delivery-worker.js";
import { runCli } from "../support/cli.js";

/**
 * Issue "Secrets, rotation, auto-disable", items 1-3: webhook secrets are encrypted at rest
 * (AES-256-GCM, SECRET_ENCRYPTION_KEYS), can be rotated with a grace period during which the
 * previous secret still signs, and a webhook failing for WEBHOOK_AUTO_DISABLE_AFTER_HOURS across
 * 20 events is disabled (`disabled_reason: "failing"`), until PATCH turns it back on.
 */
const KEY_1 = randomBytes(32);

describe("webhook secrets at rest", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { SECRET_ENCRYPTION_KEYS: KEY_1.toString("base64") } });
  });
  afterAll(() => stack.close());

  /**
   * Which of `needles` the database holds anywhere: every row of every table of every schema, as
   * JSON text (a dump, in effect), searched by PostgreSQL. Answers `schema.table: needle` lines.
   */
  const foundInDatabase = async (needles: string[]): Promise<string[]> => {
    const { rows: tables } = await stack.pool.query(
      "SELECT format('%I.%I', table_schema, table_name) AS name FROM information_schema.tables WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1",
    );
    expect(tables.map((t) => t.name)).toEqual(
      expect.arrayContaining(["public.webhooks", "public.audit_entries", "public.work_items", "public.dashboard_sessions"]),
    );
    const found: string[] = [];
    for (const { name } of tables) {
      const { rows } = await stack.pool.query(
        `SELECT DISTINCT n FROM (SELECT row_to_json(t)::text AS r FROM ${name} t) x CROSS JOIN unnest($1::text[]) n WHERE strpos(x.r, n) > 0`,
        [needles],
      );
      found.push(...rows.map((r) => `${name}: ${r.n}`));
    }
    return found;
  };

  test("no table of the database holds a secret, before and after a rotation; the API and the receiver still have it", async () => {
    const acct = await stack.newAccount();
    const hr = await startHookReceiver(stack);
    const hook = await createHook(acct, hr, "/enc", ["message.sent"]);
    await hr.receiver.waitFor((a) => a.some((x) => x.path === "/enc" && x.verified));
    const rotated = await acct.api("POST", `/v1/webhooks/${hook.id}/secret/rotate`, { grace_seconds: 0 });
    expect(rotated.status).toBe(200);
    // The search works: the webhook's id is found in its row.
    expect(await foundInDatabase([hook.id])).toContain(`public.webhooks: ${hook.id}`);
    for (const secret of [hook.secret, rotated.body.secret]) expect(secret).toMatch(/^whsec_/);
    // The current secret and the previous one (which still decrypts from previous_secret, below).
    const secrets = [hook.secret, rotated.body.secret];
    expect(await foundInDatabase([...secrets, ...secrets.map((s) => s.slice("whsec_".length))])).toEqual([]);
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
        pool.query(
          "INSERT INTO webhooks (id, account_id, url, events, secret) VALUES ($1, 'acct_x', 'https://example.com/h', '{message.sent}', $2)",
          [id, secret],
        );
      await insert("wh_encrypted", old.encrypt("whsec_encrypted_secret"));
      await insert("wh_legacy", "whsec_legacy_plaintext_secret");
      await insert("wh_foreign", createKeyring([randomBytes(32)]).encrypt("whsec_unreadable"));
      const key2 = randomBytes(32);
      const run = await runCli("keys", ["reencrypt-secrets", "--json"], {
        DATABASE_URL: db.url,
        SECRET_ENCRYPTION_KEYS: `${key2.toString("base64")},${KEY_1.toString("base64")}`,
      });
      const ring = createKeyring([key2, KEY_1]);
      expect(JSON.parse(run.stdout)).toEqual({ reencrypted: 2, unreadable: 1, key_id: ring.primaryKeyId });
      expect(run.code).toBe(1);
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
    const asked = Date.now();
    const rotation = await acct.api("POST", `/v1/webhooks/${hook.body.id}/secret/rotate`, { grace_seconds: GRACE_S });
    const rotationBoth = await acct.api("POST", `/v1/webhooks/${both.body.id}/secret/rotate`, { grace_seconds: GRACE_S });
    expect(rotation.status).toBe(200);
    expect(Object.keys(rotation.body).sort()).toEqual(["activates_at", "secret"]);
    expect(rotation.body.secret).not.toBe(hook.body.secret);
    const activatesAt = Date.parse(rotation.body.activates_at);
    expect(activatesAt).toBeGreaterThanOrEqual(asked + GRACE_S * 1000 - 1);
    expect((await acct.api("GET", `/v1/webhooks/${hook.body.id}`)).body.secret_activates_at).toBe(rotation.body.activates_at);
    // The receiver of /both installs the new secret beside the old one; /old-only does not.
    secrets.set("/both", [both.body.secret, rotationBoth.body.secret]);

    const before = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    expect(before.status).toBe(201);
    await hr.receiver.waitFor((a) => emailArrivals(a, "/old-only").length === 1 && emailArrivals(a, "/both").length === 1);
    expect(emailArrivals(hr.receiver.arrivals, "/old-only")[0].verified).toBe(true);

    await waitUntil(
      async () => Date.now(),
      (now) => now > activatesAt + 50,
      (GRACE_S + 2) * 1000,
    );
    const after = await acct.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    // /old-only answers 401 to the new signature (each attempt, retries included); /both verifies.
    await hr.receiver.waitFor((a) => emailArrivals(a, "/both").length === 2 && emailArrivals(a, "/old-only").length >= 2);
    const failed = await waitUntil(
      () => acct.api("GET", `/v1/events/${after.body.event_id}`),
      (r) => r.body.status !== "pending",
    );
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
    const asked = Date.now();
    const rotated = await acct.api("POST", `/v1/webhooks/${hook.body.id}/secret/rotate`);
    expect(rotated.status).toBe(200);
    expect(Date.parse(rotated.body.activates_at)).toBeGreaterThanOrEqual(asked + 86_400_000 - 1);
    expectValidation(await acct.api("POST", `/v1/webhooks/${hook.body.id}/secret/rotate`, { grace_seconds: 604_801 }), "grace_seconds");
    expectValidation(await acct.api("POST", `/v1/webhooks/${hook.body.id}/secret/rotate`, { grace_seconds: -1 }), "grace_seconds");
    const other = await stack.newAccount();
    expectError(await other.api("POST", `/v1/webhooks/${hook.body.id}/secret/rotate`, {}), 404, "not_found");
  });
});

describe("auto-disable (WEBHOOK_AUTO_DISABLE_AFTER_HOURS=0.0005, i.e. 1.8 s)", () => {
  const env = { WEBHOOK_AUTO_DISABLE_AFTER_HOURS: "0.0005", DELIVERY_RETRY_DELAYS_MS: "1000,1000,60000" };
  let stack: Stack;
  let dispatcher: ReturnType<typeof startDispatcherOn>;
  beforeAll(async () => {
    stack = await startStack({ env, dispatcher: false });
    dispatcher = startDispatcherOn(stack, env);
  });
  afterAll(async () => {
    await dispatcher?.close();
    await stack?.close();
  });

  /** webhook_auto_disabled_total, as Prometheus would scrape it from the dispatcher. */
  const autoDisabledMetric = async () =>
    Number(/^webhook_auto_disabled_total (\d+)$/m.exec(await dispatcher.metrics.registry.metrics())?.[1] ?? NaN);

  test("after 1.8 s of failures across 20 events: disabled, reason failing, logged and counted, pending destinations cancelled; PATCH enables it again", async () => {
    expect(await autoDisabledMetric()).toBe(0);
    let failing!: Awaited<ReturnType<typeof disableByFailures>>;
    const logged = await captureLogs(
      async () => {
        failing = await disableByFailures();
        // The log line and the counter come right after the status changes.
        await waitUntil(autoDisabledMetric, (n) => n === 1, 5_000);
      },
      { level: process.env.LOG_LEVEL ?? "warn", format: "pretty" },
    );
    const { acct, hook, first, post, view } = failing;
    expect(view.body.disabled_reason).toBe("failing");
    const lines = logged
      .split("\n")
      .filter((l) => l.includes("webhook disabled: every attempt failed"))
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: "warn", module: "dispatcher", webhookId: hook.id });
    expect(lines[0].failedEvents).toBeGreaterThanOrEqual(20);
    expect(Date.parse(lines[0].failingSince)).toBeLessThan(Date.now() - 1_800);
    expect(await autoDisabledMetric()).toBe(1);

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
    // A manual disable is not counted.
    expect(await autoDisabledMetric()).toBe(1);
  });

  /** A webhook whose receiver fails every email event, fed 20 events until it is auto-disabled: its account, id, first events and view. */
  async function disableByFailures() {
    const acct = await stack.newAccount();
    const hr = await startHookReceiver(stack, (a) => (a.event === "webhook.test" ? {} : { status: 503 }));
    const hook = await createHook(acct, hr, "/failing", ["message.sent"]);
    const post = async (n: number) =>
      (
        await acct.api("POST", "/v1/events/batch", {
          events: Array.from({ length: n }, () => ({ event_type: "message.sent", data: sampleData("message.sent") })),
        })
      ).body.data.map((e: any) => e.event_id as string);
    // 20 events fail at once; the streak is then younger than 1.8 s: nothing happens yet.
    const first = await post(20);
    await hr.receiver.waitFor((a) => emailArrivals(a, "/failing").length >= 20);
    expect((await acct.api("GET", `/v1/webhooks/${hook.id}`)).body.status).toBe("enabled");
    expect(await autoDisabledMetric()).toBe(0);
    // Their retries fail past 1.8 s: the next failure disables it.
    const view = await waitUntil(
      () => acct.api("GET", `/v1/webhooks/${hook.id}`),
      (r) => r.body.status === "disabled",
      15_000,
    );
    return { acct, hook, first, post, view };
  }
});
