import { randomBytes } from "node:crypto";
import request from "supertest";
import { startStack, type Stack } from "../support/stack.js";
import { dashboardLink, pathOf, sessionCookieOf } from "./support.js";

/**
 * The dashboard's limits: invalid sign-in links and session cookies meet the API's limiter of
 * requests without valid credentials (UNAUTHENTICATED_RATE_LIMIT_PER_MINUTE per client address)
 * before PostgreSQL, so a flood of invented tokens costs at most the limit in lookups, while a
 * valid link or session is never held up by its address (it carries its key's live prefix); and the
 * per-account limit (RATE_LIMIT_PER_MINUTE) is one allowance shared with the API. Each test
 * comes from an address of its own (TRUST_PROXY, X-Forwarded-For).
 */

const LIMIT = 5;
const randomToken = () => randomBytes(32).toString("base64url");

describe("dashboard: limits", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      env: { UNAUTHENTICATED_RATE_LIMIT_PER_MINUTE: String(LIMIT), RATE_LIMIT_PER_MINUTE: "30", TRUST_PROXY: "true" },
      dispatcher: false,
    });
  });
  afterAll(() => stack.close());

  /** One of three kinds of invalid credentials, from `address`. */
  const invalid = (address: string, kind: number) => {
    const from = { "x-forwarded-for": address };
    if (kind === 0) return request(stack.baseUrl).get(`/dashboard/sign-in/${randomToken()}`).set(from);
    if (kind === 1) return request(stack.baseUrl).post(`/dashboard/sign-in/${randomToken()}`).set(from);
    return request(stack.baseUrl)
      .get("/dashboard/events")
      .set({ ...from, cookie: `mailhooks_dashboard=${randomToken()}` });
  };

  /** Connections taken from the API's PostgreSQL pool while `work` runs (every query takes one). */
  async function poolCheckouts(work: () => Promise<void>): Promise<number> {
    let checkouts = 0;
    const count = () => checkouts++;
    stack.pool.on("acquire", count);
    try {
      await work();
    } finally {
      stack.pool.off("acquire", count);
    }
    return checkouts;
  }

  test("a flood of invented sign-in links and session cookies: refused in words, then 429 pages before any query", async () => {
    const address = "203.0.113.10";
    const first: number[] = [];
    const beforeLimit = await poolCheckouts(async () => {
      for (let i = 0; i < LIMIT; i++) first.push((await invalid(address, i % 3)).status);
    });
    expect(first).toEqual([404, 404, 401, 404, 404]);
    // A link lookup is one query, a redemption a transaction and a look at why it failed.
    expect(beforeLimit).toBeGreaterThan(0);
    expect(beforeLimit).toBeLessThanOrEqual(2 * LIMIT);

    const flood: request.Response[] = [];
    const pastLimit = await poolCheckouts(async () => {
      await Promise.all(
        Array.from({ length: 10 }, async (_, worker) => {
          for (let i = 0; i < 15; i++) flood.push(await invalid(address, (worker + i) % 3));
        }),
      );
    });
    expect(flood.map((r) => r.status)).toEqual(Array(150).fill(429));
    expect(pastLimit).toBe(0);
    const page = flood[0];
    expect(page.type).toBe("text/html");
    expect(Number(page.headers["retry-after"])).toBeGreaterThan(0);
    expect(page.text).toContain("<h1>Too many attempts</h1>");
    expect(page.text).toMatch(/Wait \d+ seconds?, then open your sign-in link again\./);
    expect(page.text).not.toContain("rate_limited");

    // Another address is not held up; nor is the API's limiter a different one: an unknown API
    // key from the flooded address is refused before its lookup too.
    expect((await invalid("203.0.113.11", 0)).status).toBe(404);
    const apiCall = await request(stack.baseUrl)
      .get("/v1/events")
      .set({ "x-forwarded-for": address, authorization: `Bearer whk_${randomBytes(6).toString("hex")}_${randomToken()}` });
    expect(apiCall.status).toBe(429);
  });

  test("valid links and sessions give their place back; a session that worked keeps working while its address is flooded", async () => {
    const address = "203.0.113.20";
    const from = { "x-forwarded-for": address };
    // More sign-ins than the limit, each a lookup that succeeds.
    let cookie = "";
    for (let i = 0; i < LIMIT + 2; i++) {
      const link = await dashboardLink(stack);
      expect((await request(stack.baseUrl).get(pathOf(link.url)).set(from)).status).toBe(200);
      const redeemed = await request(stack.baseUrl).post(pathOf(link.url)).set(from);
      expect(redeemed.status).toBe(303);
      cookie = sessionCookieOf(redeemed)!;
    }
    const page = () =>
      request(stack.baseUrl)
        .get("/dashboard/webhooks")
        .set({ ...from, cookie: `mailhooks_dashboard=${cookie}` });
    expect((await page()).status).toBe(200);
    // The allowance is whole: LIMIT invalid tokens are looked up, the next one is not.
    const statuses: number[] = [];
    for (let i = 0; i < LIMIT + 1; i++) statuses.push((await invalid(address, 0)).status);
    expect(statuses).toEqual([...Array(LIMIT).fill(404), 429]);
    expect((await page()).status).toBe(200);
  });

  test("a valid link, and the session it opens, are served however many failures came from their address; guesses still meet the limit (issue 32 item 3)", async () => {
    const address = "203.0.113.40";
    const from = { "x-forwarded-for": address };
    // Bad links, bad cookies and bad API keys, well past the limit.
    for (let i = 0; i < 3 * LIMIT; i++) await invalid(address, i % 3);
    const badKey = await request(stack.baseUrl)
      .get("/v1/events")
      .set({ ...from, authorization: `Bearer whk_${randomBytes(6).toString("hex")}_${randomToken()}` });
    expect(badKey.status).toBe(429);
    expect((await invalid(address, 0)).status).toBe(429);

    // A link made now, which this process has never seen: its page, its redemption, its session.
    const link = await dashboardLink(stack);
    expect((await request(stack.baseUrl).get(pathOf(link.url)).set(from)).status).toBe(200);
    const redeemed = await request(stack.baseUrl).post(pathOf(link.url)).set(from);
    expect(redeemed.status).toBe(303);
    const cookie = `mailhooks_dashboard=${sessionCookieOf(redeemed)}`;
    expect(
      (
        await request(stack.baseUrl)
          .get("/dashboard/webhooks")
          .set({ ...from, cookie })
      ).status,
    ).toBe(200);
    // On another API process, which has seen neither the link nor the session: the same.
    const replica = await stack.startApiReplica();
    try {
      expect(
        (
          await request(replica.baseUrl)
            .get("/dashboard/events")
            .set({ ...from, cookie })
        ).status,
      ).toBe(200);
      const another = await dashboardLink(stack);
      expect((await request(replica.baseUrl).post(pathOf(another.url)).set(from)).status).toBe(303);
    } finally {
      await replica.close();
    }

    // Guessing stays slow: a made-up token is refused before any lookup; one carrying the live
    // key's prefix is looked up once (404), then that prefix meets the limit for a minute.
    const prefix = pathOf(link.url).split("/").pop()!.slice(0, 12);
    expect((await request(stack.baseUrl).get(`/dashboard/sign-in/${randomToken()}`).set(from)).status).toBe(429);
    expect((await request(stack.baseUrl).get(`/dashboard/sign-in/${prefix}${randomToken()}`).set(from)).status).toBe(404);
    expect((await request(stack.baseUrl).get(`/dashboard/sign-in/${prefix}${randomToken()}`).set(from)).status).toBe(429);
    // A used link is a failure too.
    expect((await request(stack.baseUrl).get(pathOf(link.url)).set({ "x-forwarded-for": "203.0.113.41" })).status).toBe(410);
  });

  test("the per-account limit is one allowance for the API and the dashboard", async () => {
    const account = await stack.newAccount();
    const link = await dashboardLink(account); // 1 request of 30
    const redeemed = await request(stack.baseUrl).post(pathOf(link.url)).set({ "x-forwarded-for": "203.0.113.30" });
    const cookie = `mailhooks_dashboard=${sessionCookieOf(redeemed)}`;
    for (let i = 0; i < 28; i++) expect((await account.api("GET", "/v1/webhooks")).status).toBe(200);
    expect((await request(stack.baseUrl).get("/dashboard/webhooks").set({ "x-forwarded-for": "203.0.113.30", cookie })).status).toBe(200); // the 30th
    const limited = await request(stack.baseUrl).get("/dashboard/events").set({ "x-forwarded-for": "203.0.113.30", cookie });
    expect(limited.status).toBe(429);
    expect(limited.text).toContain("Too many requests for this account");
    expect((await account.api("GET", "/v1/webhooks")).status).toBe(429);
  });
});
