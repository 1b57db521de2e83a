import { randomBytes } from "node:crypto";
import pg from "pg";
import { createApiKey } from "@mailhooks/access";
import { startStack, waitUntil, type Stack } from "../support/stack.js";
import { apiAs, expectError } from "../support/hooks.js";
import { scratchDatabase, type ScratchDatabase } from "../chaos/support/database.js";

/**
 * Issue "Secrets, rotation, auto-disable...", item 5: rate limits before authentication. Requests
 * without a valid key are limited per client address (UNAUTHENTICATED_RATE_LIMIT_PER_MINUTE,
 * default 60) before any key is looked up, unknown keys are remembered for a minute, and known
 * keys are served from memory: a flood of invented keys costs (almost) no PostgreSQL query.
 * Counted twice: by the API's own `api_key_lookups_total`, and by PostgreSQL itself (index scans
 * of api_keys' prefix index, on a database of this file's own).
 */
/**
 * Default limit: 60 failures per rolling minute per address.
 */
const randomKey = () => `whk_${randomBytes(6).toString("hex")}_${randomBytes(32).toString("base64url")}`;

async function lookupsMetric(stack: Stack): Promise<number> {
  const text = await (await fetch(`${stack.baseUrl}/metrics`)).text();
  return Number(/^api_key_lookups_total (\d+)/m.exec(text)?.[1] ?? NaN);
}

describe("10,000 requests with random keys (default limit: 60 per address per minute)", () => {
  let db: ScratchDatabase;
  let stack: Stack;
  let admin: pg.Pool;
  beforeAll(async () => {
    db = await scratchDatabase("auth");
    stack = await startStack({ env: { DATABASE_URL: db.url }, dispatcher: false });
    admin = new pg.Pool({ connectionString: db.url, max: 1 });
  });
  afterAll(async () => {
    await admin?.end();
    await stack?.close();
    await db?.drop();
  });

  /** Index scans of the prefix index, as PostgreSQL counts them (its statistics lag by up to a second). */
  const prefixScans = async () =>
    Number(
      (await admin
        .query("SELECT pg_stat_clear_snapshot(); SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'api_keys_prefix_key'")
        .then((r: any) => r[1].rows[0].idx_scan)) ?? 0,
    );

  test("are answered 401 then 429 with Retry-After; fewer than 100 key lookups reach PostgreSQL; a known key still works", async () => {
    // A key used before the flood is in the cache: its requests meet no limiter.
    expect((await stack.api("GET", "/v1/webhooks")).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1_500)); // statistics flush (bounded)
    const scansBefore = await prefixScans();
    const metricBefore = await lookupsMetric(stack);

    const counts: Record<number, number> = {};
    let retryAfter = 0;
    let next = 0;
    await Promise.all(
      Array.from({ length: 50 }, async () => {
        while (next < 10_000) {
          next++;
          const res = await fetch(`${stack.baseUrl}/v1/webhooks`, { headers: { authorization: `Bearer ${randomKey()}` } });
          counts[res.status] = (counts[res.status] ?? 0) + 1;
          if (res.status === 429) retryAfter = Number(res.headers.get("retry-after"));
          await res.arrayBuffer();
        }
      }),
    );
    expect(Object.keys(counts).sort()).toEqual(["401", "429"]);
    expect(counts[401] + counts[429]).toBe(10_000);
    // The limit of a rolling minute (a place is reserved before each lookup, so 50 clients at
    // once do not overshoot it), plus what the window lets back in while the flood lasts.
    expect(counts[401]).toBeLessThan(100);
    expect(retryAfter).toBeGreaterThan(0);
    const lookups = (await lookupsMetric(stack)) - metricBefore;
    expect(lookups).toBeLessThan(100);
    const scans = await waitUntil(
      async () => (await prefixScans()) - scansBefore,
      (n) => n >= lookups,
      5_000,
      250,
    );
    expect(scans).toBeLessThan(100);
    console.log(
      `10,000 random keys: ${counts[401]} x 401, ${counts[429]} x 429; key lookups: ${lookups} (API metric), ${scans} index scans (PostgreSQL)`,
    );

    // The cached key is not held up by its address's limit; the error shape is the contract's.
    expect((await stack.api("GET", "/v1/webhooks")).status).toBe(200);
    const limited = await apiAs(stack, randomKey(), "GET", "/v1/webhooks");
    expectError(limited, 429, "rate_limited");
  }, 180_000);
});

