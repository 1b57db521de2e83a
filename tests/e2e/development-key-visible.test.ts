import { randomBytes } from "node:crypto";
import { startStack, type Stack } from "../support/stack.js";
import { apiAs } from "../support/hooks.js";

/**
 * Issue 17 ("Bounded by construction"), item 11: without SECRET_ENCRYPTION_KEYS (outside
 * production) webhook secrets are encrypted with the public development key. That shows in
 * /readyz's body and as a banner on every dashboard page, not only in a log line at start-up.
 */
const signInPage = async (stack: Stack) => (await fetch(`${stack.baseUrl}/dashboard/sign-in/${randomBytes(16).toString("hex")}`)).text();

describe("the public development key in use", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ dispatcher: false });
  });
  afterAll(() => stack?.close());

  test("/readyz names it in its body, and the dashboard shows a banner", async () => {
    const ready = await apiAs(stack, null, "GET", "/readyz");
    expect(ready.status).toBe(200);
    expect(ready.body.warnings).toEqual([{ code: "insecure_development_key", message: expect.stringContaining("SECRET_ENCRYPTION_KEYS") }]);
    const html = await signInPage(stack);
    expect(html).toContain('id="insecure-development-key"');
    expect(html).toMatch(/public development key/);
  });
});

describe("keys of the operator's own", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ env: { SECRET_ENCRYPTION_KEYS: randomBytes(32).toString("base64") }, dispatcher: false });
  });
  afterAll(() => stack?.close());

  test("no warning in /readyz, no banner", async () => {
    const ready = await apiAs(stack, null, "GET", "/readyz");
    expect(ready.status).toBe(200);
    expect(ready.body.warnings).toBeUndefined();
    expect(await signInPage(stack)).not.toContain("insecure-development-key");
  });
});
