import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { launchChromium } from "../support/browser.js";
import { startStack, type Stack } from "../support/stack.js";

/**
 * GET /openapi.json and GET /docs (docs/api.md, "A typed client"): no key needed, the committed document,
 * a reference page served from this server only, whose relaxed Content-Security-Policy stays on
 * /docs. These routes are not API operations, so they are fetched directly, not through `api`.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

describe("the API's public documents", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ dispatcher: false });
  });
  afterAll(() => stack.close());

  test("GET /openapi.json serves the committed document without a key", async () => {
    const res = await fetch(`${stack.baseUrl}/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await res.json()).toEqual(JSON.parse(await readFile(path.join(root, "openapi.json"), "utf8")));
  });

  test("GET /docs is a reference page whose every asset comes from this server", async () => {
    const page = await fetch(`${stack.baseUrl}/docs`);
    expect(page.status).toBe(200);
    const html = await page.text();
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    expect(assets.length).toBeGreaterThanOrEqual(3);
    for (const asset of assets) {
      expect(asset).not.toMatch(/^(https?:)?\/\//);
      const res = await fetch(new URL(asset, `${stack.baseUrl}/docs`));
      expect([asset, res.status]).toEqual([asset, 200]);
    }
    // The policy is relaxed on /docs only: everywhere else helmet's defaults stay.
    const docsPolicy = page.headers.get("content-security-policy") ?? "";
    expect(docsPolicy).toContain("script-src 'self'");
    expect(docsPolicy).not.toContain("upgrade-insecure-requests");
    for (const other of ["/healthz", "/openapi.json", "/v1/webhooks"]) {
      expect((await fetch(`${stack.baseUrl}${other}`)).headers.get("content-security-policy")).toContain("upgrade-insecure-requests");
    }
    const slash = await fetch(`${stack.baseUrl}/docs/`, { redirect: "manual" });
    expect([slash.status, new URL(slash.headers.get("location")!, `${stack.baseUrl}/docs/`).pathname]).toEqual([301, "/docs"]);
  });

  test("the reference renders every operation in a browser, with no request elsewhere and no CSP violation", async () => {
    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      const problems: string[] = [];
      page.on("console", (m) => m.type() === "error" && problems.push(m.text()));
      page.on("pageerror", (e) => problems.push(e.message));
      page.on("request", (r) => !r.url().startsWith(stack.baseUrl) && problems.push(`request to ${r.url()}`));
      await page.goto(`${stack.baseUrl}/docs`);
      await page.waitForSelector(".opblock", { timeout: 20_000 });
      expect(await page.locator(".opblock").count()).toBeGreaterThanOrEqual(19);
      expect(problems).toEqual([]);
    } finally {
      await browser.close();
    }
  });
});
