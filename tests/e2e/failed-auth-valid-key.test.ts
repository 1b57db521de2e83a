import { randomBytes } from "node:crypto";
import { startStack, type Stack } from "../support/stack.js";
import { apiAs } from "../support/hooks.js";

/**
 * Issue 17 ("Bounded by construction"), item 13: failed authentications from an address slow
 * down the unknown keys, sign-in links and cookies from it (UNAUTHENTICATED_RATE_LIMIT_PER_MINUTE),
 * never a valid key's requests: neither a key this process has served before nor a live key it has
 * not seen yet (the process knows the prefixes of live keys), whose own per-account limit
 * (RATE_LIMIT_PER_MINUTE) still applies. A key with a live key's prefix but the wrong secret is
 * looked up once, then meets the address limit like any unknown key.
 */
const UNAUTHENTICATED = 20;
const PER_ACCOUNT = 40;
const randomKey = (prefix = `whk_${randomBytes(6).toString("hex")}`) => `${prefix}_${randomBytes(32).toString("base64url")}`;

describe("an address past the limit of failed authentications", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      env: { UNAUTHENTICATED_RATE_LIMIT_PER_MINUTE: String(UNAUTHENTICATED), RATE_LIMIT_PER_MINUTE: String(PER_ACCOUNT) },
      dispatcher: false,
    });
  });
  afterAll(() => stack?.close());

  test("still serves valid keys, known or new to the process, up to their own account's limit", async () => {
    const known = await stack.newAccount();
    expect((await known.api("GET", "/v1/webhooks")).status).toBe(200);
    // Issued after the API started, never used: the process has not authenticated it yet.
    const fresh = await stack.newAccount();

    // Unknown sign-in links, then unknown keys, from this address: refused 429 in the end.
    const linkStatuses: number[] = [];
    for (let i = 0; i < UNAUTHENTICATED * 5; i++) {
      const res = await fetch(`${stack.baseUrl}/dashboard/sign-in/${randomBytes(16).toString("hex")}`);
      await res.arrayBuffer();
      linkStatuses.push(res.status);
    }
    expect(linkStatuses.join(",")).toMatch(/429$/);
    expect((await apiAs(stack, randomKey(), "GET", "/v1/webhooks")).status).toBe(429);

    expect((await known.api("GET", "/v1/webhooks")).status).toBe(200);
    expect((await fresh.api("GET", "/v1/webhooks")).status).toBe(200);
    expect((await fresh.api("GET", "/v1/webhooks")).status).toBe(200);

    // A live key's prefix with a wrong secret: looked up once (401), then limited like any guess.
    const prefix = fresh.apiKey.split("_").slice(0, 2).join("_");
    expect((await apiAs(stack, randomKey(prefix), "GET", "/v1/webhooks")).status).toBe(401);
    expect((await apiAs(stack, randomKey(prefix), "GET", "/v1/webhooks")).status).toBe(429);
    // Valid keys are still served meanwhile.
    expect((await fresh.api("GET", "/v1/webhooks")).status).toBe(200);

    // The account's own limit still applies to its valid key.
    let last = 200;
    for (let i = 0; i < PER_ACCOUNT && last === 200; i++) last = (await fresh.api("GET", "/v1/webhooks")).status;
    const limited = await fresh.api("GET", "/v1/webhooks");
    expect(limited.status).toBe(429);
    expect(limited.body.error.message).toContain("this account");
  });
});
