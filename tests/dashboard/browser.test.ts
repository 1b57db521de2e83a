import { copyFile, mkdir } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Browser, Page } from "playwright-core";
import { createApiKey } from "@mailhooks/access";
import type { Receiver } from "@mailhooks/receiver";
import { callApi } from "../support/api-call.js";
import { sampleData, startStack, waitUntil, type Account, type Stack } from "../support/stack.js";
import { launchChromium } from "../support/browser.js";
import { dashboardLink } from "./support.js";

/**
 * The dashboard in a real browser (the machine's Chromium: tests/support/browser.ts, driven by
 * playwright-core; never a downloaded browser), end to end against the real API, dispatcher,
 * PostgreSQL, Redis and an HTTPS receiver: sign in with a link; add a webhook with `URL` +
 * `message.sent` + `Save`; see the test event delivered; publish an event that fails at its
 * receiver; find it under `Events` as failed with its four attempts; `Replay` it to an override
 * URL; see its audit entry under `Audit log`; bulk replay (Cancel, expired payloads, a service
 * that asks to slow down); at 375 px, the webhook's pages included; by keyboard; without
 * JavaScript. No page logs a Content-Security-Policy violation or a script error. Each screen's
 * screenshot goes to .tmp/screenshots; with UPDATE_DOC_SCREENSHOTS=1 the four that docs/dashboard.md
 * shows are refreshed under docs/screenshots too (committed files: not on every run).
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const SHOTS = path.join(ROOT, ".tmp/screenshots");
const DOC_SHOTS = path.join(ROOT, "docs/screenshots");
const UPDATE_DOCS = process.env.UPDATE_DOC_SCREENSHOTS === "1";

describe("dashboard in a browser", () => {
  let stack: Stack;
  let receiver: Receiver;
  let browser: Browser;
  let account: Account;
  // The endpoint's secret is learnt from the page; the receiver waits for it.
  let learnSecret!: (secret: string) => void;
  const secret = new Promise<string>((resolve) => (learnSecret = resolve));
  const problems: string[] = [];
  /** Secrets of the endpoints registered through the API (for the tests that need an event to look at). */
  const known = new Map<string, string>();

  /** A new account with an endpoint at `path` (accepting, unless the path starts with /failing) and one event sent to it. */
  async function accountWithEvent(path: string): Promise<{ account: Account; eventId: string; webhookId: string }> {
    const other = await stack.newAccount();
    const hook = await other.api("POST", "/v1/webhooks", { url: receiver.url(path), events: ["message.sent"] });
    known.set(path, hook.body.secret);
    const event = await other.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    return { account: other, eventId: event.body.event_id, webhookId: hook.body.id };
  }
  const nav = (page: Page, name: string) => page.getByRole("navigation", { name: "Dashboard" }).getByRole("link", { name, exact: true });

  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "300,300,300", DELIVERY_TIMEOUT_MS: "2000" } });
    receiver = await stack.startReceiver({
      secretFor: async (p) => (p === "/app" || p === "/override" ? secret : known.get(p)),
      // The endpoint accepts its test event and fails every email event; the override URL accepts.
      behavior: (a) =>
        (a.path === "/app" || a.path.startsWith("/failing")) && a.event !== "webhook.test" ? { status: 500 } : { status: 200 },
    });
    // A key with a name, as the audit log shows it.
    const issued = await createApiKey(stack.prisma, `browser-${Date.now()}`, "Ann's laptop");
    account = {
      apiKey: issued.key,
      apiKeyId: issued.id,
      accountId: issued.account_id,
      api: (method, url, body, headers, options) => callApi(stack.baseUrl, issued.key, method, url, body, headers, options),
    };
    await mkdir(SHOTS, { recursive: true });
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.close();
  });

  /** A page that records CSP violations, script errors and failed requests of this origin. */
  async function newPage(options: { width?: number; javaScript?: boolean; unavailable?: boolean } = {}): Promise<Page> {
    const context = await browser.newContext({
      viewport: { width: options.width ?? 1280, height: 900 },
      javaScriptEnabled: options.javaScript ?? true,
      baseURL: stack.baseUrl,
    });
    const page = await context.newPage();
    // Refusals (4xx) are part of the flows; a 503 only where the test makes the service unavailable.
    const expected = options.unavailable ? /status of (4\d\d|503)/ : /status of 4\d\d/;
    page.on("console", (m) => {
      if (m.type() === "error" && !expected.test(m.text())) problems.push(`console: ${m.text()}`);
    });
    page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
    return page;
  }

  const shot = (page: Page, name: string) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });

  /**
   * A screenshot for docs/dashboard.md (docs/screenshots/`file`.png), `width` px wide, from the top down to
   * the bottom of `until` (plus a margin) or of the page; only with UPDATE_DOC_SCREENSHOTS=1.
   */
  async function docShot(page: Page, file: string, width: number, until?: string): Promise<void> {
    if (!UPDATE_DOCS) return;
    const viewport = page.viewportSize()!;
    await page.setViewportSize({ width, height: 300 });
    const height = await page.evaluate((selector) => {
      const element = selector ? document.querySelector(selector) : null;
      return Math.ceil(element ? element.getBoundingClientRect().bottom + window.scrollY + 16 : document.documentElement.scrollHeight);
    }, until ?? null);
    await page.screenshot({ path: path.join(SHOTS, `doc-${file}.png`), clip: { x: 0, y: 0, width, height }, fullPage: true });
    await copyFile(path.join(SHOTS, `doc-${file}.png`), path.join(DOC_SHOTS, `${file}.png`));
    await page.setViewportSize(viewport);
  }

  test("sign in, add a webhook, see its test event, find a failed event with its four attempts, replay it to an override URL, see the audit entry", async () => {
    const page = await newPage();
    await page.goto((await dashboardLink(account)).url);
    await shot(page, "01-sign-in");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL("**/dashboard/webhooks");
    await page.getByRole("heading", { name: /Webhooks/ }).waitFor();
    await page.getByText("No webhooks yet").waitFor();
    await shot(page, "02-webhooks-empty");

    await page.getByRole("link", { name: "Add webhook" }).click();
    await page.getByLabel("URL", { exact: true }).fill(receiver.url("/app"));
    await page.getByLabel("message.sent", { exact: true }).check();
    await shot(page, "03-add-webhook");
    await page.getByRole("button", { name: "Save" }).click();
    await page.getByRole("heading", { name: "Webhook added" }).waitFor();
    learnSecret((await page.locator("#secret-value").textContent())!.trim());
    // htmx polls the test event's outcome until it is final.
    await page.locator("#test-event .badge-delivered").waitFor({ timeout: 20_000 });
    await page.getByText("200, delivered").waitFor();
    await page.getByRole("button", { name: "Copy" }).waitFor(); // shown by dashboard.js
    await shot(page, "04-webhook-added");
    await docShot(page, "dashboard-webhook-added", 960);

    await nav(page, "Webhooks").click();
    await page.getByText("100 % (1 of 1)").waitFor();
    await shot(page, "05-webhooks");

    const published = await account.api("POST", "/v1/events", {
      event_type: "message.sent",
      data: sampleData("message.sent", { subject: "Your invoice <#1234>" }),
    });
    const eventId: string = published.body.event_id;
    await nav(page, "Events").click();
    await page.getByLabel("Status").selectOption("failed");
    await page.getByRole("button", { name: "Filter" }).click();
    // Four attempts (initial and three retries, 300 ms apart) before the event is failed.
    for (let i = 0; i < 100 && !(await page.getByRole("link", { name: eventId }).isVisible()); i++) {
      await page.waitForTimeout(200);
      await page.reload();
    }
    const row = page.getByRole("row").filter({ has: page.getByRole("link", { name: eventId }) });
    await row.getByText("failed").waitFor();
    await shot(page, "06-events-failed");
    await page.getByRole("link", { name: eventId }).click();
    await page.getByRole("heading", { name: `Event ${eventId}` }).waitFor();
    await expectCount(page.locator("ol.timeline > li"), 4);
    for (const what of ["Initial attempt", "Retry 1", "Retry 2", "Retry 3"])
      await page.locator("ol.timeline strong", { hasText: new RegExp(`^${what}$`) }).waitFor();
    await shot(page, "07-event-failed");

    await page.getByLabel("Override URL (optional)").fill(receiver.url("/override"));
    await page.getByRole("button", { name: "Replay", exact: true }).click();
    await page.getByText("A replay is on the way").waitFor();
    // htmx polls the activity until the replay's attempt is recorded.
    await page.locator("ol.timeline strong", { hasText: /^Replay$/ }).waitFor({ timeout: 20_000 });
    await expectCount(page.locator("ol.timeline > li.is-ok"), 1);
    await shot(page, "08-event-replayed");
    await docShot(page, "dashboard-event", 880, "ol.timeline > li:last-child");

    await nav(page, "Audit log").click();
    const entry = page.getByRole("row").filter({ hasText: receiver.url("/override") });
    // Who: the key's name and id, in the entry's row.
    await entry.getByTitle(account.apiKeyId).waitFor(); // shortened, whole in its title
    await entry.getByText("Ann's laptop").waitFor();
    await entry.getByText("200", { exact: true }).waitFor();
    await shot(page, "09-audit-log");
    await docShot(page, "dashboard-audit-log", 960, ".table-wrap");

    await nav(page, "Deliveries").click();
    await page.getByRole("heading", { name: "Deliveries" }).waitFor();
    await expectCount(page.locator("tbody tr"), 6); // test event, four attempts, the replay
    await shot(page, "10-deliveries");

    // Bulk replay: the count first, then progress, then the summary.
    await nav(page, "Events").click();
    await page.getByRole("link", { name: "Bulk replay…" }).click();
    await page.getByRole("button", { name: "Count events" }).click();
    await page.getByRole("heading", { name: "1 event matches" }).waitFor();
    await page.getByRole("button", { name: "Replay 1 event" }).click();
    await page.locator("#bulk-summary").waitFor();
    expect(await page.locator("#bulk-replayed").textContent()).toBe("1");
    expect(await page.locator("#bulk-failed").textContent()).toBe("0");
    expect(await page.getByRole("button", { name: "Replay 1 event" }).isVisible()).toBe(false);
    expect(await page.getByRole("button", { name: "Cancel" }).isVisible()).toBe(false);
    await shot(page, "11-bulk-replay");

    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("heading", { name: "Signed out" }).waitFor();
    await page.goto("/dashboard/events");
    await page.getByRole("heading", { name: "Sign in to the dashboard" }).waitFor();
    expect(problems).toEqual([]);
  }, 120_000);

  test("bulk replay: Cancel after the first progress stops with k of n replayed; a whole run counts the purged payload as expired; 429 and 503 are waited out, then stop the run", async () => {
    const { account: bulk, eventId: first } = await accountWithEvent("/failing-bulk");
    const n = 5;
    const ids = [first];
    for (let i = 1; i < n; i++)
      ids.push((await bulk.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") })).body.event_id);
    await waitUntil(
      () => bulk.api("GET", "/v1/events?status=failed"),
      (r) => r.body.data.length === n,
      30_000,
    );
    // The oldest event's payload is gone (as retention leaves it): it is replayed last, newest first.
    await stack.pool.query("DELETE FROM event_payloads WHERE event_id = $1", [ids[0]]);
    const replays = () => stack.prisma.replay.count({ where: { accountId: bulk.accountId } });

    const page = await newPage({ unavailable: true });
    await page.goto((await dashboardLink(bulk)).url);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL("**/dashboard/webhooks");
    /** The bulk-replay page, counted: the run card says where the replays go before anything starts. */
    const count = async () => {
      await page.goto("/dashboard/bulk-replay");
      await page.getByRole("button", { name: "Count events" }).click();
      await page.getByRole("heading", { name: `${n} events match` }).waitFor();
      await page.locator("#bulk-destination").getByText("each event's own webhooks, at their current URLs").waitFor();
    };
    const summary = async () => {
      await page.locator("#bulk-summary").waitFor();
      const read = (id: string) => page.locator(id).textContent();
      return {
        status: await read("#bulk-status"),
        replayed: await read("#bulk-replayed"),
        expired: await read("#bulk-expired"),
        failed: await read("#bulk-failed"),
      };
    };

    // Cancel after the first progress update. The second replay request, if it was sent already,
    // is held until Cancel has been pressed: the run stops after one or two events, never all.
    await count();
    let release!: () => void;
    const cancelPressed = new Promise<void>((resolve) => (release = resolve));
    let seen = 0;
    await page.route("**/dashboard/bulk-replay/replay", async (route) => {
      if (++seen === 2) await cancelPressed;
      await route.continue();
    });
    await page.getByRole("button", { name: `Replay ${n} events` }).click();
    await page.waitForFunction(() => (document.getElementById("bulk-progress") as HTMLProgressElement).value >= 1);
    await page.getByRole("button", { name: "Cancel" }).click();
    release();
    const cancelled = await summary();
    const k = Number(/^Cancelled after (\d+) of (\d+) events\.$/.exec(cancelled.status ?? "")?.[1]);
    expect(cancelled.status).toBe(`Cancelled after ${k} of ${n} events.`);
    expect(k).toBeGreaterThanOrEqual(1);
    expect(k).toBeLessThanOrEqual(2);
    expect(cancelled).toMatchObject({ replayed: String(k), expired: "0", failed: "0" });
    expect(await replays()).toBe(k);
    await shot(page, "11b-bulk-replay-cancelled");
    await page.unrouteAll();

    // A whole run: the service first asks to slow down (429), then is unavailable (503), each
    // with Retry-After: the same event is tried again after each wait, and nothing is lost.
    await count();
    const refusals = [429, 503];
    await page.route("**/dashboard/bulk-replay/replay", async (route) => {
      const status = refusals.shift();
      if (status) await route.fulfill({ status, headers: { "retry-after": "1", "content-type": "text/html" }, body: "<p>busy</p>" });
      else await route.continue();
    });
    await page.getByRole("button", { name: `Replay ${n} events` }).click();
    await page.getByText(/^The service asked to slow down: waiting 1 s before trying event 1 of 5 again/).waitFor();
    const whole = await summary();
    expect(whole).toEqual({ status: `Done: ${n} events handled.`, replayed: String(n - 1), expired: "1", failed: "0" });
    await page.locator("#bulk-problems").getByText(`${ids[0]}: the event's payload is past retention`).waitFor();
    expect(await replays()).toBe(k + n - 1);
    await shot(page, "11c-bulk-replay-expired");
    await page.unrouteAll();

    // A service that stays unavailable: the run stops after the retries, and counts nothing failed.
    await count();
    await page.route("**/dashboard/bulk-replay/replay", (route) =>
      route.fulfill({ status: 503, headers: { "retry-after": "1", "content-type": "text/html" }, body: "<p>down</p>" }),
    );
    await page.getByRole("button", { name: `Replay ${n} events` }).click();
    const stopped = await summary();
    expect(stopped).toEqual({
      status: `Stopped after 0 of ${n}: the service stayed unavailable (HTTP 503) through 4 retries; try the rest later.`,
      replayed: "0",
      expired: "0",
      failed: "0",
    });
    expect(await replays()).toBe(k + n - 1);
    await page.unrouteAll();
    expect(await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)).toBe(0);
    expect(problems).toEqual([]);
  }, 90_000);

  test("at 375 px nothing is wider than the screen; every control is reached by keyboard with a visible focus ring", async () => {
    const page = await newPage({ width: 375 });
    const { account: narrow, webhookId } = await accountWithEvent("/narrow");
    await page.goto((await dashboardLink(narrow)).url);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL("**/dashboard/webhooks");
    const overflow = () => page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    const webhookPage = `/dashboard/webhooks/${webhookId}`;
    const pages: [string, string | null][] = [
      ["/dashboard/webhooks", null],
      ["/dashboard/webhooks/new", null],
      ["/dashboard/events", null],
      ["/dashboard/deliveries", null],
      ["/dashboard/audit-log", null],
      ["/dashboard/bulk-replay", null],
      [webhookPage, "14-webhook-375px"],
      [`${webhookPage}/secret`, "15-reveal-secret-375px"],
      [`${webhookPage}/rotate`, "17-rotate-secret-375px"],
      [`${webhookPage}/delete`, "19-delete-webhook-375px"],
    ];
    for (const [url, name] of pages) {
      await page.goto(url);
      expect([url, await overflow()]).toEqual([url, 0]);
      if (name) await shot(page, name);
    }
    // The webhook's page and its confirmations, each with what it is for.
    await page.goto(webhookPage);
    await page.getByRole("heading", { level: 1, name: receiver.url("/narrow") }).waitFor();
    await page.goto(`${webhookPage}/secret`);
    await page.getByRole("button", { name: "Reveal secret" }).click();
    await page
      .locator("#secret-value")
      .getByText(/^whsec_/)
      .waitFor();
    expect(await page.locator("#secret-value").textContent()).toBe(known.get("/narrow"));
    expect(await overflow()).toBe(0);
    await shot(page, "16-secret-revealed-375px");
    await page.goto(`${webhookPage}/rotate`);
    await page.getByRole("heading", { name: "Rotate the signing secret?" }).waitFor();
    await page.getByRole("button", { name: "Rotate secret" }).click();
    await page.getByRole("heading", { name: "Secret rotated" }).waitFor();
    expect(await overflow()).toBe(0);
    await shot(page, "18-secret-rotated-375px");
    await page.goto(`${webhookPage}/delete`);
    await page.getByRole("heading", { name: "Delete this webhook?" }).waitFor();
    await page.getByRole("button", { name: "Delete webhook" }).waitFor();
    await page.goto("/dashboard/events");
    await page.getByRole("link", { name: /^evt_/ }).first().click();
    expect(await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)).toBe(0);
    await shot(page, "12-event-375px");
    if (UPDATE_DOCS) {
      await page.screenshot({
        path: path.join(SHOTS, "doc-dashboard-event-375px.png"),
        clip: { x: 0, y: 0, width: 375, height: 1000 },
        fullPage: true,
      });
      await copyFile(path.join(SHOTS, "doc-dashboard-event-375px.png"), path.join(DOC_SHOTS, "dashboard-event-375px.png"));
    }

    // Keyboard: the skip link comes first, then every link and control in order, each with a focus ring.
    await page.goto("/dashboard/webhooks/new");
    await page.keyboard.press("Tab");
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("Skip to content");
    const seen: string[] = [];
    for (let i = 0; i < 40 && seen.at(-1) !== "Save"; i++) {
      await page.keyboard.press("Tab");
      const focused = await page.evaluate(() => {
        const el = document.activeElement as HTMLElement;
        const style = getComputedStyle(el);
        return { tag: el.tagName, label: el.id || el.textContent?.trim() || "", outline: style.outlineStyle };
      });
      expect([focused.label, focused.outline]).toEqual([focused.label, "solid"]);
      expect(["A", "BUTTON", "INPUT", "SELECT"]).toContain(focused.tag);
      seen.push(focused.label);
    }
    expect(seen.slice(0, 6)).toEqual(["Mailhooks", "Sign out", "Webhooks", "Events", "Deliveries", "Audit log"]);
    expect(seen).toEqual(expect.arrayContaining(["url", "event-message.sent", "event-message.bounced", "Save"]));
    await page.keyboard.press("Shift+Tab");
    await shot(page, "13-keyboard-focus-375px");
    expect(problems).toEqual([]);
  }, 60_000);

  test("without JavaScript: signing in, reading the lists and an event, and replaying work with plain forms", async () => {
    const page = await newPage({ javaScript: false });
    const { account: plain } = await accountWithEvent("/plain");
    await page.goto((await dashboardLink(plain)).url);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL("**/dashboard/webhooks");
    await nav(page, "Events").click();
    await page.getByRole("link", { name: /^evt_/ }).first().click();
    await page.getByRole("button", { name: "Replay", exact: true }).waitFor();
    await page.getByLabel("Override URL (optional)").fill(receiver.url("/override"));
    await page.getByRole("button", { name: "Replay", exact: true }).click();
    await page.getByText("A replay is on the way").waitFor();
    // Without the live update a person reloads (the page offers a Reload link while it is pending).
    const replayEntry = page.locator("ol.timeline strong", { hasText: /^Replay$/ });
    await page.getByRole("link", { name: "Reload" }).or(replayEntry).first().waitFor();
    for (let i = 0; i < 100 && !(await replayEntry.isVisible()); i++) {
      await page.waitForTimeout(100);
      await page.reload();
    }
    await replayEntry.waitFor();
    expect(await page.getByRole("button", { name: "Copy" }).isVisible()).toBe(false); // it needs the script
    await nav(page, "Audit log").click();
    await page.getByRole("heading", { name: "Audit log" }).waitFor();
    expect(problems).toEqual([]);
  }, 60_000);
});

async function expectCount(locator: ReturnType<Page["locator"]>, count: number): Promise<void> {
  await waitUntil(
    () => locator.count(),
    (n) => n === count,
    10_000,
    100,
  );
}