describe("unknown keys are remembered; X-Forwarded-For counts only as TRUST_PROXY says", () => {
  test("api_keys.last_used_at is written on use, at most once a minute per key", async () => {
    const stack = await startStack({ dispatcher: false });
    try {
      const lastUsed = async () => (await stack.prisma.apiKey.findUniqueOrThrow({ where: { id: stack.apiKeyId } })).lastUsedAt;
      expect(await lastUsed()).toBeNull();
      expect((await stack.api("GET", "/v1/events")).status).toBe(200);
      const first = await waitUntil(lastUsed, (at) => at !== null, 2_000, 10);
      for (let i = 0; i < 5; i++) expect((await stack.api("GET", "/v1/events")).status).toBe(200);
      await new Promise((r) => setTimeout(r, 200)); // bounded: a write would land within this
      expect((await lastUsed())?.getTime()).toBe(first!.getTime());
    } finally {
      await stack.close();
    }
  });

  test("one unknown key repeated 200 times (no address limit): one lookup", async () => {
    const stack = await startStack({ env: { UNAUTHENTICATED_RATE_LIMIT_PER_MINUTE: "0" }, dispatcher: false });
    try {
      const key = randomKey();
      const before = await lookupsMetric(stack);
      for (let i = 0; i < 200; i++) expectError(await apiAs(stack, key, "GET", "/v1/events"), 401, "unauthorized");
      expect((await lookupsMetric(stack)) - before).toBe(1);
      // A new key is found at once: the negative cache never hides a key that exists.
      const issued = await createApiKey(stack.prisma, `auth-${randomBytes(4).toString("hex")}`);
      await waitUntil(
        () => apiAs(stack, issued.key, "GET", "/v1/events"),
        (r) => r.status === 200,
        2_000,
        5,
      );
    } finally {
      await stack.close();
    }
  });

  test("TRUST_PROXY=false (default): a forged X-Forwarded-For does not escape the limit", async () => {
    const stack = await startStack({ env: { UNAUTHENTICATED_RATE_LIMIT_PER_MINUTE: "5" }, dispatcher: false });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 8; i++)
        statuses.push((await apiAs(stack, randomKey(), "GET", "/v1/events", undefined, { "x-forwarded-for": `203.0.113.${i}` })).status);
      expect(statuses).toEqual([401, 401, 401, 401, 401, 429, 429, 429]);
    } finally {
      await stack.close();
    }
  });

  /** An unauthenticated request from a random key, forwarded for `xff`: its status. */
  const forwarded = async (stack: Stack, xff: string) =>
    (await apiAs(stack, randomKey(), "GET", "/v1/events", undefined, { "x-forwarded-for": xff })).status;

  test("TRUST_PROXY=true means one proxy: each client address it forwards has its own allowance; the left-most, spoofed entry is not believed", async () => {
    const stack = await startStack({ env: { UNAUTHENTICATED_RATE_LIMIT_PER_MINUTE: "5", TRUST_PROXY: "true" }, dispatcher: false });
    try {
      for (let i = 0; i < 5; i++) expect(await forwarded(stack, "198.51.100.7")).toBe(401);
      expect(await forwarded(stack, "198.51.100.7")).toBe(429);
      expect(await forwarded(stack, "198.51.100.8")).toBe(401);
      // The client writes what it likes to the left of the entry our one proxy appends (its
      // real address): a new invented address each time escapes nothing.
      const statuses: number[] = [];
      for (let i = 0; i < 7; i++) statuses.push(await forwarded(stack, `203.0.113.${i}, 198.51.100.9`));
      expect(statuses).toEqual([401, 401, 401, 401, 401, 429, 429]);
      // The invented addresses never got an allowance of their own.
      expect(await forwarded(stack, "203.0.113.0")).toBe(401);
    } finally {
      await stack.close();
    }
  });

  test("TRUST_PROXY=2 (two proxies) and TRUST_PROXY as a list of proxy addresses: the entry before them is the client", async () => {
    for (const TRUST_PROXY of ["2", "127.0.0.1/8, 10.0.0.0/8"]) {
      const stack = await startStack({ env: { UNAUTHENTICATED_RATE_LIMIT_PER_MINUTE: "3", TRUST_PROXY }, dispatcher: false });
      try {
        const statuses: number[] = [];
        for (let i = 0; i < 5; i++) statuses.push(await forwarded(stack, `203.0.113.${i}, 198.51.100.9, 10.1.2.3`));
        expect(statuses).toEqual([401, 401, 401, 429, 429]);
        expect(await forwarded(stack, "203.0.113.0, 198.51.100.10, 10.1.2.3")).toBe(401);
      } finally {
        await stack.close();
      }
    }
  });

  test("IPv6 clients are limited per /64; an IPv4-mapped IPv6 address counts as its IPv4 address", async () => {
    const stack = await startStack({ env: { UNAUTHENTICATED_RATE_LIMIT_PER_MINUTE: "5", TRUST_PROXY: "true" }, dispatcher: false });
    try {
      const statuses: number[] = [];
      // One host with a /64 has 2^64 addresses: each new one gets no new allowance.
      for (let i = 0; i < 7; i++)
        statuses.push(await forwarded(stack, `2001:db8:1:2:${(i * 4099).toString(16)}:${randomBytes(2).toString("hex")}::${i + 1}`));
      expect(statuses).toEqual([401, 401, 401, 401, 401, 429, 429]);
      expect(await forwarded(stack, "2001:db8:1:3::1")).toBe(401); // another /64
      const mapped: number[] = [];
      for (let i = 0; i < 3; i++) mapped.push(await forwarded(stack, "::ffff:198.51.100.20"));
      for (let i = 0; i < 3; i++) mapped.push(await forwarded(stack, "198.51.100.20"));
      expect(mapped).toEqual([401, 401, 401, 401, 401, 429]);
    } finally {
      await stack.close();
    }
  });

  test("the admin listener never believes X-Forwarded-For, even with TRUST_PROXY set: forged addresses still meet the failed sign-in limit", async () => {
    const stack = await startStack({
      env: { TRUST_PROXY: "true", ADMIN_USERNAME: "operator", ADMIN_PASSWORD: `board-${randomBytes(8).toString("hex")}` },
      dispatcher: false,
    });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 12; i++) {
        const res = await fetch(`${stack.adminUrl}/admin/queues`, {
          headers: { authorization: `Basic ${Buffer.from(`operator:wrong-${i}`).toString("base64")}`, "x-forwarded-for": `203.0.113.${i}` },
        });
        await res.arrayBuffer();
        statuses.push(res.status);
      }
      expect(statuses).toEqual([...Array(10).fill(401), 429, 429]);
    } finally {
      await stack.close();
    }
  });
});
