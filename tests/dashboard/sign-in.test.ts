import { randomUUID } from "node:crypto";
import request from "supertest";
import { createApiKey, revokeApiKey } from "@mailhooks/access";
import { startStack, type Stack } from "../support/stack.js";
import { testDatabaseUrl } from "../support/env.js";
import { csrfOf, dashboardLink, expectNoInlineCode, pathOf, sessionCookieOf, sessionFor, sha256, signIn, signInWith } from "./support.js";
import { runCli } from "../support/cli.js";

/**
 * docs/dashboard.md, sign-in and sessions, at the HTML level: one-time links (API and
 * CLI), expiry and reuse, the session cookie's attributes, storage as hashes, sign-out, idle
 * expiry, revocation, CSRF refusals and the dashboard's Content-Security-Policy.
 */
describe("dashboard sign-in and sessions", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ dispatcher: false });
  });
  afterAll(() => stack.close());

  test("POST /v1/dashboard-links answers an absolute one-time URL valid for 15 minutes; only the POST of its page redeems it", async () => {
    const before = Date.now();
    const link = await dashboardLink(stack);
    const after = Date.now();
    expect(link.url).toMatch(new RegExp(`^${stack.baseUrl}/dashboard/sign-in/[0-9a-f]{12}[A-Za-z0-9_-]{43}$`));
    // Valid 15 minutes from its making, which happened between the request and its answer (to the ms).
    expect(Date.parse(link.expires_at)).toBeGreaterThanOrEqual(before + 15 * 60_000 - 1);
    expect(Date.parse(link.expires_at)).toBeLessThanOrEqual(after + 15 * 60_000 + 1);

    // Opening the link (a person, or a mail scanner fetching it) does not use it up.
    for (let i = 0; i < 2; i++) {
      const page = await request(stack.baseUrl).get(pathOf(link.url));
      expect(page.status).toBe(200);
      expect(page.text).toMatch(/<button type="submit">Sign in<\/button>/);
      expect(sessionCookieOf(page)).toBeNull();
    }
    const redeemed = await request(stack.baseUrl).post(pathOf(link.url));
    expect(redeemed.status).toBe(303);
    expect(redeemed.headers.location).toBe("/dashboard/webhooks");
    const setCookie = ([] as string[]).concat(redeemed.headers["set-cookie"]).find((c) => c.startsWith("mailhooks_dashboard="))!;
    expect(setCookie).toMatch(/; HttpOnly/);
    expect(setCookie).toMatch(/; SameSite=Strict/);
    expect(setCookie).toMatch(/; Path=\/dashboard/);
    expect(setCookie).not.toMatch(/; Secure/); // plain http here; see the https test below

    const token = sessionCookieOf(redeemed)!;
    const rows = await stack.prisma.dashboardSession.findMany({ where: { tokenHash: sha256(token) } });
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ apiKeyId: stack.apiKeyId, accountId: stack.accountId, endedAt: null });
    // Stored as hashes only: neither the session token nor the link's token is in clear.
    const linkToken = pathOf(link.url).split("/").pop()!;
    const { rows: clear } = await stack.pool.query(
      "SELECT 1 FROM dashboard_sessions WHERE token_hash = $1 OR id = $1 UNION ALL SELECT 1 FROM dashboard_links WHERE token_hash = $2",
      [token, linkToken],
    );
    expect(clear).toHaveLength(0);

    const session = await sessionFor(stack, token);
    const home = await session.get("/dashboard/webhooks");
    for (const label of ["Webhooks", "Events", "Deliveries", "Audit log"]) expect(home.text).toContain(`>${label}</a>`);
    expectNoInlineCode(home.text);
  });

  test("a link works once: reused, it answers 410 in words; an unknown token answers 404", async () => {
    const link = await dashboardLink(stack);
    await signInWith(stack, link.url);
    for (const method of ["get", "post"] as const) {
      const again = await request(stack.baseUrl)[method](pathOf(link.url));
      expect(again.status).toBe(410);
      expect(again.text).toContain("already been used");
      expect(sessionCookieOf(again)).toBeNull();
    }
    const unknown = await request(stack.baseUrl).post("/dashboard/sign-in/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
    expect(unknown.status).toBe(404);
    expect(unknown.text).toContain("not valid");
    const malformed = await request(stack.baseUrl).get("/dashboard/sign-in/%22%3E%3Cscript%3Ealert(1)%3C%2Fscript%3E");
    expect(malformed.status).toBe(404);
    expect(malformed.text).not.toContain("<script>alert(1)");
  });

  test("two redemptions of one link at once: one session", async () => {
    const link = await dashboardLink(stack);
    const answers = await Promise.all([0, 1, 2, 3].map(() => request(stack.baseUrl).post(pathOf(link.url))));
    expect(answers.map((a) => a.status).sort()).toEqual([303, 410, 410, 410]);
  });

  test("an expired link (past 15 minutes) answers 410 and opens nothing", async () => {
    const link = await dashboardLink(stack);
    const tokenHash = sha256(pathOf(link.url).split("/").pop()!);
    await stack.pool.query("UPDATE dashboard_links SET expires_at = now() - interval '1 second' WHERE token_hash = $1", [tokenHash]);
    const page = await request(stack.baseUrl).get(pathOf(link.url));
    expect(page.status).toBe(410);
    expect(page.text).toContain("expired");
    const post = await request(stack.baseUrl).post(pathOf(link.url));
    expect(post.status).toBe(410);
    expect(sessionCookieOf(post)).toBeNull();
  });

  test("`keys dashboard-link --account` prints exactly one line, an absolute URL on PUBLIC_URL, that signs in as the account's dashboard key", async () => {
    const name = `cli-account-${randomUUID()}`;
    const issued = await createApiKey(stack.prisma, name);
    const run = () => runCli("keys", ["dashboard-link", "--account", name], { DATABASE_URL: testDatabaseUrl(), PUBLIC_URL: stack.baseUrl });
    const first = await run();
    expect(first.stderr).toBe("");
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(new RegExp(`^${stack.baseUrl}/dashboard/sign-in/[0-9a-f]{12}[A-Za-z0-9_-]{43}\\n$`));
    const session = await signInWith(stack, first.stdout.trim());
    const row = await stack.prisma.dashboardSession.findUniqueOrThrow({ where: { tokenHash: sha256(session.cookie) } });
    const key = await stack.prisma.apiKey.findUniqueOrThrow({ where: { id: row.apiKeyId } });
    expect(key).toMatchObject({ accountId: issued.account_id, name: "dashboard", revokedAt: null });
    // The next link reuses that key.
    const second = await run();
    const again = await signInWith(stack, second.stdout.trim());
    expect((await stack.prisma.dashboardSession.findUniqueOrThrow({ where: { tokenHash: sha256(again.cookie) } })).apiKeyId).toBe(key.id);

    const unknown = await runCli("keys", ["dashboard-link", "--account", `nobody-${randomUUID()}`], { DATABASE_URL: testDatabaseUrl() });
    expect(unknown.code).toBe(1);
    expect(unknown.stdout).toBe("");
    expect(unknown.stderr).toMatch(/no account named/);
  });

  test("sign-out ends the session on the server: the old cookie is refused afterwards", async () => {
    const session = await signIn(stack);
    const out = await session.post("/dashboard/sign-out");
    expect(out.status).toBe(200);
    expect(out.text).toContain("Signed out");
    expect(([] as string[]).concat(out.headers["set-cookie"])).toEqual([expect.stringMatching(/^mailhooks_dashboard=; Max-Age=0;/)]);
    const after = await session.get("/dashboard/webhooks");
    expect(after.status).toBe(401);
    expect(after.text).toContain("Your session has ended");
    expect(
      (await stack.prisma.dashboardSession.findUniqueOrThrow({ where: { tokenHash: sha256(session.cookie) } })).endedAt,
    ).not.toBeNull();
  });

  test("a session idle for 12 hours has ended; one used within them lives on", async () => {
    const idle = await signIn(stack);
    const used = await signIn(stack);
    await stack.pool.query("UPDATE dashboard_sessions SET last_seen_at = now() - interval '12 hours 1 second' WHERE token_hash = $1", [
      sha256(idle.cookie),
    ]);
    await stack.pool.query("UPDATE dashboard_sessions SET last_seen_at = now() - interval '11 hours 59 minutes' WHERE token_hash = $1", [
      sha256(used.cookie),
    ]);
    expect((await idle.get("/dashboard/events")).status).toBe(401);
    const usedAt = Date.now();
    expect((await used.get("/dashboard/events")).status).toBe(200);
    // Using it restarted its clock, and the cookie's lifetime with it.
    const row = await stack.prisma.dashboardSession.findUniqueOrThrow({ where: { tokenHash: sha256(used.cookie) } });
    expect(row.lastSeenAt.getTime()).toBeGreaterThanOrEqual(usedAt - 1);
    expect(([] as string[]).concat((await used.get("/dashboard/events")).headers["set-cookie"])).toEqual([
      expect.stringMatching(/^mailhooks_dashboard=[^;]+; Max-Age=43200; Path=\/dashboard; HttpOnly; SameSite=Strict$/),
    ]);
  });

  test("revoking the key that made the link ends its sessions and its unused links", async () => {
    const account = await stack.newAccount();
    const session = await signIn(stack, account);
    const unused = await dashboardLink(account);
    expect((await session.get("/dashboard/webhooks")).status).toBe(200);
    await revokeApiKey(stack.prisma, account.apiKeyId);
    const after = await session.get("/dashboard/webhooks");
    expect(after.status).toBe(401);
    const link = await request(stack.baseUrl).post(pathOf(unused.url));
    expect(link.status).toBe(410);
    expect(link.text).toContain("revoked");
  });

  test("CSRF: a state change without this session's token, or sent from another site, is refused and changes nothing", async () => {
    const account = await stack.newAccount();
    const session = await signIn(stack, account);
    const other = await signIn(stack, account);
    const form = { url: "https://example.com/hook", events: "message.sent" };
    const attempts = [
      await session.post("/dashboard/webhooks", { ...form, _csrf: null }),
      await session.post("/dashboard/webhooks", { ...form, _csrf: "x".repeat(43) }),
      await session.post("/dashboard/webhooks", { ...form, _csrf: other.csrf }),
      await session.post("/dashboard/webhooks", form, { origin: "https://evil.example" }),
      await session.post("/dashboard/webhooks", form, { "sec-fetch-site": "cross-site" }),
      await session.post("/dashboard/sign-out", { _csrf: null }),
    ];
    for (const res of attempts) {
      expect(res.status).toBe(403);
      expect(res.text).toMatch(/This form has expired|came from another site/);
    }
    expect((await account.api("GET", "/v1/webhooks")).body.data).toEqual([]);
    expect((await session.get("/dashboard/webhooks")).status).toBe(200);
    // The token rides in a header too (htmx, the bulk-replay script).
    const viaHeader = await session.post("/dashboard/webhooks", { ...form, _csrf: null }, { "x-csrf-token": session.csrf });
    expect(viaHeader.status).toBe(201);
    // Sign-in from another site is refused before the link is used.
    const link = await dashboardLink(account);
    const crossSite = await request(stack.baseUrl).post(pathOf(link.url)).set("origin", "https://evil.example");
    expect(crossSite.status).toBe(403);
    expect((await request(stack.baseUrl).get(pathOf(link.url))).status).toBe(200);
  });

  test("the dashboard's Content-Security-Policy is strict; the API keeps its own", async () => {
    const session = await signIn(stack);
    const page = await session.get("/dashboard/events");
    const csp = page.headers["content-security-policy"];
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("style-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|https:|\*/);
    expect(page.headers["cache-control"]).toBe("no-store");
    const signedOut = await request(stack.baseUrl).get("/dashboard");
    expect(signedOut.status).toBe(401);
    expect(signedOut.headers["content-security-policy"]).toBe(csp);
    expect(signedOut.text).toContain("dashboard-link --account");
    const api = await request(stack.baseUrl).get("/healthz");
    expect(api.headers["content-security-policy"]).not.toBe(csp);
    // htmx and the dashboard's files come from this origin, without a session.
    const htmx = await request(stack.baseUrl).get("/dashboard/assets/htmx.min.js");
    expect(htmx.status).toBe(200);
    expect(htmx.headers["content-type"]).toMatch(/javascript/);
    expect((await request(stack.baseUrl).get("/dashboard/assets/dashboard.css")).status).toBe(200);
    expect((await request(stack.baseUrl).get("/dashboard/assets/../render.ts")).status).toBe(404);
  });

  test("behind an https proxy (TRUST_PROXY) the cookie is Secure and links are https; a forged header alone changes nothing", async () => {
    const forged = await request(stack.baseUrl)
      .post(pathOf((await dashboardLink(stack)).url))
      .set("x-forwarded-proto", "https");
    expect(([] as string[]).concat(forged.headers["set-cookie"]).join("\n")).not.toMatch(/Secure/);
    const proxied = await startStack({ dispatcher: false, env: { TRUST_PROXY: "1" } });
    try {
      const made = await request(proxied.baseUrl)
        .post("/v1/dashboard-links")
        .set({ authorization: `Bearer ${proxied.apiKey}`, "x-forwarded-proto": "https", host: "hooks.example.com" });
      expect(made.status).toBe(201);
      expect(made.body.url).toMatch(/^https:\/\/hooks\.example\.com\/dashboard\/sign-in\//);
      const redeemed = await request(proxied.baseUrl).post(pathOf(made.body.url)).set("x-forwarded-proto", "https");
      expect(redeemed.status).toBe(303);
      expect(([] as string[]).concat(redeemed.headers["set-cookie"]).join("\n")).toMatch(/mailhooks_dashboard=[^;]+;.*; Secure/);
    } finally {
      await proxied.close();
    }
  });

  test("POST /v1/dashboard-links refuses unknown fields and missing keys", async () => {
    const link = await dashboardLink(stack);
    const redeemed = await request(stack.baseUrl).post(pathOf(link.url));
    const odd = await stack.api("POST", "/v1/dashboard-links", { account: "other" });
    expect([odd.status, odd.body.error.code]).toEqual([422, "validation_error"]);
    const anonymous = await request(stack.baseUrl).post("/v1/dashboard-links");
    expect(anonymous.status).toBe(401);
    expect(csrfOf(redeemed.text)).toBe("");
  });
});
