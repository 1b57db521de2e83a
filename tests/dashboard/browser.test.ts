import { mkdir } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Browser, Page } from "playwright-core";
import type { Receiver } from "@mailhooks/receiver";
import { sampleData, startStack, type Account, type Stack } from "../support/stack.js";
import { launchChromium } from "../support/browser.js";
import { dashboardLink } from "./support.js";

/**
 * The dashboard in a real browser (Debian's Chromium at /usr/bin/chromium, driven by
 * playwright-core; never a downloaded browser), end to end against the real API, dispatcher,
 * PostgreSQL, Redis and an HTTPS receiver: sign in with a link; add an endpoint with `URL` +
 * `message.sent` + `Save`; see the test event delivered; publish an event that fails at its
 * receiver; find it under `Events` as failed with its four attempts; `Replay` it to an override
 * URL; see its audit entry under `Audit log`; bulk replay; at 375 px; by keyboard; without
 * JavaScript. No page logs a Content-Security-Policy violation or a script error. Each screen's
 * screenshot goes to .tmp/screenshots.
 */

const SHOTS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../.tmp/screenshots");

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

  /** A new account with an endpoint at `path` (accepting) and one event delivered to it. */
  async function accountWithEvent(path: string): Promise<{ account: Account; eventId: string }> {
    const other = await stack.newAccount();
    const hook = await other.api("POST", "/v1/webhooks", { url: receiver.url(path), events: ["message.sent"] });
    known.set(path, hook.body.secret);
    const event = await other.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent") });
    return { account: other, eventId: event.body.event_id };
  }
  const nav = (page: Page, name: string) => page.getByRole("navigation", { name: "Dashboard" }).getByRole("link", { name, exact: true });

  beforeAll(async () => {
    stack = await startStack({ env: { DELIVERY_RETRY_DELAYS_MS: "300,300,300", DELIVERY_TIMEOUT_MS: "2000" } });
    receiver = await stack.startReceiver({
      secretFor: async (p) => (p === "/app" || p === "/override" ? secret : known.get(p)),
      // The endpoint accepts its test event and fails every email event; the override URL accepts.
      behavior: (a) => (a.path === "/app" && a.event !== "webhook.test" ? { status: 500 } : { status: 200 }),
    });
    account = await stack.newAccount();
    await mkdir(SHOTS, { recursive: true });
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.close();
  });

  /** A page that records CSP violations, script errors and failed requests of this origin. */
  async function newPage(options: { width?: number; javaScript?: boolean } = {}): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: options.width ?? 1280, height: 900 }, javaScriptEnabled: options.javaScript ?? true, baseURL: stack.baseUrl });
    const page = await context.newPage();
    page.on("console", (m) => {
      if (m.type() === "error" && !/status of 4\d\d/.test(m.text())) problems.push(`console: ${m.text()}`);
    });
    page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
    return page;
  }

  const shot = (page: Page, name: string) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });

  test("sign in, add an endpoint, see its test event, find a failed event with its four attempts, replay it to an override URL, see the audit entry", async () => {
    const page = await newPage();
    await page.goto((await dashboardLink(account)).url);
    await shot(page, "01-sign-in");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL("**/dashboard/webhooks");
    await page.getByRole("heading", { name: /Webhooks/ }).waitFor();
    await page.getByText("No endpoints yet").waitFor();
    await shot(page, "02-webhooks-empty");

    await page.getByRole("link", { name: "Add endpoint" }).click();
    await page.getByLabel("URL", { exact: true }).fill(receiver.url("/app"));
    await page.getByLabel("message.sent", { exact: true }).check();
    await shot(page, "03-add-endpoint");
    await page.getByRole("button", { name: "Save" }).click();
    await page.getByRole("heading", { name: "Endpoint added" }).waitFor();
    learnSecret((await page.locator("#secret-value").textContent())!.trim());
    // htmx polls the test event's outcome until it is final.
    await page.locator("#test-event .badge-delivered").waitFor({ timeout: 20_000 });
    await page.getByText("200, delivered").waitFor();
    await page.getByRole("button", { name: "Copy" }).waitFor(); // shown by dashboard.js
    await shot(page, "04-endpoint-added");

    await nav(page, "Webhooks").click();
    await page.getByText("100 % (1 of 1)").waitFor();
    await shot(page, "05-webhooks");

    const published = await account.api("POST", "/v1/events", { event_type: "message.sent", data: sampleData("message.sent", { subject: "Your invoice <#1234>" }) });
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
    for (const what of ["Initial attempt", "Retry 1", "Retry 2", "Retry 3"]) await page.locator("ol.timeline strong", { hasText: new RegExp(`^${what}$`) }).waitFor();
    await shot(page, "07-event-failed");

    await page.getByLabel("Override URL (optional)").fill(receiver.url("/override"));
    await page.getByRole("button", { name: "Replay", exact: true }).click();
    await page.getByText("A replay is on the way").waitFor();
    // htmx polls the activity until the replay's attempt is recorded.
    await page.locator("ol.timeline strong", { hasText: /^Replay$/ }).waitFor({ timeout: 20_000 });
    await expectCount(page.locator("ol.timeline > li.is-ok"), 1);
    await shot(page, "08-event-replayed");

    await nav(page, "Audit log").click();
    const entry = page.getByRole("row").filter({ hasText: receiver.url("/override") });
    await entry.getByText(account.apiKeyId).waitFor();
    await entry.getByText("200", { exact: true }).waitFor();
    await shot(page, "09-audit-log");

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

  test("at 375 px nothing is wider than the screen; every control is reached by keyboard with a visible focus ring", async () => {
    const page = await newPage({ width: 375 });
    const { account: narrow } = await accountWithEvent("/narrow");
    await page.goto((await dashboardLink(narrow)).url);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL("**/dashboard/webhooks");
    for (const url of ["/dashboard/webhooks", "/dashboard/webhooks/new", "/dashboard/events", "/dashboard/deliveries", "/dashboard/audit-log", "/dashboard/bulk-replay"]) {
      await page.goto(url);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      expect([url, overflow]).toEqual([url, 0]);
    }
    await page.goto("/dashboard/events");
    await page.getByRole("link", { name: /^evt_/ }).first().click();
    expect(await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)).toBe(0);
    await shot(page, "12-event-375px");

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
  for (let i = 0; i < 100; i++) {
    if ((await locator.count()) === count) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  expect(await locator.count()).toBe(count);
}
